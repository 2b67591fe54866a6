"""vLLM start-up memory errors: one event per error, the numbers in bytes and tokens."""

from __future__ import annotations

import pytest

from conftest import REAL
from oomlens import analyze, parse_text

GIB = 1 << 30


def gib(number: float) -> int:
    return round(number * GIB)


def errors(events) -> list:
    return [e for e in events if e.kind == "vllm_memory_error"]


def only(name: str):
    found = errors(analyze(str(REAL / name)).events)
    assert len(found) == 1, [e.source for e in found]
    return found[0]


def test_no_kv_cache_memory_once_despite_the_raise_line_in_the_traceback():
    event = only("027_vllm_10439.log")
    assert event.fields["error"] == "no_kv_cache_memory"
    # the `raise ValueError("No available memory ...` of line 2 is the same error, quoted where
    # it was raised: one event read in two places (alone, past an excerpt's end, it still counts)
    assert sorted(source.line for source in event.sources) == [2, 3]
    assert event.memory == "gpu"
    assert event.fields["local_time"] == "11-18T18:07:28"  # vLLM prints no year


def test_v0_max_seq_len_larger_than_kv_cache_tokens():
    event = only("056_vllm_10517.log")
    f = event.fields
    assert (f["error"], f["max_model_len"], f["kv_cache_tokens"]) == ("max_seq_len_exceeds_kv_cache", 29000, 23648)
    assert f["needed_bytes"] is None and f["available_bytes"] is None
    assert event.source.line == 5


def test_v1_kv_cache_needed_larger_than_available_with_estimate():
    f = only("057_vllm_25350.log").fields
    assert (f["error"], f["max_model_len"]) == ("max_seq_len_exceeds_kv_cache", 221000)
    assert (f["needed_bytes"], f["available_bytes"]) == (gib(10.12), gib(5.59))
    assert f["estimated_max_model_len"] == 122080
    assert f["kv_cache_tokens"] is None


@pytest.mark.parametrize("name", ["029_vllm_14574.log", "030_qanything_302.log", "084_vllm_31273.log"])
def test_no_vllm_memory_error(name):
    assert errors(analyze(str(REAL / name)).events) == []


def parse(text: str) -> list:
    return errors(parse_text(text))


def test_startup_free_memory_on_a_named_device():
    (event,) = parse(
        "(EngineCore_0 pid=7) ValueError: Free memory on device cuda:3 (5.31/23.56 GiB) on startup is less than "
        "desired GPU memory utilization (0.8, 18.85 GiB). Decrease GPU memory utilization or reduce GPU memory "
        "used by other processes."
    )
    f = event.fields
    assert (event.gpu, event.pid, f["device"]) == (3, 7, "cuda:3")
    assert (f["free_bytes"], f["total_bytes"], f["requested_bytes"]) == (gib(5.31), gib(23.56), gib(18.85))
    assert f["gpu_memory_utilization"] == 0.8


def test_cut_v1_message_keeps_what_was_printed():
    (event,) = parse("To serve at least one request with the model's max seq len (8192), (3.5 GiB KV cache is ne")
    f = event.fields
    assert (f["max_model_len"], f["needed_bytes"], f["truncated"]) == (8192, None, True)


@pytest.mark.parametrize(
    "text",
    [
        '            f"To serve at least one request with the models\'s max seq len ({max_model_len}), "',
        "INFO 06-09 17:08:25 [gpu_worker.py:227] Available KV cache memory: -0.3 GiB",
        "INFO 04-27 10:13:05 llm_engine.py:275] # GPU blocks: 0, # CPU blocks: 256",
    ],
)
def test_not_an_error(text):
    assert parse(text) == []


def test_the_raise_of_the_message_is_the_error_when_the_exception_line_is_cut_off():
    text = (
        'ERROR 06-09 17:08:25 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 526, in check_enough_kv_cache_memory\n'
        'ERROR 06-09 17:08:25 [core.py:708]     raise ValueError("No available memory for the cache blocks. "\n'
    )
    (event,) = parse(text)
    assert (event.kind, event.fields["error"], event.source.line) == ("vllm_memory_error", "no_kv_cache_memory", 2)


def test_the_same_error_from_two_channels_folds_into_one():
    line = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
    (event,) = parse(f"ERROR 11-18 18:07:28 engine.py:366] {line}\n(EngineCore pid=9) {line}\n")
    assert len(event.sources) == 2
