"""Kernel OOM killer reports: one event per kill with the victim's sizes in bytes; Ray's hint is no kill."""

from __future__ import annotations

import pytest

from conftest import REAL
from oomlens import analyze, parse_text

KIB = 1 << 10


def kills(path) -> list:
    return [e for e in analyze(str(path)).events if e.kind == "kernel_oom"]


def parsed(text: str) -> list:
    return [e for e in parse_text(text) if e.kind == "kernel_oom"]


def test_ray_shuffle_victim_and_a_second_invocation_without_its_kill():
    kill, invocation = kills(REAL / "032_ray_23450.log")
    f = kill.fields
    assert (kill.pid, f["pid"], f["process"], kill.memory) == (16832, 16832, "ray::_shuffle_m", "host")
    assert f["anon_rss_bytes"] == 6481792 * KIB
    assert f["total_vm_bytes"] == 33905928 * KIB
    assert (f["file_rss_bytes"], f["shmem_rss_bytes"]) == (0, 64 * KIB)
    assert (f["constraint"], f["uid"], f["task_memcg"]) == ("CONSTRAINT_NONE", 1000, "/user.slice")
    # the oom-kill summary and the kill line are one report, one event
    assert (kill.source.line, kill.source.end_line, f["uptime_s"]) == (1, 2, 7248.743169)
    g = invocation.fields
    assert invocation.pid is None and g["pid"] is None and g["process"] is None  # the victim is cut off
    assert (g["invoker"], g["invoker_pid"], g["order"]) == ("worker.io", 17218, 0)
    assert g["gfp_mask"] == "0x100cca(GFP_HIGHUSER_MOVABLE)"
    assert invocation.source.line == 4 and invocation.source.end_line > 18  # the call trace is its report


def test_dmesg_T_with_comma_grouped_sizes():
    (kill,) = kills(REAL / "061_pyautovod_7.log")
    f = kill.fields
    assert (kill.pid, f["process"], kill.time) == (7899, "python", "2025-03-30T08:24:00")
    assert f["total_vm_bytes"] == 26184840 * KIB
    # pasted as "153,700,88kB": the digits are 15370088 kB, which the task dump confirms
    # (rss 3842522 pages of 4 KiB = 15370088 kB, file-rss and shmem-rss being 0)
    assert f["anon_rss_bytes"] == 15370088 * KIB == 3842522 * 4 * KIB
    assert (f["uid"], f["pgtables_bytes"], f["oom_score_adj"]) == (0, 38964 * KIB, 0)
    # the task dump's rows above the summary (wrapped by the terminal) are the report's own
    assert (kill.source.line, kill.source.end_line) == (1, 6)


@pytest.mark.parametrize("name", ["036_verl_472.log", "037_openrlhf_305.log", "039_oneshotrlvr_14.log", "072_raydiscuss_10958.log", "081_easyr1_300.log"])
def test_rays_generic_oom_killer_hint_is_no_kill(name):
    assert kills(REAL / name) == []


def test_old_kernel_pair_where_a_child_dies_for_the_chosen_task():
    (kill,) = parsed(
        "[ 4242.001] Out of memory: Kill process 1234 (python) score 900 or sacrifice child\n"
        "[ 4242.002] Killed process 1240 (python) total-vm:2048kB, anon-rss:1024kB, file-rss:4kB\n"
    )
    f = kill.fields
    assert (kill.pid, f["selected_pid"], f["score"]) == (1240, 1234, 900)
    assert (f["anon_rss_bytes"], f["file_rss_bytes"], f["shmem_rss_bytes"]) == (1024 * KIB, 4 * KIB, None)


def test_memcg_counters_attach_to_the_adjacent_kill_and_alone_are_nothing():
    counters = "[ 50.1] memory: usage 1048576kB, limit 1048576kB, failcnt 31\n"
    (kill,) = parsed(
        counters + "[ 50.2] Memory cgroup out of memory: Killed process 77 (python) total-vm:2048kB, "
        "anon-rss:1048000kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:100kB oom_score_adj:900\n"
    )
    f = kill.fields
    assert (kill.pid, f["reason"], f["oom_score_adj"]) == (77, "Memory cgroup out of memory", 900)
    assert (f["memcg_usage_bytes"], f["memcg_limit_bytes"], f["memcg_failcnt"]) == (1 << 30, 1 << 30, 31)
    assert parsed(counters + "[ 50.2] Memory cgroup stats for /docker/x: cache:0KB rss:1048576KB\nnot kernel\n") == []


