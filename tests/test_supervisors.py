"""Kills by supervisors outside the process: Kubernetes, docker, Slurm, systemd-oomd, torchrun.

Each wording is read under the variation real logs show (any quantity and unit, any count and
step, any envelope a collector puts before it), and a run a supervisor killed gets a verdict
with the component Ray's report of the dead worker names."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

import oomlens
from oomlens.families.containers import QUANTITY, quantity

ENVELOPES = (
    "",
    "2026-03-02T11:04:05.123456789Z ",  # a collector's stamp (docker logs -t, fluent-bit)
    "Mar  2 11:04:05 node-3 slurmstepd[4242]: ",  # syslog
    "[2026-03-02T11:04:05.123] ",  # slurmstepd's own stamp
    "(raylet) ",
)


def diagnosis_of(tmp_path, text: str) -> oomlens.Diagnosis:  # noqa: ANN001 - pytest's tmp_path
    log = tmp_path / "job.log"
    log.write_text(text, encoding="utf-8")
    return oomlens.analyze(str(log), jobs=1)


def verdict_of(tmp_path, text: str) -> dict:  # noqa: ANN001 - pytest's tmp_path
    return diagnosis_of(tmp_path, text).verdict


def settings_of(diagnosis: oomlens.Diagnosis) -> list[str]:
    return [r["setting"] for r in diagnosis.to_dict()["incidents"][0]["remedies"]]


def kinds(text: str) -> list[str]:
    return [e.kind for e in oomlens.parse_text(text)]


def one(text: str, kind: str) -> oomlens.Event:
    found = [e for e in oomlens.parse_text(text) if e.kind == kind]
    assert len(found) == 1, [(e.kind, e.fields) for e in oomlens.parse_text(text)]
    return found[0]


@settings(max_examples=60, deadline=None)
@given(
    threshold=st.integers(1, 4096),
    available=st.integers(0, 10**7),
    used=st.integers(1, 4096),
    request=st.integers(1, 4096),
    units=st.tuples(*[st.sampled_from(sorted(QUANTITY)) for _ in range(4)]),
    name=st.from_regex(r"[a-z][a-z0-9-]{0,30}[a-z0-9]", fullmatch=True),
    newer=st.booleans(),
)
def test_an_eviction_for_memory_reads_every_quantity(threshold, available, used, request, units, name, newer):
    q = [f"{threshold}{units[0]}", f"{available}{units[1]}", f"{used}{units[2]}", f"{request}{units[3]}"]
    usage = f"request is {q[3]}, has larger consumption of memory." if newer else f"which exceeds its request of {q[3]}."
    text = f"  Warning  Evicted  3m  kubelet  The node was low on resource: memory. Threshold quantity: {q[0]}, available: {q[1]}. Container {name} was using {q[2]}, {usage}"
    event = one(text, "supervisor_oom")
    assert event.memory == "host"
    assert event.fields["action"] == "evicted"
    assert event.fields["target"] == name
    assert (event.fields["threshold_bytes"], event.fields["available_bytes"]) == (quantity(q[0]), quantity(q[1]))
    assert (event.fields["used_bytes"], event.fields["request_bytes"]) == (quantity(q[2]), quantity(q[3]))


def test_kubernetes_quantities_are_binary_or_decimal_by_suffix():
    assert quantity("991045Ki") == 991045 * 1024
    assert quantity("1Gi") == 2**30
    assert quantity("1G") == 10**9
    assert quantity("500M") == 5 * 10**8
    assert quantity("4096") == 4096


def test_an_eviction_for_disk_is_no_memory_failure():
    text = "Status:           Failed\nReason:           Evicted\nMessage:          The node was low on resource: ephemeral-storage. Threshold quantity: 4Gi, available: 1Mi. "
    assert kinds(text) == []


@settings(max_examples=40, deadline=None)
@given(
    indent=st.integers(0, 8),
    pad=st.integers(1, 12),
    yaml_first=st.booleans(),
    restarts=st.integers(0, 50),
)
def test_a_container_status_says_oomkilled_in_any_layout(indent, pad, yaml_first, restarts):
    """kubectl prints the reason and the exit code in either order, indented as deep as the
    status is nested; both are one report."""
    lead, gap = " " * indent, " " * pad
    if yaml_first:
        lines = [f"{lead}exitCode: 137", f'{lead}finishedAt: "2025-12-17T10:56:44Z"', f"{lead}reason: OOMKilled", f'{lead}startedAt: "2025-12-17T10:56:35Z"']
    else:
        lines = [f"{lead}Last State:{gap}Terminated", f"{lead}  Reason:{gap}OOMKilled", f"{lead}  Exit Code:{gap}137", f"{lead}Restart Count:{gap}{restarts}"]
    event = one("\n".join(lines), "supervisor_oom")
    assert (event.fields["supervisor"], event.fields["action"], event.fields["exit_code"]) == ("kubernetes", "OOMKilled", 137)
    assert "sigkill" not in kinds("\n".join(lines))


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(1, 500),
    job=st.integers(1, 10**8),
    step=st.one_of(st.integers(0, 99).map(str), st.sampled_from(["batch", "extern"])),
    wording=st.sampled_from(["23.02", "21.08", "20.11", "18.08"]),
    envelope=st.sampled_from(ENVELOPES),
)
def test_slurm_counts_the_kernel_s_kills_in_every_release_s_wording(count, job, step, wording, envelope):
    target = f"StepId={job}.{step}" if wording != "18.08" else f"step {job}.{step}"
    events = "event" if count == 1 else "events"
    line = {
        "23.02": f"Detected {count} oom_kill {events} in {target}. Some of the step tasks have been OOM Killed.",
        "21.08": f"Detected {count} oom-kill event(s) in {target}. Some of your processes may have been killed by the cgroup out-of-memory handler.",
        "20.11": f"Detected {count} oom-kill event(s) in {target} cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.",
        "18.08": f"Detected {count} oom-kill event(s) in {target} cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.",
    }[wording]
    event = one(f"{envelope}slurmstepd: error: {line}", "supervisor_oom")
    assert (event.fields["supervisor"], event.fields["count"], event.fields["target"], event.memory) == ("slurm", count, target, "host")


@settings(max_examples=40, deadline=None)
@given(used=st.integers(1, 2**45), limit=st.integers(1, 2**45), envelope=st.sampled_from(ENVELOPES))
def test_slurm_s_own_kill_over_the_limit_reads_bytes(used, limit, envelope):
    event = one(f"{envelope}slurmstepd: error: StepId=81.0 exceeded memory limit ({used} > {limit}), being killed", "supervisor_oom")
    assert (event.fields["used_bytes"], event.fields["limit_bytes"]) == (used, limit)


def test_oomd_s_kill_and_the_service_manager_s_word_on_it_are_one_occurrence():
    text = (
        "Sep 02 21:51:58 gpu-ws systemd-oomd[911]: Killed /user.slice/user-1000.slice/user@1000.service/app.slice/vte-spawn-5c1e.scope due to memory pressure"
        " for /user.slice/user-1000.slice/user@1000.service being 68.27% > 50.00% for > 20s with reclaim activity\n"
        "Sep 02 21:51:58 gpu-ws systemd[1702]: vte-spawn-5c1e.scope: systemd-oomd killed 64 process(es) in this unit.\n"
        "Sep 02 21:51:58 gpu-ws systemd[1702]: other.scope: systemd-oomd killed 3 process(es) in this unit.\n"
    )
    events = [e for e in oomlens.parse_text(text) if e.kind == "supervisor_oom"]
    assert sorted((e.fields["target"], e.fields["count"], len(e.sources)) for e in events) == [("other.scope", 3, 1), ("vte-spawn-5c1e.scope", 64, 2)]


def test_a_cancelled_slurm_step_and_a_limit_touched_once_are_no_kill():
    assert kinds("slurmstepd: error: *** STEP 22051979.1 ON lrdn1786 CANCELLED AT 2025-10-23T14:31:08 ***") == []
    assert kinds("slurmstepd: Step 4242.0 hit memory limit at least once during execution. This may or may not result in some failure.") == []


@settings(max_examples=40, deadline=None)
@given(now=st.integers(0, 10000), limit=st.integers(0, 10000), envelope=st.sampled_from(ENVELOPES), marked=st.booleans())
def test_systemd_oomd_s_pressure_kill(now, limit, envelope, marked):
    verb = "Marked /user.slice/app.scope for killing" if marked else "Killed /user.slice/app.scope"
    text = f"{envelope}systemd-oomd[804]: {verb} due to memory pressure for /user.slice being {now // 100}.{now % 100:02d}% > {limit // 100}.{limit % 100:02d}% for > 20s with reclaim activity"
    event = one(text, "supervisor_oom")
    assert (event.fields["target"], event.fields["cgroup"]) == ("app.scope", "/user.slice/app.scope")
    assert (event.fields["pressure_pct"], event.fields["pressure_limit_pct"]) == (now / 100, limit / 100)


@settings(max_examples=40, deadline=None)
@given(pid=st.integers(2, 4194304), rank=st.integers(0, 1023), local=st.integers(0, 15), code=st.sampled_from([-9, -6, -11, -15, 1]))
def test_torchrun_s_table_is_a_sigkill_only_for_signal_9(pid, rank, local, code):
    signal = {-9: "SIGKILL", -6: "SIGABRT", -11: "SIGSEGV", -15: "SIGTERM"}.get(code)
    traceback = f"Signal {-code} ({signal}) received by PID {pid}" if signal else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
    text = "\n".join(
        [
            "Root Cause (first observed failure):",
            "[0]:",
            "  time      : 2024-06-01_12:00:01",
            "  host      : node-7.cluster",
            f"  rank      : {rank} (local_rank: {local})",
            f"  exitcode  : {code} (pid: {pid})",
            "  error_file: <N/A>",
            f"  traceback : {traceback}",
        ]
    )
    found = [e for e in oomlens.parse_text(text) if e.kind == "sigkill"]
    if code != -9:
        assert not found
        return
    assert len(found) == 1
    assert (found[0].pid, found[0].rank, found[0].fields["local_rank"], found[0].fields["exit_code"]) == (pid, rank, local, -9)


def test_a_sigkill_alone_is_a_hint_that_says_where_to_look(tmp_path):
    verdict = verdict_of(
        tmp_path, "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 4242) of binary: /usr/bin/python3\n"
    )
    assert verdict["root_kind"] == "sigkill"
    assert verdict["memory"] is None  # a hint, not a verdict
    assert "dmesg" in verdict["summary"] and "OOM killer" in verdict["summary"]


# -- end to end: a verdict with the component ---------------------------------------------------

DEATH = """\
[2026-03-02 11:04:01,517 E 912 912] (raylet) worker_pool.cc:581: A worker died or was killed while executing a task by an unexpected system error.
ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.
	class_name: {actor}
	actor_id: dc9946fd1fb8b29901d84b0a01000000
	pid: 16772
	name: {actor}_0
	namespace: 058a0e63-9b1a-4f32-93a3-5e4261a51d9c
	ip: 10.0.0.7
