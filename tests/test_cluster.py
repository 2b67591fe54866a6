"""`--cluster`: a real local Ray cluster of three nodes on this machine (`ray start` for each,
its own temp folder and loopback IP), in which the memory monitor of a worker node really
kills a task. `oomlens parse --cluster` reads each node's logs where they lie and must find
that kill on its node with its cascade in the driver's console, exactly as a parse of
copies of the three logs folders does; a node killed afterwards is told as dead.

Every Ray process is a child of one `ray start --block` per node, stopped (SIGTERM: it
stops what it started) at the end; no process naming the cluster's folder may be left."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import pytest

import oomlens
from conftest import ROOT

BIN = Path(sys.executable).parent
OOMLENS = [sys.executable, "-m", "oomlens"]
VICTIM_IP, SPARE_IP = "127.0.0.2", "127.0.0.3"  # the node whose monitor kills, and the one killed after
GIB = 1 << 30
FOLDERS = re.compile(r"[^\s(),]*/")  # the folders of a path in a sentence (and a node's `ip:` before them)

# The driver: waits for the three nodes, then runs a task on the victim's node that takes
# 256 MiB more every 0.25 s (every page touched) until that node's memory monitor kills it.
DRIVER = """
import sys, time
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ray.init(address=sys.argv[1])
deadline = time.monotonic() + 60
while sum(n["Alive"] for n in ray.nodes()) < 3 and time.monotonic() < deadline:
    time.sleep(0.2)
victim = next(n["NodeID"] for n in ray.nodes() if n["NodeManagerAddress"] == sys.argv[2] and n["Alive"])


@ray.remote(max_retries=0, num_cpus=1)
def preprocess_shard():
    import numpy as np

    held = []
    for _ in range(20):
        held.append(np.ones(32 << 20))
        time.sleep(0.25)
    return len(held)


try:
    print("driver: result", ray.get(preprocess_shard.options(scheduling_strategy=NodeAffinitySchedulingStrategy(victim, soft=False)).remote()))
finally:
    ray.shutdown()
"""

# The library: a notebook or a bot reads the cluster as the command does
API = """
import sys
import oomlens

diagnosis = oomlens.analyze(cluster=sys.argv[1])
print(diagnosis.verdict["summary"])
print(sorted({i.ray_node["ip"] for i in diagnosis.inputs}))
"""


def _ray_env(root: Path, **settings: str) -> dict[str, str]:
    """The environment of every Ray process a test starts: all Ray writes lies under `root`.
    Ray puts what it keeps between runs under $RAY_TMPDIR/ray (`ray_current_cluster`, written
    by `cluster_utils` and `ray start`), /tmp/ray by default, and does not make that folder
    itself: a test that wrote there passed only on a machine that had run Ray before."""
    (root / "ray").mkdir(parents=True, exist_ok=True)
    quiet = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}  # Ray 2.60 asks for a token by default
    return {**os.environ, "RAY_TMPDIR": str(root), **quiet, **settings}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _host_ip() -> str:
    """The address Ray gives this machine's own node (the route out, as Ray finds it; no
    packet is sent): a driver here connects to the raylet of that address."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("8.8.8.8", 80))
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def _threshold() -> float:
    """A memory-usage threshold 3 GiB above what the machine uses now (/proc/meminfo)."""
    info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()}
    return round((info["MemTotal"] - info["MemAvailable"] + 3 * GIB) / info["MemTotal"], 3)