def test_rhel_uid_wording_and_syslog_envelope():
    (kill,) = parsed(
        "Jan 27 15:34:06 test-sj kernel: Out of memory: Kill process 3161 (mysqld) score 626 or sacrifice child\n"
        "Jan 27 15:34:06 test-sj kernel: Killed process 3161 (mysqld), UID 0, total-vm:493444kB, "
        "anon-rss:387328kB, file-rss:4kB, shmem-rss:0kB\n"
    )
    assert (kill.pid, kill.fields["uid"], kill.fields["anon_rss_bytes"]) == (3161, 0, 387328 * KIB)


def test_each_kill_of_a_grep_paste_is_its_own_event_with_its_own_uptime():
    text = (
        "".join(
            f"[ {t}.000001] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
            f"task_memcg=/,task=python,pid={pid},uid=0\n"
            f"[ {t}.000101] Out of memory: Killed process {pid} (python) total-vm:{kb}kB, anon-rss:{kb}kB, file-rss:0kB, shmem-rss:0kB\n"
            f"[ {t}.200000] oom_reaper: reaped process {pid} (python), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB\n"
            for t, pid, kb in ((100, 11, 800), (200, 22, 1600))
        )
        + "[ 300.1] Out of memory: Killed process 33 (a) total-vm:3kB, anon-rss:3kB, file-rss:0kB, shmem-rss:0kB\n"
    )
    found = [(e.pid, e.fields["anon_rss_bytes"], e.fields["uptime_s"]) for e in parsed(text)]
    assert found == [(11, 800 * KIB, 100.000001), (22, 1600 * KIB, 200.000001), (33, 3 * KIB, 300.1)]


def test_cut_kill_line():
    (kill,) = parsed("Out of memory (oom_kill_allocating_task): Killed process 3301 (ray::WorkerDict) total-vm:9123")
    assert (kill.pid, kill.fields["process"], kill.fields["truncated"]) == (3301, "ray::WorkerDict", True)
    assert kill.fields["reason"] == "Out of memory (oom_kill_allocating_task)"


@pytest.mark.parametrize(
    "text",
    [
        "INFO tool.py:12] Killed process 1234 (helper)",  # an application's own message: no sizes
        "Out of memory: the machine is swapping",
        "(raylet) Some common causes include: (1) the process was killed by the OOM killer due to high memory usage",
    ],
)
def test_look_alikes(text):
    assert parsed(text) == []


def test_a_value_that_is_no_number_is_not_known_and_the_kill_is_kept(tmp_path):
    """A kill line a byte mutation cut short (found by bench/hostile.py's mutated real logs):
    read again with its wrapped lines joined, the summary's `uid=` ran on into the next
    line's text, and int() of it lost the whole report as a block oomlens could not read."""
    path = tmp_path / "syslog"
    path.write_text(
        "Apr 16 22:14:48 ip-10-4-6-179 kernel: [ 1388.262738] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,"
        "mems_allowed=0,global_oom,task_memcg=/docker/5dc36d4084c4ea2a711a290e94e256ebb19cf554c9a253bff3ad5d978b4a32b8,task=python,pid=3178,uid=0\n"
        "Apr 16 22:14:48 ip-10-4-6-179 kernel: [ 1388.262774] Out of memory: Killed process 3178 (pythonle-rss:0kB, shmem-rss:8kB, UID:0 pgtables:14980kB oom_score_adj:0\n"
    )
    diagnosis = analyze(str(path))
    [kill] = [e for e in diagnosis.events if e.kind == "kernel_oom"]
    assert (kill.pid, kill.fields["process"], kill.fields["constraint"]) == (3178, "python", "CONSTRAINT_NONE")
    assert not any("could not read" in p for i in diagnosis.inputs for p in i.problems)
