"""Memory readings of slime, Megatron-LM, SGLang and vLLM V1, read under the variation their
sources allow: any values, the dict's keys in any release's set, SGLang's items before the
sizes in any order, Ray's prefix and a logger's header before the line."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

import oomlens
from oomlens.events import to_bytes

GIB2 = st.integers(0, 200_000).map(lambda n: n / 100)  # round(n / 1024**3, 2) as slime prints it
PREFIXES = ("", "(MegatronTrainRayActor pid=28746) ", "[2025-09-01 10:11:12] memory_utils.py:41 - ", "(SGLangEngine pid=20951) [2026-03-11 13:53:21 TP0] ")


def reading(text: str) -> oomlens.Event:
    found = [e for e in oomlens.parse_text(text) if e.kind == "gpu_memory"]
    assert len(found) == 1, [(e.kind, e.fields) for e in oomlens.parse_text(text)]
    return found[0]


@settings(max_examples=80, deadline=None)
@given(
    values=st.fixed_dictionaries({k: GIB2 for k in ("total_GB", "free_GB", "used_GB", "allocated_GB", "reserved_GB")}),
    host=st.one_of(st.none(), st.fixed_dictionaries({k: GIB2 for k in ("host_total_GB", "host_available_GB", "host_used_GB", "host_free_GB")})),
    gpu=st.integers(0, 15),
    device=st.sampled_from(["{}", "cuda:{}", "npu:{}"]),
    rank=st.integers(0, 4095),
    label=st.from_regex(r"[a-z][a-z _]{0,30}[a-z]", fullmatch=True),
    cleared=st.booleans(),
    prefix=st.sampled_from(PREFIXES),
)
def test_slime_s_dict_of_every_release(values, host, gpu, device, rank, label, cleared, prefix):
    entries = {"gpu": device.format(gpu), **values, **(host or {})}
    text = f"{prefix}[Rank {rank}] Memory-Usage {label}{' (cleared before print)' if cleared else ''}: {entries!r}"
    event = reading(text)
    assert (event.gpu, event.rank, event.memory) == (gpu, rank, "gpu")
    f = event.fields
    # one space between words, as blocks.normalise hands every block to its grammar
    assert f["label"] == f"slime {' '.join(label.split())}" + (" (cleared before print)" if cleared else "")
    assert (f["total_bytes"], f["used_bytes"], f["allocated_bytes"], f["reserved_bytes"]) == tuple(
        to_bytes(values[k]) for k in ("total_GB", "used_GB", "allocated_GB", "reserved_GB")
    )
    assert f.get("cpu_used_bytes") == (to_bytes(host["host_used_GB"]) if host else None)  # the host's, read as host memory


@settings(max_examples=60, deadline=None)
@given(
    mib=st.lists(st.floats(0, 200_000, allow_nan=False), min_size=4, max_size=4),
    old=st.booleans(),
    iteration=st.integers(1, 10**6),
    rank=st.one_of(st.none(), st.integers(0, 4095)),
)
def test_megatron_s_report_memory(mib, old, iteration, rank):
    names = ("cached", "max cached") if old else ("reserved", "max reserved")
    body = f"memory (MB) | allocated: {mib[0]} | max allocated: {mib[1]} | {names[0]}: {mib[2]} | {names[1]}: {mib[3]}"
    text = (f"[Rank {rank}] " if rank is not None else "") + f"(after {iteration} iterations) {body}"
    event = reading(text)
    f = event.fields
    assert (f["allocated_bytes"], f["peak_allocated_bytes"], f["reserved_bytes"], f["peak_reserved_bytes"]) == tuple(to_bytes(m, "MiB") for m in mib)
    assert event.rank == rank and f["label"] == f"megatron (after {iteration} iterations)"


@settings(max_examples=60, deadline=None)
@given(
    avail=GIB2,
    usage=st.one_of(st.none(), GIB2),
    extra=st.lists(
        st.sampled_from(["type=Qwen2ForCausalLM", "dtype=torch.bfloat16", "elapsed=12.50 s", "quant=fp8", "type=DeepseekV3ForCausalLM"]),
        max_size=4,
        unique=True,
    ),
    prefix=st.sampled_from(PREFIXES),
)
def test_sglang_s_load_weight_end_in_every_wording(avail, usage, extra, prefix):
    items = [*extra, f"avail mem={avail:.2f} GB"] + ([f"mem usage={usage:.2f} GB"] if usage is not None else [])
    event = reading(f"{prefix}Load weight end. " + ", ".join(items) + ".")
    f = event.fields
    assert (f["free_bytes"], f.get("weights_bytes")) == (to_bytes(f"{avail:.2f}"), None if usage is None else to_bytes(f"{usage:.2f}"))


@settings(max_examples=40, deadline=None)
@given(tokens=st.integers(1, 10**8), k=GIB2, v=GIB2, mla=st.booleans())
def test_sglang_s_kv_cache_and_vllm_s_token_count(tokens, k, v, mla):
    sizes = f"KV size: {k:.2f} GB" if mla else f"K size: {k:.2f} GB, V size: {v:.2f} GB"
    f = reading(f"KV Cache is allocated. #tokens: {tokens}, {sizes}").fields
    assert f["kv_cache_tokens"] == tokens
    assert f["kv_cache_bytes"] == to_bytes(k if mla else k + v)
    assert reading(f"INFO 01-28 16:08:46 [kv_cache_utils.py:1305] GPU KV cache size: {tokens:,} tokens").fields["kv_cache_tokens"] == tokens


def test_a_training_log_line_is_no_reading():
    text = " [2025-03-01 10:00:00] iteration       10/    1000 | consumed samples:          640 | elapsed time per iteration (ms): 1234.5 |"
    assert oomlens.parse_text(text) == []
