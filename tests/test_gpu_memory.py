"""GPU memory samples: every framework wording yields its numbers in bytes; look-alikes yield nothing."""

from __future__ import annotations

import pytest

from conftest import REAL, SESSIONS
from oomlens import analyze, parse_text

GIB = 1 << 30


def gib(number: float) -> int:
    return round(number * GIB)


def samples(path) -> list:
    return [e for e in analyze(str(path)).events if e.kind == "gpu_memory"]


def sample(text: str):
    found = [e for e in parse_text(text) if e.kind == "gpu_memory"]
    assert len(found) == 1, [e.text for e in found]
    return found[0]


def test_verl_v04_debug_samples_around_building_the_rollout():
    events = samples(REAL / "007_verl_2151.log")
    assert [e.fields["label"] for e in events] == [
        "Before building vllm rollout",
        "After building vllm rollout",
        "After building sharding manager",
    ]
    first, second, _ = events
    assert (first.pid, first.actor, first.memory, first.time) == (169054, "WorkerDict", "gpu", "2025-06-28T18:06:41.828")
    assert not first.time_inferred  # the DEBUG:<time>: logger prefix carries it
    f = first.fields
    assert (f["allocated_bytes"], f["reserved_bytes"]) == (gib(1.84), gib(3.68))
    assert (f["used_bytes"], f["total_bytes"]) == (gib(4.11), gib(23.59))
    assert (f["phase"], f["role"]) == ("before", None)
    assert second.fields["allocated_bytes"] == gib(17.72) and second.fields["used_bytes"] == gib(2.43)
    assert second.fields["phase"] == "after"


def test_easyr1_older_wording_behind_markdown_quotes():
    events = samples(REAL / "013_easyr1_128.log")
    assert [e.fields["label"] for e in events] == [
        "After state_dict() in sharding manager",
        "After sync model weights in sharding manager",
    ]
    for event in events:
        assert (event.pid, event.node, event.actor) == (25406, "10.148.0.106", "WorkerDict")
        assert (event.fields["allocated_bytes"], event.fields["reserved_bytes"]) == (gib(38.53), gib(57.10))
        assert event.fields["used_bytes"] is None and event.fields["total_bytes"] is None


def test_easyr1_device_wording_before_and_after_vllm_offload():
    before, after = samples(REAL / "014_easyr1fork_9.log")
    assert before.pid == after.pid == 118271
    assert (before.fields["used_bytes"], before.fields["total_bytes"]) == (gib(58.32), gib(79.19))
    assert (after.fields["used_bytes"], after.fields["total_bytes"]) == (gib(13.54), gib(79.19))
    assert (before.fields["phase"], after.fields["phase"]) == ("before", "after")
    assert after.fields["label"] == "After vllm offload in sharding manager"
    assert before.fields["allocated_bytes"] is None  # this wording says nothing of the allocator


def test_vllm_sleep_mode_line_deduplicated_by_ray():
    (event,) = samples(REAL / "034_openrlhf_1065.log")
    assert (event.pid, event.actor, event.fields["label"]) == (1212157, "LLMRayActor", "vllm sleep")
    assert event.fields["freed_bytes"] == gib(46.35)
    assert event.fields["used_bytes"] == gib(26.10)
    assert event.fields["repeated"] == 15


def test_vllm_profiling_results_line_and_weights():
    loading, profiling = samples(REAL / "056_vllm_10517.log")
    assert loading.fields["weights_bytes"] == gib(14.9888)  # "GB" in vLLM means GiB
    f = profiling.fields
    assert f["total_bytes"] == gib(23.58)
    assert f["kv_cache_bytes"] == gib(2.89)
    assert f["initial_used_bytes"] == gib(15.34)
    assert f["gpu_memory_utilization"] == 0.90


def test_vllm_v1_model_loading_in_a_ci_log():
    (event,) = samples(REAL / "029_vllm_14574.log")
    assert event.fields["weights_bytes"] == gib(0.2389)
    assert event.fields["load_seconds"] == 0.977005
    # the CI's gutter says 15:07:20Z (UTC); vLLM's own header, 08:07:20, is the run's local
    # clock, the one every other file of a run keeps: it wins, with the gutter's year
    assert event.time == "2025-03-10T08:07:20"


@pytest.mark.parametrize("name", ["054_vllm_5477.log", "065_verl_2863.log", "073_areal_110.log"])
def test_decoys_yield_no_sample(name):
    assert samples(REAL / name) == []