The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file.
"""


def test_slurm_oom_kill_of_a_ray_worker_names_its_component(tmp_path):
    text = DEATH.format(actor="RewardModelRayActor") + (
        "[2026-03-02T11:04:09.002] error: Detected 1 oom_kill event in StepId=5512.0. Some of the step tasks have been OOM Killed.\n"
        "srun: error: gpu-node-7: task 0: Out Of Memory\n"
    )
    diagnosis = diagnosis_of(tmp_path, text)
    verdict = diagnosis.verdict
    assert (verdict["root_kind"], verdict["memory"], verdict["component"]) == ("supervisor_oom", "host", "reward_model")
    assert "slurm" in verdict["summary"]
    assert "--mem (or --mem-per-cpu, --mem-per-gpu)" in settings_of(diagnosis)


def test_kubernetes_oomkilled_of_a_ray_worker_names_its_component(tmp_path):
    text = DEATH.format(actor="CriticModelRayActor") + (
        "$ kubectl describe pod raycluster-worker-critic-5xk2p\n    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n"
    )
    diagnosis = diagnosis_of(tmp_path, text)
    verdict = diagnosis.verdict
    assert (verdict["root_kind"], verdict["memory"], verdict["component"]) == ("supervisor_oom", "host", "critic")
    assert "kubernetes" in verdict["summary"] and "OOMKilled" in verdict["summary"]
    assert "resources.limits.memory" in settings_of(diagnosis)
    assert "resources.requests.memory" not in settings_of(diagnosis)  # an eviction's remedy, not an OOM kill's


def test_an_eviction_asks_for_a_request_equal_to_the_limit(tmp_path):
    text = "Status:           Failed\nReason:           Evicted\nMessage:          The node was low on resource: memory. Threshold quantity: 1Gi, available: 991045Ki. \n"
    diagnosis = diagnosis_of(tmp_path, text)
    assert settings_of(diagnosis) == ["resources.requests.memory"]