def _oomlens(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*OOMLENS, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _started(process: subprocess.Popen, log: Path) -> None:
    """Wait until `ray start` says its node runs (its raylet registered with the GCS)."""
    deadline = time.monotonic() + 60
    while "Ray runtime started" not in log.read_text():
        assert time.monotonic() < deadline and process.poll() is None, log.read_text()
        time.sleep(0.2)


def _naming(root: Path) -> list[int]:
    """The processes whose command line names the cluster's folder: its Ray processes."""
    return [int(pid) for pid in subprocess.run(["pgrep", "-f", str(root)], capture_output=True, text=True).stdout.split()]


def _kill_orphans(root: Path) -> None:
    for pid in _naming(root):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _naming(root) and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster():
    """Start the cluster, make the kill, read it with --cluster and from copies, then kill the
    spare node's raylet and read again; stop everything. Yields what the tests look at."""
    root = Path(tempfile.mkdtemp(prefix="oomlens-ray-"))  # short: Ray's socket paths lie under it
    env = _ray_env(
        root,
        RAY_health_check_period_ms="500",  # a lost node is known dead within seconds
        RAY_health_check_timeout_ms="500",
        RAY_health_check_failure_threshold="2",
        RAY_task_oom_retries="0",
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    port, host = _free_port(), _host_ip()
    address = f"{host}:{port}"
    common = ["--block", "--num-cpus", "1", "--disable-usage-stats"]
    nodes: dict[str, subprocess.Popen] = {}
    try:
        with open(root / "head.log", "w") as log:
            head = ["--head", "--port", str(port), "--node-ip-address", host, "--include-dashboard=false"]
            head += ["--ray-client-server-port", str(_free_port()), "--dashboard-agent-listen-port", str(_free_port())]
            nodes["head"] = subprocess.Popen([str(BIN / "ray"), "start", *head, "--temp-dir", str(root / "head"), *common], env=env, stdout=log, stderr=log)
        _started(nodes["head"], root / "head.log")  # the other nodes may join
        for ip in (VICTIM_IP, SPARE_IP):
            node_env = {**env, "RAY_memory_usage_threshold": str(_threshold())} if ip == VICTIM_IP else env
            join = ["--address", address, "--node-ip-address", ip, "--dashboard-agent-listen-port", str(_free_port()), "--temp-dir", str(root / ip)]
            with open(root / f"{ip}.log", "w") as log:
                nodes[ip] = subprocess.Popen([str(BIN / "ray"), "start", *join, *common], env=node_env, stdout=log, stderr=log)
        for ip in (VICTIM_IP, SPARE_IP):
            _started(nodes[ip], root / f"{ip}.log")
        with open(root / "driver.log", "w") as console:
            run = subprocess.run([sys.executable, "-c", DRIVER, address, VICTIM_IP], env=env, stdout=console, stderr=subprocess.STDOUT, timeout=120)
        driver = root / "driver.log"
        assert run.returncode != 0 and "OutOfMemoryError" in driver.read_text(), driver.read_text()

        # a user reads the live cluster, and the driver's console saved beside it ...
        done = {"live": _oomlens("parse", "--cluster", address, str(driver), "--format", "json", env=env)}
        # ... and copies the three logs folders by hand right after (the logs only grow)
        copies = root / "copies"
        for name in ("head", VICTIM_IP, SPARE_IP):
            session = next((root / name).glob("session_2*"))
            shutil.copytree(session / "logs", copies / name / session.name / "logs", symlinks=True)
        reads = {
            "copied": ("parse", str(copies), str(driver), "--format", "json"),
            # ... and the copies at a URL every node reaches (object storage), shared out among the nodes
            "shared": ("parse", "--cluster", address, copies.as_uri(), "--format", "json"),
            "here": ("parse", copies.as_uri(), "--format", "json"),
            "watched": ("watch", "--cluster", address, str(driver), "--once"),
            "reported": ("report", "--cluster", address, str(driver), "-o", str(root / "report.html"), "--plotly", "cdn"),
            "late": ("parse", "--cluster", address, "--node-timeout", "0.001"),  # no node answers that fast
        }
        # the other reads, each a driver of its own as users' would be, side by side (most of
        # each one's time is Ray starting its workers)
        with ThreadPoolExecutor(len(reads) + 1) as pool:
            running = {name: pool.submit(_oomlens, *args, env=env) for name, args in reads.items()}
            api_run = pool.submit(subprocess.run, [sys.executable, "-c", API, address], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
            done |= {name: future.result() for name, future in running.items()}
            api = api_run.result()
        reported = done["reported"]
        page = (root / "report.html").read_text(encoding="utf-8") if reported.returncode == 0 else ""

        # The spare node's raylet dies; Ray marks the node dead after its health checks
        raylet = subprocess.run(["pgrep", "-P", str(nodes[SPARE_IP].pid), "-x", "raylet"], capture_output=True, text=True).stdout.split()
        assert len(raylet) == 1, raylet
        os.kill(int(raylet[0]), signal.SIGKILL)
        check = f"import ray, sys, time\nray.init(address={address!r})\nwhile any(n['Alive'] for n in ray.nodes() if n['NodeManagerAddress'] == {SPARE_IP!r}): time.sleep(0.2)"
        subprocess.run([sys.executable, "-c", check], env=env, timeout=60, check=True, capture_output=True)
        dead = _oomlens("parse", "--cluster", address, "--format", "json", env=env)
        yield {"root": root, **done, "reported": (reported, page), "api": api, "dead": dead}
    finally:
        for process in reversed(nodes.values()):
            _stop(process)
        _kill_orphans(root)  # the workers of the raylet killed above, which no `ray start` holds any more
        left = _naming(root)
        shutil.rmtree(root, ignore_errors=True)
        assert not left, f"Ray processes left running: {left}"


def _contract(run: subprocess.CompletedProcess[str]) -> dict:
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def _event(event: dict) -> tuple:
    """An event as both reads must agree on: all but where its files lie (a node's own
    folder, or a copy of it)."""
    places = tuple((Path(s["path"]).name, s["line"], s["end_line"]) for s in event["sources"])
    keep = {k: v for k, v in event.items() if k not in ("id", "source", "sources")}
    return json.dumps(keep, sort_keys=True), places


def _incidents(contract: dict) -> list[tuple]:
    """The incidents as both reads must agree on: their events as _event has them, the
    evidence with each file named by its name alone."""
    by_id = {e["id"]: _event(e) for e in contract["events"]}
    found = []
    for incident in contract["incidents"]:
        rest = {k: v for k, v in incident.items() if k not in ("id", "root", "cascade")}
        rest["evidence"] = [FOLDERS.sub("", line) for line in rest["evidence"]]
        found.append((by_id[incident["root"]], sorted(by_id[e] for e in incident["cascade"]), json.dumps(rest, sort_keys=True)))
    return sorted(found)


@pytest.mark.slow
def test_cluster_finds_the_kill_on_its_node_and_its_cascade(cluster):
    contract = _contract(cluster["live"])
    kills = [e for e in contract["events"] if e["kind"] == "ray_oom_kill"]
    assert len(kills) == 1 and kills[0]["node"] == VICTIM_IP, kills
    kill = kills[0]
    [victim] = kill["fields"]["killed"]
    assert victim["name"] == "preprocess_shard" and victim["bytes"] > GIB and kill["pid"] == victim["pid"]
    places = [s["path"] for s in kill["sources"]]
    assert any(p.startswith(f"{VICTIM_IP}:/") and p.endswith("/logs/raylet.out") for p in places), places  # read on its node
    assert str(cluster["root"] / "driver.log") in places, places  # the driver's OutOfMemoryError, the same kill told again
    [incident] = [i for i in contract["incidents"] if i["root"] == kill["id"]]
    cascade = [e for e in contract["events"] if e["id"] in incident["cascade"]]
    died = [e for e in cascade if e["kind"] == "ray_worker_died" and e["pid"] == victim["pid"] and e["node"] == VICTIM_IP]
    assert died and all(not s["path"].startswith((f"{VICTIM_IP}:", f"{SPARE_IP}:")) for e in died for s in e["sources"])  # told by the head's GCS
    assert incident["memory"] == "host" and incident["phase"] == "preprocess_shard"
    assert contract["verdict"]["memory"] == "host" and f"on node {VICTIM_IP}" in contract["verdict"]["summary"]


@pytest.mark.slow
def test_cluster_tells_each_node_read_and_its_bytes(cluster):
    contract = _contract(cluster["live"])
    on_nodes = [i for i in contract["inputs"] if "ray_node" in i]
    by_ip: dict[str, int] = {}
    for item in on_nodes:
        assert item["path"].startswith(item["ray_node"]["ip"] + ":/") and item["ray_node"]["state"] == "read"
        by_ip[item["ray_node"]["ip"]] = by_ip.get(item["ray_node"]["ip"], 0) + item["bytes"]
    assert set(by_ip) >= {VICTIM_IP, SPARE_IP} and len(by_ip) == 3 and all(by_ip.values()), by_ip
    assert {i["path"] for i in contract["inputs"] if "ray_node" not in i} == {str(cluster["root"] / "driver.log")}
    raylets = {i["ray_node"]["ip"] for i in on_nodes if i["role"] == "raylet"}
    assert len(raylets) == 3  # one raylet.out read on each node, where it lies
    jsonschema.validate(contract, oomlens.schema())


@pytest.mark.slow
def test_cluster_reads_what_copies_of_the_folders_read(cluster):
    live, copied = _contract(cluster["live"]), _contract(cluster["copied"])
    assert sorted(_event(e) for e in live["events"]) == sorted(_event(e) for e in copied["events"])
    assert _incidents(live) == _incidents(copied) and _incidents(live)
    assert live["verdict"] == copied["verdict"]
    assert live["clocks"] == copied["clocks"]
    assert 0 < sum(i["bytes"] for i in live["inputs"]) <= sum(i["bytes"] for i in copied["inputs"])  # copied after: the logs only grew


@pytest.mark.slow
def test_objects_at_a_url_are_shared_out_among_the_nodes_and_read_as_here(cluster):
    """The copies at a file:// URL, given with --cluster, are read on the nodes (each its
    share, biggest first) beside the nodes' own logs, and tell what they tell read here."""
    shared, here = _contract(cluster["shared"]), _contract(cluster["here"])
    url = here["inputs"][0]["path"].split("/copies/")[0] + "/copies/"
    objects = [dict(i) for i in shared["inputs"] if i["path"].startswith(url)]
    nodes = [i.pop("ray_node") for i in objects if "ray_node" in i]  # what the walk tells (an empty folder) is told here
    assert objects == here["inputs"]  # each object named by its URL, in the walk's order, whichever node read it
    assert len(nodes) == len([i for i in objects if not i["problems"] or i["bytes"]])
    assert all(n["state"] == "read" for n in nodes) and len({n["ip"] for n in nodes}) == 3, nodes  # every node took a share

    def facts(event: dict) -> str:
        return json.dumps({k: event[k] for k in ("kind", "time", "node", "pid", "fields")}, sort_keys=True)

    found = {facts(e): {json.dumps(s, sort_keys=True) for s in e["sources"]} for e in shared["events"]}
    for event in here["events"]:  # the same event, the copy's places among its sources (the node's own log tells it too)
        assert facts(event) in found and {json.dumps(s, sort_keys=True) for s in event["sources"]} <= found[facts(event)], event
    assert shared["verdict"]["summary"] == here["verdict"]["summary"]


@pytest.mark.slow
def test_report_cluster_writes_the_page_of_the_kill_on_its_node(cluster):
    run, page = cluster["reported"]
    assert run.returncode == 0, run.stderr
    assert "wrote" in run.stdout + run.stderr and "<html" in page.lower()
    assert VICTIM_IP in page and "preprocess_shard" in page  # the kill, on the node whose monitor made it


@pytest.mark.slow
def test_a_dead_node_is_one_problem_line_and_the_others_are_read(cluster):
    run = cluster["dead"]
    contract = _contract(run)
    told = [line for line in run.stderr.splitlines() if line.startswith(f"oomlens: {SPARE_IP}: ")]
    assert len(told) == 1, run.stderr
    assert "is dead" in told[0] and "its logs are not reachable through Ray unless they were collected before it died" in told[0]
    [node] = [i for i in contract["inputs"] if i["path"] == SPARE_IP]
    assert node["ray_node"]["state"] == "dead" and node["bytes"] == 0 and len(node["problems"]) == 1
    assert not [i for i in contract["inputs"] if i["path"].startswith(f"{SPARE_IP}:")]
    states = {i["ray_node"]["ip"]: i["ray_node"]["state"] for i in contract["inputs"]}
    assert len(states) == 3 and states[VICTIM_IP] == "read" and states[SPARE_IP] == "dead"
    assert [e["node"] for e in contract["events"] if e["kind"] == "ray_oom_kill"] == [VICTIM_IP]  # the live nodes are still read
    jsonschema.validate(contract, oomlens.schema())


SHARED = """
import sys
from ray.cluster_utils import Cluster
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "temp_dir": sys.argv[1], "include_dashboard": False})
cluster.add_node(num_cpus=1, temp_dir=sys.argv[1])
cluster.wait_for_nodes()
print(cluster.address, flush=True)
sys.stdin.readline()
cluster.shutdown()
"""


@pytest.mark.slow
def test_raylets_of_one_host_sharing_a_logs_folder_read_it_once():
    """ray.cluster_utils starts every raylet in one session folder (raylet.out, raylet.1.out):
    its files are read once, as the first node's, and the other node says so in one line.
    A worker the raylet starts while the cluster is read (for the reader's own job) may
    write its first files after they were listed: the local read, made after, has them too."""
    root = Path(tempfile.mkdtemp(prefix="oomlens-ray-"))
    env = _ray_env(root)
    keeper = subprocess.Popen([sys.executable, "-c", SHARED, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert keeper.stdout is not None and keeper.stdin is not None
        address = keeper.stdout.readline().strip()
        started = time.time()
        run = _oomlens("parse", "--cluster", address, "--format", "json", env=env)
        [logs] = root.glob("session_2*/logs")
        here = _oomlens("parse", str(logs), "--format", "json", env=env)
        born = {str(p) for p in logs.iterdir() if p.name.startswith(("worker-", "python-core-worker-")) and p.stat().st_ctime >= started}
    finally:
        if keeper.stdin is not None:
            keeper.stdin.close()
        keeper.wait(timeout=60)
        _kill_orphans(root)
        left = _naming(root)
        shutil.rmtree(root, ignore_errors=True)
        assert not left, f"Ray processes left running: {left}"
    contract, local = _contract(run), _contract(here)
    read = [i["path"].split(":", 1)[1] for i in contract["inputs"] if ":" in i["path"]]
    assert len(read) == len(set(read)) and set(read) <= {i["path"] for i in local["inputs"]}  # each file once
    assert {i["path"] for i in local["inputs"]} - set(read) <= born  # and every file but a worker's born meanwhile
    told = [i for i in contract["inputs"] if ":" not in i["path"]]
    assert len(told) == 1 and "on the same host (raylets of one session): read once" in told[0]["problems"][0], told
    assert len(contract["events"]) == len(local["events"])


def test_without_ray_cluster_says_how_to_install_it_in_one_line(tmp_path):
    fake = tmp_path / "ray"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    for command in ("parse", "report", "watch"):
        run = _oomlens(command, "--cluster", "auto", env=env)
        assert run.returncode == 2 and run.stdout == ""
        assert run.stderr == "oomlens: --cluster needs Ray: pip install 'oomlens[ray]'\n", run.stderr


def test_without_paths_or_cluster_is_a_usage_error():
    run = _oomlens("parse")
    assert run.returncode == 2 and "give PATHS to read, or --cluster ADDRESS" in run.stderr


@pytest.mark.slow
def test_watch_cluster_tells_the_incident_once(cluster):
    run = cluster["watched"]
    assert run.returncode == 0, run.stderr
    [line] = [json.loads(text) for text in run.stdout.splitlines()]
    assert line["update"] is False and line["incident"]["root_kind"] == "ray_oom_kill" and line["incident"]["memory"] == "host"
    [root] = [e for e in line["events"] if e["id"] == line["incident"]["root"]]
    assert root["node"] == VICTIM_IP


@pytest.mark.slow
def test_analyze_reads_the_cluster_from_python(cluster):
    run = cluster["api"]
    assert run.returncode == 0, run.stderr
    summary, nodes = run.stdout.splitlines()
    assert summary.startswith(f"host memory OOM on node {VICTIM_IP} at ")
    assert VICTIM_IP in nodes and SPARE_IP in nodes


@pytest.mark.slow
def test_a_node_that_does_not_answer_in_time_is_told_and_not_waited_for(cluster):
    run = cluster["late"]
    assert run.returncode == 1 and run.stdout.count("did not answer") == 0
    told = [line for line in run.stderr.splitlines() if "did not answer within 0.001 s (its task was cancelled): nothing read" in line]
    assert len(told) == 3, run.stderr
    assert run.stderr.splitlines()[-1] == f"oomlens: nothing could be read from the Ray cluster at {run.args[run.args.index('--cluster') + 1]}"