def test_ray_session_driver_console():
    events = samples(SESSIONS / "ray2.60-b-rl-actor-oom" / "driver-console.log")
    assert len(events) == 160
    assert {(e.pid, e.actor) for e in events} == {(14523, "WorkerDict")}
    first = events[0]
    assert first.fields["label"] == "Before state_dict() in sharding manager memory"
    assert (first.fields["allocated_bytes"], first.fields["reserved_bytes"]) == (gib(13.18), gib(46.43))
    assert first.source.line == 6


def test_veRL_role_prefix_is_kept_apart_from_the_label():
    event = sample(
        "(WorkerDict pid=41234) DEBUG:2025-06-10 08:01:02,345:fsdp vllm sharding_manager Before __exit__, "
        "memory allocated (GB): 14.95, memory reserved (GB): 16.51, device memory used/total (GB): 71.02/79.11"
    )
    f = event.fields
    assert (f["role"], f["phase"], f["label"]) == ("fsdp vllm sharding_manager", "before", "Before __exit__")
    assert (f["used_bytes"], f["total_bytes"]) == (gib(71.02), gib(79.11))


def test_veRL_pre_v04_raw_float_repr():
    f = sample("Before state_dict() in sharding manager memory, memory allocated (GB): 12.345678806304932, memory reserved (GB): 1.5e-05").fields
    assert f["allocated_bytes"] == gib(12.345678806304932)
    assert f["reserved_bytes"] == gib(1.5e-05)


def test_cut_paste_keeps_what_it_shows():
    f = sample("(WorkerDict pid=7) After sync model weights in sharding manager, memory allocated (GB): 16.28, memory res").fields
    assert f["allocated_bytes"] == gib(16.28)
    assert f["reserved_bytes"] is None
    assert f["truncated"] is True


def test_vllm_v0_profiling_message_split_over_three_prefixed_lines():
    text = (
        "(RayWorkerWrapper pid=3021) INFO 01-20 11:02:03 worker.py:262] Memory profiling takes 5.21 seconds\r\n"
        "(ActorModelRayActor pid=3050) Filtered 28 experiences.\n"  # another worker's line in between
        "(RayWorkerWrapper pid=3021) INFO 01-20 11:02:03 worker.py:262] the current vLLM instance can use "
        "total_gpu_memory (79.11GiB) x gpu_memory_utilization (0.90) = 71.20GiB\r\n"
        "(RayWorkerWrapper pid=3021) INFO 01-20 11:02:03 worker.py:262] model weights take 14.99GiB; "
        "non_torch_memory takes 0.31GiB; PyTorch activation peak memory takes 1.23GiB; "
        "the rest of the memory reserved for KV Cache is 54.67GiB.\r\n"
    )
    events = [e for e in parse_text(text) if e.kind == "gpu_memory"]
    mine = next(e for e in events if e.pid == 3021)
    assert (mine.source.line, mine.source.end_line) == (1, 4)
    f = mine.fields
    assert f["total_bytes"] == gib(79.11) and f["gpu_memory_utilization"] == 0.90
    assert f["kv_cache_bytes"] == gib(54.67) and f["weights_bytes"] == gib(14.99)
    assert f["profile_seconds"] == 5.21 and len(events) == 1


def test_a_sample_line_is_a_block_of_its_own():
    event = sample(
        "(WorkerDict pid=7) After FSDP init, memory allocated (GB): 1.00, memory reserved (GB): 2.00\n"
        "(WorkerDict pid=7) model weights take 14.99GiB; non_torch_memory takes 0.31GiB\n"
    )
    assert (event.source.line, event.source.end_line) == (1, 1)
    assert "truncated" not in event.fields


def test_negative_available_kv_cache():
    assert sample("INFO 04-11 08:00:00 [gpu_worker.py:227] Available KV cache memory: -0.3 GiB").fields["kv_cache_bytes"] == -gib(0.3)


def test_step_metrics_line_carries_peaks_and_host_memory():
    event = sample(
        "(TaskRunner pid=5520) step:12 - actor/pg_loss:np.float64(-0.0123) - perf/max_memory_allocated_gb:43.21 "
        "- perf/max_memory_reserved_gb:49.1 - perf/cpu_memory_used_gb:126.75 - perf/throughput:1893.2"
    )
    f = event.fields
    assert (f["step"], event.memory) == (12, "gpu")
    assert (f["allocated_bytes"], f["reserved_bytes"], f["cpu_used_bytes"]) == (gib(43.21), gib(49.1), gib(126.75))


