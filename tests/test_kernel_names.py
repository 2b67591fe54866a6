"""The kernel names a process by 15 characters of its title and picks Ray's workers first:
a cut name still names its component, and the kernel's task table names who held the memory."""

from __future__ import annotations

from hypothesis import assume, given, settings, strategies as st

import oomlens
from oomlens.correlate import TASK_COMM_LEN, Context, _known_names, component_of, process_component

KNOWN = sorted(_known_names())
METHODS = ("compute_reward", "fit", "generate_sequences", "init_model_from_pretrained", "train", "run", "update_actor", "")


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(KNOWN), method=st.sampled_from(METHODS))
def test_a_title_the_kernel_cut_names_the_component_of_the_names_it_begins(name, method):
    title = f"ray::{name}" + (f".{method}" if method else "")
    cut = title[: TASK_COMM_LEN - 1]
    begun = {component_of(n) for n in KNOWN if n.startswith(cut[5:])} if len(title) >= TASK_COMM_LEN - 1 else set()
    # a cut no known name begins kept a whole name (and a piece of its method): read as it stands
    expected = (begun.pop() if len(begun) == 1 else None) if begun else component_of(cut[5:])
    assert process_component(cut, None, Context([])) == expected
    if len(title) < TASK_COMM_LEN - 1:
        assert expected == component_of(title[5:])  # a title not cut is read whole


def test_the_names_the_logs_spell_come_before_the_frameworks():
    context = Context([])
    context.names = {"RewardScorer.score"}  # a run's own class, none of the known names
    context.titles = {}
    assert process_component("ray::RewardScore", None, context) is None  # the logs' own name names no component
    context.names = {"compute_ref_log_prob", "compute_reward_async"}
    assert process_component("ray::compute_re", None, context) is None  # two names, two components: neither
    context.titles = {4242: {"compute_reward_async"}}
    assert process_component("ray::compute_re", 4242, context) == "reward_model"  # the pid's own name decides


def test_the_cut_names_of_real_reports():
    context = Context([])
    assert process_component("ray::RewardMode", None, context) == "reward_model"
    assert process_component("ray::compute_re", None, context) == "reward_model"  # veRL's compute_reward_async task
    assert process_component("ray::WorkerDict", None, context) is None  # a colocated worker: any role
    assert process_component("python", None, context) is None


def report(rows: list[tuple[int, int, int, str]], victim: int, page: int) -> str:
    """A kernel OOM report (5.15's wording) with its task table; rows: (pid, rss pages, adj, comm)."""
    lines = [
        "[ 7250.995283] python invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0",
        "[ 7250.995286] CPU: 6 PID: 17218 Comm: python Not tainted 5.15.0-1023-aws #25~18.04.1-Ubuntu",
        "[ 7250.995290] Tasks state (memory values in pages):",
        "[ 7250.995291] [  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name",
    ]
    lines += [
        f"[ 7250.995292] [{pid:7d}]  1000 {pid:5d} {rss * 2:8d} {rss:8d} {rss // 100:8d}        0         {adj:5d} {comm}" for pid, rss, adj, comm in rows
    ]
    pid, rss, adj, comm = next(r for r in rows if r[0] == victim)
    kib = rss * page // 1024
    lines += [
        f"[ 7250.995300] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice,task={comm},pid={pid},uid=1000",
        f"[ 7250.995310] Out of memory: Killed process {pid} ({comm}) total-vm:{kib * 2}kB, anon-rss:{kib - 4}kB, file-rss:4kB, shmem-rss:0kB, UID:1000 pgtables:{kib // 100}kB oom_score_adj:{adj}",
    ]
    return "\n".join(lines) + "\n"


def verdict_of(tmp_path, text: str):  # noqa: ANN001, ANN201 - pytest's tmp_path; a Diagnosis
    log = tmp_path / "kern.log"
    log.write_text(text, encoding="utf-8")
    return oomlens.analyze(str(log), jobs=1)


@settings(max_examples=25, deadline=None)
@given(
    driver=st.integers(10**5, 4 * 10**7),
    worker=st.integers(10**4, 4 * 10**7),
    reward=st.integers(10**4, 4 * 10**7),
    page=st.sampled_from([4096, 65536]),
    interpreter=st.sampled_from(["python", "python3", "python3.11"]),
    shuffle=st.randoms(use_true_random=False),
)
def test_the_task_table_names_who_held_the_memory(tmp_path_factory, driver, worker, reward, page, interpreter, shuffle):
    """Ray gives its workers oom_score_adj 1000: the kernel kills a worker first, whoever held
    the memory. The biggest task of the table, when it holds more than the victim and at
    least HELD_SHARE of all, is the culprit: the driver when it is the python among workers."""
    rows = [(17218, driver, 0, interpreter), (17301, worker, 1000, "ray::WorkerDict"), (17302, reward, 1000, "ray::RewardMode"), (17100, 5000, 0, "raylet")]
    shuffle.shuffle(rows)
    assume(len({driver, worker, reward}) == 3)
    diagnosis = verdict_of(tmp_path_factory.mktemp("k"), report(rows, 17301, page))
    (incident,) = diagnosis.incidents
    total = driver + worker + reward + 5000
    biggest = max(driver, worker, reward)
    if biggest == worker or biggest < 0.3 * total:
        assert incident.culprit is None and incident.component is None  # the victim held it, or no one task did
    elif biggest == driver:
        assert (incident.culprit["pid"], incident.culprit["bytes"], incident.component) == (17218, driver * page, "driver")
    else:
        assert (incident.culprit["pid"], incident.culprit["bytes"], incident.component) == (17302, reward * page, "reward_model")
    assert diagnosis.verdict["root_kind"] == "kernel_oom" and diagnosis.verdict["memory"] == "host"


def test_a_cut_victim_alone_names_its_component(tmp_path):
    text = "[ 7250.995310] Out of memory: Killed process 3301 (ray::RewardMode) total-vm:9123456kB, anon-rss:8123456kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:20480kB oom_score_adj:1000\n"
    assert verdict_of(tmp_path, text).verdict["component"] == "reward_model"
