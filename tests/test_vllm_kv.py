"""vLLM's KV-cache start-up errors name their own remedy: the settings they ask to raise or
lower are read from the message, and the remedies say them with the message's numbers. On
the CPU backend (the V0 CPU worker's `VLLM_CPU_KVCACHE_SPACE`) the memory is the host's."""

from __future__ import annotations

import tomllib
from importlib import resources

from hypothesis import given, settings, strategies as st

import oomlens
from oomlens.correlate import Context, Incident, explain
from oomlens.diagnosis import summary as told
from oomlens.events import to_bytes
from oomlens.kinds import shipped
from oomlens.remedies import remedies_for
from oomlens.text import compile_template
from test_envelopes import OUTER

HEADS = ["", "(EngineCore pid=110) ERROR 08-28 07:39:28 [core.py:1346] ", "ERROR 11-18 18:07:28 engine.py:366] ", "[rank0]: "]


def _remedies(text: str) -> tuple[oomlens.Event, dict[str, dict]]:
    (event,) = [e for e in oomlens.parse_text(text) if e.kind == "vllm_memory_error"]
    incident = Incident(root=event)
    explain(incident, Context([]), shipped())
    return event, {r["setting"]: r for r in remedies_for(incident, (), [], "")}


@settings(max_examples=60, deadline=None)
@given(
    length=st.integers(1024, 2**21),
    needed=st.integers(1, 99_999),
    available=st.integers(0, 99_999),
    estimate=st.one_of(st.none(), st.integers(1, 2**20)),
    models=st.sampled_from(["models's", "model's", "model"]),
    paren=st.booleans(),
    ticks=st.booleans(),
    head=st.sampled_from(HEADS),
    outer=st.sampled_from(OUTER),
)
def test_v1_seq_len_error_names_its_remedies_with_its_numbers(length, needed, available, estimate, models, paren, ticks, head, outer):
    need, have = f"{needed / 100:.2f}", f"{available / 100:.2f}"
    quote = "`" if ticks else ""
    based = f"Based on the available memory, the estimated maximum model length is {estimate}. " if estimate else ""
    text = (
        f"{outer}{head}ValueError: To serve at least one request with the {models} max seq len ({length}), {'(' if paren else ''}{need} GiB KV cache is needed, "
        f"which is larger than the available KV cache memory ({have} GiB). {based}Try increasing {quote}gpu_memory_utilization{quote} or decreasing "
        f"{quote}max_model_len{quote} when initializing the engine."
    )
    event, remedies = _remedies(text)
    assert (event.memory, event.fields["raise_setting"], event.fields["lower_setting"]) == ("gpu", "gpu_memory_utilization", "max_model_len")
    assert (event.fields["needed_bytes"], event.fields["available_bytes"], event.fields["max_model_len"]) == (to_bytes(need), to_bytes(have), length)
    assert remedies["max_model_len"]["value"] == (str(estimate) if estimate else "lower")
    assert f"{to_bytes(need) / 2**30:.2f} GiB" in remedies["max_model_len"]["why"] and str(length) in remedies["max_model_len"]["why"]
    assert remedies["gpu_memory_utilization"]["direction"] == "higher"  # its value now is not in the message: the direction, in words
    assert (
        remedies["max_model_len"]["paste"] == f"max_model_len={remedies['max_model_len']['value']}" if estimate else remedies["max_model_len"]["paste"] is None
    )
    assert "VLLM_CPU_KVCACHE_SPACE" not in remedies


@settings(max_examples=40, deadline=None)
@given(length=st.integers(1024, 2**21), tokens=st.integers(16, 2**20), outer=st.sampled_from(OUTER))
def test_the_cpu_worker_s_error_is_host_memory_and_names_its_space(length, tokens, outer):
    text = (
        f"{outer}ValueError: The model's max seq len ({length}) is larger than the maximum number of tokens that can be stored in KV cache ({tokens}). "
        "Try increasing `VLLM_CPU_KVCACHE_SPACE` or decreasing `max_model_len` when initializing the engine."
    )
    event, remedies = _remedies(text)
    assert (event.memory, event.device, event.fields["backend"]) == ("host", None, "cpu")
    assert set(remedies) >= {"VLLM_CPU_KVCACHE_SPACE", "max_model_len"} and "gpu_memory_utilization" not in remedies
    assert f"{tokens} tokens" in remedies["VLLM_CPU_KVCACHE_SPACE"]["why"]
    summary = told(Incident(root=event), shipped())
    assert summary.startswith("host memory: vLLM could not fit its KV cache") and "VLLM_CPU_KVCACHE_SPACE" in summary


def test_a_message_that_names_no_setting_gets_no_named_remedy():
    _, remedies = _remedies(
        "ValueError: Free memory on device cuda:0 (12.18/23.56 GiB) on startup is less than desired GPU memory utilization (0.92, 21.67 GiB)."
    )
    assert not {"max_model_len", "gpu_memory_utilization", "kv_cache_memory_bytes"} & set(remedies)


