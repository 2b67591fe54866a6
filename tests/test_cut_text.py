"""A paste cut anywhere: what stands wholly before the cut is read as before, and a number the
cut may have shortened is null, never a wrong value (a file whose last line lacks its line
break was cut while written or copied)."""

from __future__ import annotations

import random

import pytest

from conftest import REAL, sample
from oomlens import analyze, parse_text

FILES = sorted(REAL.glob("0*.log"))


def numbers(event) -> dict:
    return {
        k: v
        for k, v in event.fields.items()
        if v is not None and (k.endswith("_bytes") or k in ("threshold", "usage_fraction", "timeout_ms", "seq", "op", "exit_type"))
    }


@pytest.mark.parametrize("path", sample(FILES, ids=[p.name for p in FILES]))
def test_a_cut_keeps_what_came_before_and_guesses_no_number(path, tmp_path):
    raw = path.read_bytes()
    whole = analyze(str(path), jobs=1).events
    rng = random.Random(path.name)
    for at in sorted(rng.randrange(len(raw) // 3, len(raw)) for _ in range(6)):
        cut = tmp_path / f"cut-{at}.log"
        cut.write_bytes(raw[:at])
        found = analyze(str(cut), jobs=1).events
        for event in found:  # every number read is one the whole text has
            assert any(w.kind == event.kind and all(numbers(w).get(k) == v for k, v in numbers(event).items()) for w in whole), (at, event.kind, numbers(event))
        complete_lines = raw[:at].count(b"\n")
        for w in whole:  # nothing wholly before the cut is lost
            if w.source.end_line < complete_lines:
                assert any(e.kind == w.kind and numbers(e) == numbers(w) for e in found), (at, w.kind, w.source.line)


def test_a_number_at_the_cut_is_null():
    line = "[rank0]:[E810 03:04:11.061727749 ProcessGroupNCCL.cpp:683] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n"
    cut = line[: line.index("1580") + 3]  # "SeqNum=158"
    import io

    from oomlens.pipeline import read_input
    from oomlens.sources import Input

    (event,) = read_input(Input("cut.log", opener=lambda: io.BytesIO(cut.encode())))
    assert (event.kind, event.fields["seq"], event.fields["truncated"]) == ("watchdog_timeout", None, True)


def test_a_snippet_is_whole_lines_even_without_its_last_break():
    text = "(WorkerDict pid=7) Before state_dict() in sharding manager memory, memory allocated (GB): 13.18, memory reserved (GB): 46.43"
    (event,) = parse_text(text)
    assert event.fields["reserved_bytes"] == round(46.43 * 2**30)


ROWS = (
    "2954421\t7.39\tray::WorkerDict.actor_rollout_generate_sequences\n"
    "2954422\t6.12\tray::WorkerDict.actor_rollout_generate_sequences\n"
    "1203\t0.52\t/usr/bin/python3 main_ppo.py\n"
)
SUGGESTIONS = (
    "Refer to the documentation on how to address the out of memory issue: "
    "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on "
    "this node or reducing task parallelism by requesting more CPUs per task.\n"
)


@pytest.mark.parametrize("before", ["", "(main_task pid=9) step 3 done\n", "Top 10 memory users:\nPID\tMEM(GB)\tCOMMAND\n"])
@pytest.mark.parametrize("gap", ["", "\n"])
def test_top_rows_kept_without_the_report_above_them_are_a_kill(before, gap):
    """A paste that kept only the Top-10 rows and the suggestions that close a kill report."""
    (event,) = parse_text(before + ROWS + gap + SUGGESTIONS)
    assert event.kind == "ray_oom_kill" and event.fields["usage_fraction"] is None
    assert [(r["pid"], r["bytes"]) for r in event.fields["top"]] == [(2954421, 7934952079), (2954422, 6571299963), (1203, 558345748)]
    assert event.source.line == before.count("\n") + 1 - (2 if "Top 10" in before else 0)


def test_the_suggestions_alone_are_no_kill():
    """The raylet's periodic summary ends with the same suggestions."""
    assert [e.kind for e in parse_text("(raylet) " + SUGGESTIONS)] == []
    assert [e.kind for e in parse_text("step 3: 12 0.5 loss\n" + SUGGESTIONS)] == []


@pytest.mark.parametrize("frames", [50, 390])
def test_a_cut_long_traceback_keeps_its_frames_in_work_linear_in_its_tokens(frames, monkeypatch):
    """A 400-frame traceback cut inside its last frame: every whole frame is read, and the
    parser is fed each token a bounded number of times (a copy of the parser at every token
    where the input may end made this quadratic)."""
    from lark.parsers.lalr_interactive_parser import InteractiveParser

    from oomlens.grammars import families, parse_prefix

    fed, copied = [], []
    original, copy = InteractiveParser.feed_token, InteractiveParser.copy
    monkeypatch.setattr(InteractiveParser, "feed_token", lambda self, token: fed.append(1) or original(self, token))
    monkeypatch.setattr(InteractiveParser, "copy", lambda self, *a: copied.append(1) or copy(self, *a))
    family = next(f for f in families() if f.name == "traceback")
    whole = "".join(f'  File "/x/y/mod{i}.py", line {i}, in func{i}\n    call_{i}(a, b)\n' for i in range(frames))
    tree, complete = parse_prefix(family.parser, whole + '  File "/x/y/broken.py", line')
    [context] = family.transformer.transform(tree)
    assert (complete, len(context["fields"]["frames"])) == (False, frames)
    assert len(fed) <= 3 * 12 * (frames + 1)  # about a dozen tokens a frame
    assert len(copied) <= 8
