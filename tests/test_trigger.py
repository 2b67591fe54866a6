"""The trigger prefilter: RE2 and Python's re find exactly the same candidate lines."""

from __future__ import annotations

import re

import re2

from conftest import REAL, SESSIONS
from oomlens.grammars import families
from oomlens.scan import Trigger


def test_every_trigger_compiles_in_re2_and_finds_what_re_finds():
    trigger = Trigger(families())
    slow = re.compile(trigger.regex.pattern)
    data = b"".join(p.read_bytes() for p in sorted(REAL.glob("*.log")))
    data += (SESSIONS / "ray2.60-b-rl-actor-oom" / "driver-console.log").read_bytes()
    fast_hits = [(m.start(), m.lastgroup.decode()) for m in trigger.regex.finditer(data)]
    slow_hits = [(m.start(), m.lastgroup) for m in slow.finditer(data)]
    assert isinstance(trigger.regex, re2._Regexp)
    assert fast_hits == slow_hits and len(fast_hits) > 100
