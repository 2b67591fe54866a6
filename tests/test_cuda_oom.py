"""CUDA out-of-memory reports: the real pastes yield the right numbers, look-alikes yield nothing."""

from __future__ import annotations

import pytest

from conftest import REAL
from oomlens import analyze, parse_text

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def size(number: float, unit: int) -> int:
    return round(number * unit)


def cuda_ooms(name: str) -> list:
    return [e for e in analyze(str(REAL / name)).events if e.kind == "cuda_oom"]


def only(name: str):
    found = cuda_ooms(name)
    assert len(found) == 1, [e.source for e in found]
    return found[0]


def test_torch22_rank_prefixed_with_another_process_on_the_gpu():
    event = only("010_openrlhf_398.log")
    f = event.fields
    assert (event.rank, event.gpu, event.memory) == (7, 7, "gpu")
    assert f["torch_variant"] == "P3" and f["exception"] == "torch.cuda.OutOfMemoryError"
    assert f["requested_bytes"] == size(112, MIB)
    assert f["total_bytes"] == size(39.39, GIB)
    assert f["free_bytes"] == size(14, MIB)
    assert f["processes"] == [{"pid": 1117993, "bytes": size(39.36, GIB)}]
    assert f["process_bytes"] is None  # no "Including non-PyTorch memory" sentence
    assert f["allocated_bytes"] == size(38.34, GIB)
    assert f["reserved_unallocated_bytes"] == size(385.64, MIB)
    assert f["reserved_bytes"] == size(38.34, GIB) + size(385.64, MIB)
    assert "truncated" not in f


def test_verl_rollout_worker_forwarded_to_the_trainer_console():
    event = only("042_toolrl_39.log")
    f = event.fields
    # printed by the trainer (main_task pid 2396241); the remote-task header below the OOM
    # names the process that ran out: WorkerDict pid 2396579 in actor_rollout_generate_sequences
    assert (event.pid, event.actor, event.method, event.gpu, event.source.line) == (2396579, "WorkerDict", "actor_rollout_generate_sequences", 0, 3)
    assert f["requested_bytes"] == size(5.22, GIB)
    assert f["total_bytes"] == size(23.69, GIB)
    assert f["free_bytes"] == size(1.18, GIB)
    assert f["process_bytes"] == size(22.48, GIB)
    assert f["processes"] == []
    assert f["allocated_bytes"] == size(21.54, GIB)
    assert f["reserved_bytes"] == size(21.54, GIB) + size(517.58, MIB)


def test_elided_exception_class():
    f = only("047_framepack_369.log").fields
    assert f["exception"] is None
    assert f["requested_bytes"] == size(30.29, GIB) > f["total_bytes"] == size(10.74, GIB)
    assert f["process_bytes"] == size(6.68, GIB)
    assert f["reserved_unallocated_bytes"] == size(396.58, MIB)


def test_torch21_capacty_typo():
    f = only("048_mgfn_35.log").fields
    assert f["torch_variant"] == "P2"
    assert f["requested_bytes"] == size(1.70, GIB)
    assert (f["total_bytes"], f["free_bytes"]) == (size(6.00, GIB), 0)
    assert f["allocated_bytes"] == size(2.93, GIB)
    assert f["reserved_bytes"] == size(2.93, GIB) + size(2.30, GIB)


def test_torch10_cached_inside_a_chained_traceback():
    event = only("050_pytorch_18853.log")
    f = event.fields
    assert (event.source.line, event.gpu, f["torch_variant"], f["exception"]) == (5, 0, "P1", "RuntimeError")
    assert f["requested_bytes"] == size(1024, MIB)
    assert f["total_bytes"] == size(15.90, GIB)
    assert f["allocated_bytes"] == size(14.25, GIB)
    assert f["free_bytes"] == size(991.56, MIB)
    assert f["reserved_unallocated_bytes"] == size(607, KIB)  # 1.0 "cached": held but not allocated
    assert f["reserved_bytes"] == size(14.25, GIB) + size(607, KIB)


def test_vllm_cumem_allocator_in_wake_up():
    event = only("067_vllm_13941.log")
    f = event.fields
    assert (f["allocator"], f["torch_variant"], f["exception"]) == ("cumem", "cuda_error", "RuntimeError")
    assert f["where"] == "/workspace/csrc/cumem_allocator.cpp:62"
    assert f["requested_bytes"] is None and event.gpu is None
    assert event.source.line == 15


