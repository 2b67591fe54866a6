"""The native core masks an ASCII line's numbers exactly as shapes.NUMBER_RUN does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from oomlens._core import numbers_and_shape as native
from oomlens.shapes import numbers_and_shape, numbers_and_shape_of_text

# what surrounds and makes numbers: signs, dots, exponents, letters and `_` that glue them
ASCII_PIECES = st.sampled_from(["-", ".", "e", "E", "+", "_", "a", "Z", " ", ":", "/", "x", "(", ","]) | st.integers(0, 10**6).map(str)


@settings(max_examples=2000, deadline=None)
@given(st.lists(ASCII_PIECES, max_size=30).map("".join))
def test_the_core_masks_as_the_regex_does(text):
    assert native(text) == numbers_and_shape_of_text(text)


@pytest.mark.parametrize(
    "line",
    [
        "(WorkerDict pid=41234) Before state_dict() in sharding manager memory, memory allocated (GB): 14.953125, memory reserved (GB): 16.5078125",
        "step:12 - actor/pg_loss:np.float64(-0.0123) - actor/entropy:nan - perf/max_memory_allocated_gb:43.21 - critic/x:-1.2e-05 - v:1e+3",
        "[2023-03-10 08:16:44,681] [INFO] [utils.py:840:see_memory_usage] CPU Virtual Memory:  used = 154.52 GB, percent = 24.5%",
        "10.0.0.1:6379 gpu0 fp16 v1.2.3 -5 3-5 1e 2. .5",
    ],
)
def test_real_lines_mask_alike(line):
    assert numbers_and_shape(line) == numbers_and_shape_of_text(line)


def test_text_that_is_not_ascii_keeps_any_script_s_digits():
    """`\\d` of `re` is any script's digit: such a line is read by the regex, not the core."""
    line = "used ٣.٥ GB, 12 GB ✓"
    assert numbers_and_shape(line) == (["٣.٥", "12"], "used 0.0 GB, 0 GB ✓")
    with pytest.raises(ValueError, match="ASCII"):
        native(line)
