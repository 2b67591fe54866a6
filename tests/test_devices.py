"""Accelerators other than NVIDIA's: one kind (cuda_oom) whose `device` every output names.

Property tests build torch's wordings on each device with random sizes and units under the
envelopes real logs put around them (tests/test_envelopes.py), and check the bytes and the
device read back; an NPU OOM's verdict, table, markdown and report never say CUDA."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings, strategies as st

import oomlens
from oomlens.events import to_bytes
from test_envelopes import OUTER

UNITS = ["bytes", "KiB", "MiB", "GiB"]
PREFIXES = ["", "(WorkerDict pid=48791, ip=10.0.3.17) ", "[rank5]: ", "\x1b[36m(VllmWorker rank=1 pid=77)\x1b[0m "]
WORDS = {"CUDA": "cuda", "HIP": "rocm", "NPU": "npu", "XPU": "xpu"}
size = st.tuples(st.integers(0, 999), st.integers(0, 99), st.sampled_from(UNITS))


def _printed(s: tuple[int, int, str]) -> tuple[str, int | None]:
    whole, cents, unit = s
    text = f"{whole} bytes" if unit == "bytes" else f"{whole}.{cents:02d} {unit}"
    return text, to_bytes(text.split()[0], unit)


@settings(max_examples=60, deadline=None)
@given(
    word=st.sampled_from(sorted(WORDS)),
    index=st.integers(0, 15),
    sizes=st.lists(size, min_size=5, max_size=5),
    outer=st.sampled_from(OUTER),
    prefix=st.sampled_from(PREFIXES),
)
def test_p1_on_every_device_reads_its_device_and_bytes(word, index, sizes, outer, prefix):
    (req, req_b), (tot, tot_b), (alc, alc_b), (free, free_b), (res, res_b) = (_printed(s) for s in sizes)
    unit = "NPU" if word == "NPU" else "GPU"
    active = f"{alc} current active; " if word == "NPU" else ""
    line = (
        f"{outer}{prefix}torch.OutOfMemoryError: {word} out of memory. Tried to allocate {req} ({unit} {index}; {tot} total capacity; "
        f"{alc} already allocated; {active}{free} free; {res} reserved in total by PyTorch)"
    )
    (event,) = [e for e in oomlens.parse_text(line) if e.kind == "cuda_oom"]
    assert (event.device, event.gpu, event.memory) == (WORDS[word], index, "gpu")
    assert [event.fields[k] for k in ("requested_bytes", "total_bytes", "allocated_bytes", "free_bytes", "reserved_bytes")] == [
        req_b,
        tot_b,
        alc_b,
        free_b,
        res_b,
    ]


@settings(max_examples=40, deadline=None)
@given(word=st.sampled_from(["CUDA", "HIP", "XPU"]), index=st.integers(0, 15), sizes=st.lists(size, min_size=4, max_size=4), outer=st.sampled_from(OUTER))
def test_p3_on_every_device_reads_its_device_and_bytes(word, index, sizes, outer):
    (req, req_b), (tot, tot_b), (free, free_b), (alc, alc_b) = (_printed(s) for s in sizes)
    line = (
        f"{outer}torch.OutOfMemoryError: {word} out of memory. Tried to allocate {req}. GPU {index} has a total capacity of {tot} of which {free} is free. "
        f"Of the allocated memory {alc} is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated."
    )
    (event,) = [e for e in oomlens.parse_text(line) if e.kind == "cuda_oom"]
    assert (event.device, event.gpu) == (WORDS[word], index)
    assert [event.fields[k] for k in ("requested_bytes", "total_bytes", "free_bytes", "allocated_bytes")] == [req_b, tot_b, free_b, alc_b]


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(size, min_size=4, max_size=4), pool=st.sampled_from(["shared", "private"]), outer=st.sampled_from(OUTER))
def test_mps_reads_its_watermark_as_the_total(sizes, pool, outer):
    (alc, alc_b), (other, other_b), (top, top_b), (req, req_b) = (_printed(s) for s in sizes)
    line = f"{outer}RuntimeError: MPS backend out of memory (MPS allocated: {alc}, other allocations: {other}, max allowed: {top}). Tried to allocate {req} on {pool} pool."
    (event,) = [e for e in oomlens.parse_text(line) if e.kind == "cuda_oom"]
    assert event.device == "mps" and event.gpu is None
    assert (event.fields["total_bytes"], event.fields["requested_bytes"], event.fields["pool"]) == (top_b, req_b, pool)
    assert event.fields["free_bytes"] == max(top_b - alc_b - other_b, 0)


@settings(max_examples=30, deadline=None)
@given(nbytes=st.integers(1, 2**40), device_id=st.integers(0, 15), prefix=st.sampled_from(PREFIXES))
def test_cann_el0004_reads_the_failed_rtmalloc(nbytes, device_id, prefix):
    text = "\n".join(
        prefix + line
        for line in (
            "EL0004: Failed to allocate memory.",
            "        Possible Cause: Available memory is insufficient.",
            "        Solution: Close applications not in use.",
            "        TraceBack (most recent call last):",
            f"        Call rtMalloc fail, purpose: page caching, type = 2, size:{nbytes}, device_id:{device_id}[FUNC:Alloc][FILE:device_allocator.cc][LINE:70]",
        )
    )
    (event,) = [e for e in oomlens.parse_text(text) if e.kind == "cuda_oom"]
    assert (event.device, event.gpu, event.fields["requested_bytes"]) == ("npu", device_id, nbytes)


NPU_RUN = Path(__file__).resolve().parent.parent / "fixtures" / "incidents" / "verl-npu-actor-oom" / "driver-console.log"


def test_an_npu_oom_is_named_an_npu_oom_in_every_output():
    diagnosis = oomlens.analyze(str(NPU_RUN))
    verdict = diagnosis.verdict
    assert (verdict["root_kind"], verdict["device"], verdict["memory"], verdict["component"]) == ("cuda_oom", "npu", "gpu", "actor_train")
    assert verdict["summary"].startswith("NPU memory OOM on NPU 1") and "CUDA" not in verdict["summary"]
    from oomlens.outputs import html, markdown, table, verdict as told

    for text in (told.render(diagnosis), markdown.render(diagnosis), table.render(diagnosis, width=120), html.render(diagnosis, plotly="cdn")):
        assert "NPU" in text and "CUDA OOM" not in text and "CUDA out of memory" not in text
    assert "Incident i1: NPU OOM" in markdown.render(diagnosis)
    assert [e["device"] for e in diagnosis.to_dict()["events"] if e["kind"] == "cuda_oom"] == ["npu", "npu"]


def test_a_cuda_oom_keeps_its_words():
    (event,) = oomlens.parse_text(
        "RuntimeError: CUDA out of memory. Tried to allocate 12.00 MiB (GPU 0; 2.00 GiB total capacity; 1.63 GiB already allocated; 0 bytes free; 1.67 GiB reserved in total by PyTorch)"
    )
    assert event.device == "cuda"
    kinds = oomlens.kinds.shipped()
    assert kinds.label(event.kind, event.device) == "CUDA OOM" and kinds.label(event.kind, "npu") == "NPU OOM"


def test_a_kind_s_labels_name_known_devices_only():
    import pytest

    from oomlens.kinds import kind_of

    assert dict(kind_of("x", {"label": "X", "role": "memory", "labels": {"npu": "NPU X"}}).labels) == {"npu": "NPU X"}
    with pytest.raises(ValueError, match="unknown device"):
        kind_of("x", {"label": "X", "role": "memory", "labels": {"tpu": "TPU X"}})