def test_every_remedy_template_is_well_formed():
    rules = tomllib.loads(resources.files("oomlens.data").joinpath("remedies.toml").read_text(encoding="utf-8"))["remedy"]
    for rule in rules:
        for key in ("value", "why"):
            compile_template(rule[key])  # raises on an unbalanced bracket or an unknown spec


@settings(max_examples=40, deadline=None)
@given(
    node=st.integers(0, 7),
    free=st.integers(1, 99_999),
    total=st.integers(1, 99_999),
    kv=st.integers(1, 99_999),
    explicit=st.booleans(),
    head=st.sampled_from(HEADS),
)
def test_the_v1_cpu_worker_s_errors_are_host_memory_and_say_what_to_lower(node, free, total, kv, explicit, head):
    a, t, k = (f"{n / 100:.2f}" for n in (free, total, kv))
    tail = (
        f"({k} GiB). Decrease --kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other processes."
        if explicit
        else f"({k}/{t} GiB). Reduce CPU memory used by other processes."
    )
    event, remedies = _remedies(
        f"{head}ValueError: Available memory on node {node} ({a}/{t} GiB) on kv cache allocation is less than requested memory for kv {tail}"
    )
    assert (event.memory, event.fields["backend"], event.fields["numa_node"]) == ("host", "cpu", node)
    assert (event.fields["free_bytes"], event.fields["total_bytes"], event.fields["needed_bytes"]) == (to_bytes(a), to_bytes(t), to_bytes(k))
    if explicit:
        assert remedies["VLLM_CPU_KVCACHE_SPACE"]["value"] == "lower" and remedies["kv_cache_memory_bytes"]["value"] == str(to_bytes(a))
    else:
        assert not {"VLLM_CPU_KVCACHE_SPACE", "kv_cache_memory_bytes", "gpu_memory_utilization"} & set(remedies)


@settings(max_examples=40, deadline=None)
@given(
    space=st.one_of(st.none(), st.integers(1, 64)),
    needed_cgib=st.integers(1, 9_999),
    total=st.integers(2, 512),
    worker=st.integers(2, 99_999),
    engine=st.integers(2, 99_999),
    between=st.integers(0, 40),
    cpu=st.booleans(),
)
def test_the_cpu_worker_s_kv_cache_line_puts_the_refusal_on_the_host(tmp_path_factory, space, needed_cgib, total, worker, engine, between, cpu):
    """vLLM V1's CPU worker refuses in the GPU worker's words (_check_enough_kv_cache_memory is
    shared), after saying at start-up how it sized its KV cache: set by VLLM_CPU_KVCACHE_SPACE,
    or from --gpu-memory-utilization, a share of the host's memory. That line, anywhere before
    the refusal in its file, makes the memory the host's and the fix the setting that sized it;
    without it the refusal stays of the device."""
    have = f"{space}.0" if space else "1.25"
    sized = (
        f"(Worker pid={worker}) INFO 08-28 07:39:28 [cpu_worker.py:255] Explicitly set ({have}/{total}.00) GiB for KV cache on node 0."
        if space
        else f"(Worker pid={worker}) INFO 08-28 07:39:28 [cpu_worker.py:235] Auto set ({have}/{total}.0) GiB for KV cache on node 0, with 5.4 GiB requested memory for the worker. 3.92 GiB memory was consumed by non-kv usages."
    )
    needed = f"{needed_cgib / 100:.2f}"
    refusal = (
        f"(EngineCore pid={engine}) ERROR 08-28 07:39:29 [core.py:1346] ValueError: To serve at least one request with the model's max seq len (262144), "
        f"({needed} GiB KV cache is needed, which is larger than the available KV cache memory ({have} GiB). Based on the available memory, "
        "the estimated maximum model length is 9344. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    )
    lines = ([sized] if cpu else []) + [f"(EngineCore pid={engine}) INFO 08-28 07:39:28 [core.py:90] step {n}" for n in range(between)] + [refusal]
    log = tmp_path_factory.mktemp("vllm") / "serve.log"
    log.write_text("\n".join(lines) + "\n")
    diagnosis = oomlens.analyze(str(log), jobs=1)
    (event,) = [e for e in diagnosis.events if e.kind == "vllm_memory_error"]
    settings_ = {r["setting"]: r for r in diagnosis.remedies[diagnosis.incidents[0].id]}
    assert event.memory == ("host" if cpu else "gpu")
    assert event.fields.get("backend") == ("cpu" if cpu else None)
    assert "max_model_len" in settings_
    if cpu and space:
        assert settings_["VLLM_CPU_KVCACHE_SPACE"]["value"] == str(-(-to_bytes(needed, "GiB") // 2**30))
        assert "gpu_memory_utilization" not in settings_  # not read while the space is set
    else:
        assert "VLLM_CPU_KVCACHE_SPACE" not in settings_ and "gpu_memory_utilization" in settings_