def test_vllm_engine_core_loading_weights():
    event = only("084_vllm_31273.log")
    f = event.fields
    assert (event.pid, event.actor, event.gpu) == (556790, "EngineCore_DP0", 0)
    assert f["requested_bytes"] == size(80, MIB)
    assert f["total_bytes"] == size(139.72, GIB)
    assert f["free_bytes"] == size(60.69, MIB)
    assert f["processes"] == [{"pid": 691170, "bytes": size(139.65, GIB)}]
    assert f["allocated_bytes"] == size(139.21, GIB)


@pytest.mark.parametrize(
    "name",
    [
        "043_easyr1fork_9.log",  # RayTaskError(OutOfMemoryError) without the CUDA wording
        "066_lmmr1_43.log",  # "CUDA Error: o": cut before the error's name, which may not be OOM
        "054_vllm_5477.log",
        "065_verl_2863.log",
        "073_areal_110.log",
        "030_qanything_302.log",
        "032_ray_23450.log",  # the kernel's "Out of memory: Killed process"
        "061_pyautovod_7.log",
    ],
)
def test_no_cuda_oom(name):
    assert cuda_ooms(name) == []


def parse(text: str) -> list:
    return [e for e in parse_text(text) if e.kind == "cuda_oom"]


def test_cut_paste_keeps_every_figure_before_the_cut():
    (event,) = parse(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of "
        "23.68 GiB of which 10.00 MiB is free. Process 7 has 2.00 GiB memory in use. Of the alloc"
    )
    f = event.fields
    assert f["truncated"] is True
    assert (f["total_bytes"], f["free_bytes"]) == (size(23.68, GIB), size(10, MIB))
    assert f["processes"] == [{"pid": 7, "bytes": size(2, GIB)}]
    assert f["allocated_bytes"] is None and f["reserved_bytes"] is None


def test_a_cut_hint_is_not_a_cut_report():
    (event,) = parse(
        "OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 7.79 GiB "
        "of which 1.06 MiB is free. Of the allocated memory 7.10 GiB is allocated by PyTorch, and 3.45 MiB is "
        "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try sett"
    )
    assert "truncated" not in event.fields
    assert event.fields["reserved_bytes"] == size(7.10, GIB) + size(3.45, MIB)


def test_consecutive_ranks_are_separate_reports():
    text = "\n".join(
        f"[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {r} has a total "
        f"capacity of 79.33 GiB of which {r}.00 GiB is free. Of the allocated memory 70.00 GiB is allocated by "
        "PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated."
        for r in (0, 1)
    )
    events = parse(text)
    assert [(e.rank, e.gpu, e.fields["free_bytes"]) for e in events] == [(0, 0, 0), (1, 1, GIB)]
    assert [e.source.line for e in events] == [1, 2]


def test_nccl_unhandled_cuda_error_is_oom_only_when_the_last_error_says_so():
    header = (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1\n"
        "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n"
    )
    (event,) = parse(header + "Cuda failure 'out of memory'\n")
    assert (event.fields["torch_variant"], event.fields["nccl_version"]) == ("nccl", "2.18.1")
    assert (event.source.line, event.source.end_line) == (1, 4)
    assert parse(header + "Cuda failure 'unspecified launch failure'\n") == []


@pytest.mark.parametrize(
    "text",
    [
        'raise torch.OutOfMemoryError("CUDA out of memory.")',  # source line inside a traceback
        '    if "CUDA out of memory." in str(e):',
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_ref_update_actor() (pid=1, ip=10.0.0.1)",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "[ 7248.743279] Out of memory: Killed process 16832 (ray::_shuffle_m) total-vm:33905928kB, anon-rss:6481792kB",
        "torch.OutOfMemoryError: MPS backend out of memory (MPS allocated: 1.00 GiB).",
        # torch_memory_saver: another driver error, and the allocation it retries through torch's allocator
        "[torch_memory_saver.cpp] CUresult error: 1 (invalid argument)  file=csrc/utils.h func=cu_mem_set_access line=210",
        "[torch_memory_saver.cpp] cuMemCreate CUDA_ERROR_OUT_OF_MEMORY (may not be an issue e.g. torch allocator will free cache and retry)",
        "[torch_memory_saver.cpp] cu_mem_create has CUDA_ERROR_OUT_OF_MEMORY",
    ],
)
def test_look_alikes(text):
    assert parse(text) == []


