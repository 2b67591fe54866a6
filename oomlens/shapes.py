"""Shapes: a line with its numbers masked, so that what is learned of one line holds for
every line of its shape.

Memory lines come by the hundred thousand and differ only in their numbers: a grammar
parses one of each shape (grammars.Family), the scanner judges a raw line plain once per
shape (blocks.py), the remedies read the shapes of lines, not the lines, and a paste's
layout tells the next record of one format from the rest of a wrapped line by its shape.

Two masks: every digit written as a 0 (the width of each number stays), and each number
written as the one placeholder of its form (any width), which a grammar still parses.
"""

from __future__ import annotations

import re

from ._core import numbers_and_shape as _ascii_numbers_and_shape

MAX_SHAPES = 4096  # shapes a cache of them keeps before it starts over
MAX_SHAPE_LINE = 16 << 10  # a longer line parses as it stands: its shape would not come again, and finding it is a pass over it all

# Every ASCII digit a 0, by bytes.translate (a table lookup in C; str.translate looks a
# dict up per character in text that is not ASCII).
TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
TEXT_TO_ZERO = str.maketrans("123456789", "000000000")  # for a few characters of text
_DIGIT = re.compile(r"\d")


def zeroed(text: str) -> str:
    """The text with every digit a 0, of any script. bytes.translate does it many times
    faster than the regex, which stays for text that is not ASCII (where \\d is any
    script's digit)."""
    if text.isascii():
        return text.encode("ascii").translate(TO_ZERO).decode("ascii")
    return _DIGIT.sub("0", text)


# A number as the shape cache sees it: any width, not glued behind a letter, a digit or a
# dot (`gpu0`, `fp16` and the tail of an IP stay as written). Its form (sign, fraction,
# exponent) stays in the shape: a grammar may take an integer where it refuses a fraction.
# The look-ahead first: `re` then tries the look-behind only where a sign or digit stands.
NUMBER_RUN = re.compile(r"(?=[-\d])(?<![A-Za-z_\d.])((-?)\d+(\.\d+)?([eE][-+]?\d+)?)")
# a number's placeholder in a shape, by (sign, has a fraction, has an exponent)
FORMS = {(sign, frac, exp): f"{sign}{'0.0' if frac else '0'}{'e0' if exp else ''}" for sign in ("", "-") for frac in (False, True) for exp in (False, True)}


def numbers_and_shape(text: str) -> tuple[list[str], str]:
    """The numbers of a line, in order, and its shape: each number written as the one
    placeholder of its form (sign, fraction, exponent). An ASCII line (nearly every memory
    line) is masked by the native core in one pass; other text by NUMBER_RUN, whose digit class holds
    any script's digits, as the core's does not (tests/test_shapes_native.py: the two agree on
    ASCII)."""
    if text.isascii():
        return _ascii_numbers_and_shape(text)
    return numbers_and_shape_of_text(text)


def numbers_and_shape_of_text(text: str) -> tuple[list[str], str]:
    """numbers_and_shape by one regex pass: re.split gives the text between numbers and each
    number's groups, five to a number."""
    parts = NUMBER_RUN.split(text)
    shape = [parts[0]]
    for sign, frac, exp, after in zip(parts[2::5], parts[3::5], parts[4::5], parts[5::5], strict=True):
        shape += (FORMS[sign, frac is not None, exp is not None], after)
    return parts[1::5], "".join(shape)