@pytest.mark.parametrize(
    "text",
    [
        # Ray's kill report: "3.88GB / 23.54GB" is host memory, and not EasyR1's wording
        "Memory on the node (IP: 192.0.2.2, ID: 0edf) where the task (task ID: 1d, name=t, pid=31302, "
        "memory used=1.17GB) was running was 3.55GB / 23.54GB (0.150812), which exceeds the memory usage threshold",
        "[RewardModelRayActor.compute_reward] pid=14522 allocated 0.25 GiB",
        "It took 2.026004 seconds to fall asleep.",
        "perf/max_memory_allocated_gb is logged every step",
    ],
)
def test_look_alikes(text):
    assert [e for e in parse_text(text) if e.kind == "gpu_memory"] == []


def test_deepspeed_see_memory_usage_from_zero3_start_up():
    """ChatLLaMA's ZeRO-3 start-up: the GPU flat at MA 1.0 GB while the host climbs to 154.52 GB."""
    events = samples(REAL / "255_chatllama_242.log")
    gpu = [e for e in events if e.memory == "gpu"]
    host = [e for e in events if e.memory == "host"]
    assert {e.fields["label"] for e in gpu} == {"deepspeed see_memory_usage"}
    assert {(e.fields["allocated_bytes"], e.fields["reserved_bytes"], e.fields["peak_reserved_bytes"]) for e in gpu} == {(gib(1.0), gib(13.8), gib(14))}
    assert [e.fields["cpu_used_bytes"] for e in host][:4] == [gib(55.87), gib(80.59), gib(80.6), gib(154.52)]
    assert host[3].fields["cpu_percent"] == 24.5
    assert host[3].time == "2023-03-10T08:16:44.681" and not host[3].time_inferred


@pytest.mark.parametrize("seed", range(40))
def test_deepspeed_readings_under_every_envelope_and_unit(seed):
    """The numbers DeepSpeed rounds (two decimals, Max_CA none), in GB or a fork's MB with its
    PEAK_MA, behind the envelopes its lines come with: its logger, a Ray actor's prefix,
    a bare print."""
    import random

    rng = random.Random(seed)
    unit, scale = rng.choice([("GB", GIB), ("MB", 1 << 20)])
    values = [round(rng.uniform(0, 80) * GIB / scale, rng.choice([0, 1, 2])) for _ in range(4)]
    values[3] = round(values[3])
    envelope = rng.choice(
        [
            "",
            f"[2024-0{rng.randrange(1, 10)}-1{rng.randrange(10)} 1{rng.randrange(10)}:0{rng.randrange(10)}:3{rng.randrange(10)},{rng.randrange(1000):03d}] [INFO] [utils.py:{rng.randrange(700, 900)}:see_memory_usage] ",
            f"(ActorModelRayActor pid={rng.randrange(1000, 99999)}, ip=10.0.{rng.randrange(256)}.{rng.randrange(256)}) ",
            f"\x1b[36m(CriticModelRayActor pid={rng.randrange(1000, 99999)})\x1b[0m [2024-01-01 10:00:00,000] [INFO] [utils.py:785:see_memory_usage] ",
        ]
    )
    pad = " " * rng.randrange(1, 10)
    peak = f"{pad}PEAK_MA {values[0]} {unit}" if unit == "MB" and rng.random() < 0.5 else ""
    line = f"{envelope}MA {values[0]} {unit}{pad}Max_MA {values[1]} {unit}{pad}CA {values[2]} {unit}{pad}Max_CA {values[3]} {unit} {peak}"
    f = sample(line).fields
    want = [round(v * scale) for v in values]
    assert [f["allocated_bytes"], f["peak_allocated_bytes"], f["reserved_bytes"], f["peak_reserved_bytes"]] == want
    assert f.get("peak_ma_bytes") == (want[0] if peak else None)
    used, percent = round(rng.uniform(1, 2000), 2), round(rng.uniform(0, 100), 1)
    host = sample(f"{envelope}CPU Virtual Memory:  used = {used} GB, percent = {percent}%")
    assert (host.memory, host.fields["cpu_used_bytes"], host.fields["cpu_percent"]) == ("host", round(used * GIB), percent)


@pytest.mark.parametrize(
    "text",
    [
        "DMA 3 GB Max_MA 4 GB CA 5 GB Max_CA 6 GB",  # MA only as a word of its own
        "see_memory_usage: MA and Max_MA are printed in GB",
        "Before initializing optimizer states",  # the line above the readings: their message
    ],
)
def test_deepspeed_look_alikes(text):
    assert [e for e in parse_text(text) if e.kind == "gpu_memory"] == []