def test_stamped_worker_line_gives_time_and_same_report_from_two_files_folds():
    line = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 301.00 MiB is free."
    events = parse(f"2025-06-01 10:00:00,000 - ERROR - trainer - {line}\n(WorkerDict pid=42) {line}\n")
    assert len(events) == 1
    assert events[0].time == "2025-06-01T10:00:00.000"
    assert len(events[0].sources) == 2


def test_cumem_failure_printed_twice_is_one_event():
    """vLLM's allocator prints its failure on stderr, then the RuntimeError repeats it."""
    from oomlens import parse_text

    text = (
        "(WorkerDict pid=77) CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n"
        "(WorkerDict pid=77) RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n"
    )
    (event,) = parse_text(text)
    assert event.kind == "cuda_oom" and event.pid == 77 and len(event.sources) == 2


NCCL_OOM = """\
gpu-node-3:41234:41290 [5] include/alloc.h:103 NCCL WARN Cuda failure 'out of memory'
gpu-node-3:41234:41290 [5] NCCL INFO include/alloc.h:111 -> 1
[rank5]: Traceback (most recent call last):
[rank5]:   File "/opt/verl/verl/workers/fsdp_workers.py", line 655, in update_actor
[rank5]:     metrics = self.actor.update_policy(data=data)
[rank5]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5
[rank5]: ncclUnhandledCudaError: Call to CUDA function failed.
[rank5]: Last error:
[rank5]: Cuda failure 2 'out of memory'
"""


def test_nccl_warn_and_dist_backend_error_in_the_err_file_and_the_console_are_one_failure(tmp_path):
    """NCCL warns of the failed allocation, torch raises it again; Ray copies both to the driver."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / f"worker-{'5a' * 28}-01000000-41234.err").write_text(NCCL_OOM)
    console = "".join(f"(WorkerDict pid=41234, ip=10.0.0.4) {line}\n" for line in NCCL_OOM.splitlines())
    (tmp_path / "driver.log").write_text(console)
    diagnosis = analyze(str(logs), str(tmp_path / "driver.log"))
    (event,) = diagnosis.events
    assert (event.kind, event.pid, event.rank, event.fields["cuda_error_code"]) == ("cuda_oom", 41234, 5, 2)
    assert sorted((s.path.rsplit("/", 1)[-1][:6], s.line) for s in event.sources) == [("driver", 1), ("driver", 6), ("worker", 1), ("worker", 6)]
    assert len(diagnosis.incidents) == 1 and diagnosis.verdict["component"] == "actor_train"


def test_numberless_failures_of_two_processes_stay_two():
    text = "(WorkerDict pid=11) RuntimeError: CUDA error: out of memory\n(WorkerDict pid=12) RuntimeError: CUDA error: out of memory\n"
    assert [e.pid for e in parse(text)] == [11, 12]


def test_torch_memory_saver_resume_on_every_rank_of_the_sglang_server():
    """veRL waking SGLang (resume_memory_occupation): cuMemCreate fails on eight ranks, seven
    of them folded by Ray's dedup; the trainer's timed-out requests are no failure of their own."""
    first, second = cuda_ooms("266_sglang_14092.log")  # two processes: two failures
    assert [(e.actor, e.pid, e.memory, e.fields.get("repeated")) for e in (first, second)] == [
        ("SGLangHttpServer", 250977, "gpu", None),
        ("SGLangHttpServer", 250976, "gpu", 7),
    ]
    f = first.fields
    assert (f["torch_variant"], f["allocator"], f["cuda_error_code"]) == ("memory_saver", "torch_memory_saver", 2)
    assert (f["where"], f["call"]) == ("csrc/utils.h:194", "cu_mem_create")


@pytest.mark.parametrize("api", ["CUresult", "cudaError"])
@pytest.mark.parametrize("envelope", ["", "(SGLangHttpServer pid=4242) ", "\x1b[36m(SGLangEngine pid=7, ip=10.0.0.2)\x1b[0m ", "[2025-11-28 16:00:45] "])
@pytest.mark.parametrize("cut", [None, "  file=csrc/co", " (out of memory)"])
def test_torch_memory_saver_failure_behind_any_envelope_and_cut(api, envelope, cut):
    line = f"[torch_memory_saver.cpp] {api} error: 2 (out of memory)  file=csrc/core.cpp func=resume line=172"
    if cut is not None:
        line = line[: line.index(cut) + len(cut)]
    events = parse(envelope + line)
    assert [(e.kind, e.fields["torch_variant"], e.fields["cuda_error_code"]) for e in events] == [("cuda_oom", "memory_saver", 2)]
    assert events[0].fields["where"] == (None if cut else "csrc/core.cpp:172")
