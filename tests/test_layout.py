"""The layout of a paste: lines a terminal hard-wrapped at any width are joined again, a
paste in reverse order is read oldest first, and line numbers stay the input's own."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import assume, given, settings, strategies as st

from conftest import REAL
from oomlens import analyze
from oomlens.envelopes import peel
from oomlens.grammars import cues, families
from oomlens.layout import continues, newest_first, wrap_layout, wrap_width
from oomlens.pipeline import read_input
from oomlens.sources import Input

WIDTHS = [80, 100, 120, 132, 160, 200]


def wrapped(text: str, width: int) -> str:
    """Every line cut into segments exactly `width` characters wide, as a terminal does."""
    return "\n".join(line[i : i + width] for line in text.split("\n") for i in range(0, max(len(line), 1), width))


def found(text: str) -> list:
    return [e for e in read_input(Input("<paste>", opener=lambda: io.BufferedReader(io.BytesIO(text.encode())))) if hasattr(e, "text")]


def found_clues(text: str) -> list:
    return [
        c for c in read_input(Input("<paste>", opener=lambda: io.BufferedReader(io.BytesIO(text.encode())))) if not hasattr(c, "text") and c.kind == "context"
    ]


def facts(event) -> tuple:
    numbers = {k: v for k, v in event.fields.items() if k.endswith("_bytes") or k in ("threshold", "usage_fraction", "timeout_ms", "seq", "op")}
    return event.kind, event.pid, sorted(numbers.items(), key=str)


WATCHDOG = "\n".join(
    f"[rank{r}]:[E810 03:04:{r:02d}.061727749 ProcessGroupNCCL.cpp:683] [PG 0 Rank {r}] Watchdog caught collective operation timeout: "
    f"WorkNCCL(SeqNum=38{r}6, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 6000{r}9 milliseconds before timing out."
    for r in range(6)
)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_wrap_that_splits_numbers_is_undone(width):
    events = found(wrapped(WATCHDOG, width))
    assert [(e.fields["seq"], e.fields["timeout_ms"], e.rank) for e in events] == [(int(f"38{r}6"), 600000, r) for r in range(6)]
    assert [e.source.line for e in events] == [1 + r * -(-len(WATCHDOG.split("\n")[r]) // width) for r in range(6)]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_width_is_learned_from_the_text(width):
    assert wrap_width(wrapped(WATCHDOG, width).encode()) == width
    assert wrap_width(WATCHDOG.encode()) is None  # lines of one width, each a record of its own


@pytest.mark.parametrize("envelope", ["> ", "| ", "[2026-03-12 11:17:34] ", "{n}:", "  {n}\t"])
@pytest.mark.parametrize("width", [80, 116, 140])
def test_a_wrap_beneath_an_envelope_added_after_it_is_undone(width, envelope):
    """A terminal copy quoted, numbered or collected afterwards: every segment carries the
    envelope, the first as the rest, so the wrap is found in the lines beneath it."""
    lines = wrapped(WATCHDOG, width).split("\n")
    text = "\n".join(envelope.format(n=n) + line for n, line in enumerate(lines, 1))
    assert wrap_layout(text.encode())[0] == width
    events = found(text)
    assert [(e.fields["seq"], e.fields["timeout_ms"], e.rank) for e in events] == [(int(f"38{r}6"), 600000, r) for r in range(6)]


def test_a_program_header_on_every_line_is_no_envelope_added_after_a_wrap():
    """c10's own header heads every line of an unwrapped log of one width: no wrap there."""
    assert wrap_layout(WATCHDOG.encode()) is None


def test_copies_of_the_widest_line_are_no_wrap():
    text = "\n".join(["INFO short"] * 5 + [WATCHDOG.split("\n")[0]] * 4 + ["done"])
    assert wrap_width(text.encode()) is None


REAL_WITH_EVENTS = [p for p in sorted(REAL.glob("0*.log")) if p.stat().st_size < 200_000]


@pytest.mark.parametrize("path", REAL_WITH_EVENTS, ids=[p.name for p in REAL_WITH_EVENTS])
def test_real_excerpts_wrapped_at_120_give_the_same_events(path, tmp_path):
    """Every real excerpt whose lines are cut at 120 columns (most have several lines that long)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if sum(len(line) > 120 for line in text.split("\n")) < 2:
        pytest.skip("fewer than two lines to wrap: no width to learn")
    (tmp_path / path.name).write_text(wrapped(text, 120))
    before = sorted(map(facts, analyze(str(path), jobs=1).events), key=str)
    assert sorted(map(facts, analyze(str(tmp_path / path.name), jobs=1).events), key=str) == before


@pytest.mark.parametrize("name", ["053_openrlhf_335.log", "../sessions/ray2.60-b-rl-actor-oom/logs/raylet.out"])
def test_a_paste_in_reverse_order_is_read_oldest_first(tmp_path, name):
    """Told by its times running backwards or by a traceback's header after its frames."""
    lines = (REAL / name).read_text().split("\n")
    lines = lines[:-1] if not lines[-1] else lines
    assert not newest_first("\n".join(lines).encode())
    assert newest_first("\n".join(reversed(lines)).encode())
    (tmp_path / "newest-first.log").write_text("\n".join(reversed(lines)) + "\n")
    before = analyze(str(REAL / name))
    after = analyze(str(tmp_path / "newest-first.log"))
    assert sorted(map(facts, after.events), key=str) == sorted(map(facts, before.events), key=str)
    for event in after.events:  # the input's own lines: where the block stands, last line first
        original = next(e for e in before.events if facts(e) == facts(event))
        assert (event.source.line, event.source.end_line) == (
            len(lines) + 1 - original.source.end_line,
            len(lines) + 1 - original.source.line,
        )
    assert after.verdict == before.verdict


def test_bytes_and_lines_counted_are_the_inputs_own(tmp_path):
    text = wrapped(WATCHDOG, 100) + "\n"
    path = tmp_path / "wrapped.log"
    path.write_text(text)
    (item,) = analyze(str(path)).inputs
    assert (item.bytes, item.lines) == (len(text.encode()), text.count("\n"))


@pytest.mark.parametrize("seed", range(4))
def test_lines_of_one_format_nearly_one_width_are_not_a_wrap(seed):
    """A worker's memory log: thousands of lines of one format whose numbers keep them within
    a column or two of one width. Many lines are exactly the widest, each followed by a line
    that is not its rest but the next record: no wrap, every line read."""
    import random

    from oomlens import parse_text
    from oomlens.layout import wrap_width

    rng = random.Random(seed)
    formats = [
        "Before state_dict() in sharding manager memory, memory allocated (GB): {a:.2f}, memory reserved (GB): {r:.2f}",
        "(WorkerDict pid=4211) After sync model weights in sharding manager, memory allocated (GB): {a:.2f}, memory reserved (GB): {r:.2f}, device memory used/total (GB): {u:.2f}/79.11",
        "step:{s} - perf/max_memory_allocated_gb:{a:.2f} - perf/max_memory_reserved_gb:{r:.2f} - perf/cpu_memory_used_gb:{u:.2f}",
    ]
    form = formats[seed % len(formats)]
    lines = [form.format(a=rng.uniform(10, 99), r=rng.uniform(10, 99), u=rng.uniform(10, 99), s=100 + i) for i in range(2000)]
    text = "\n".join(lines) + "\n"
    assert wrap_width(text.encode()[: 64 << 10]) is None
    assert len(parse_text(text)) == len(lines)


METHODS = {
    "actor_rollout_ref_update_actor": "update_actor",
    "actor_rollout_ref_generate_sequences": "generate_sequences",
    "critic_update_critic": "update_critic",
}


def _failures(seed: int) -> tuple[str, list[tuple[int, str]]]:
    """Ray remote tracebacks one after another, each ending in its own CUDA OOM (as a driver
    prints a batch of failed workers): each traceback's header names its pid and method."""
    import random

    rng = random.Random(seed)
    text, truth = [], []
    for n in range(rng.randrange(2, 7)):
        pid, method = rng.randrange(1000, 99999), rng.choice(list(METHODS))
        text.append(
            f"ray.exceptions.RayTaskError(OutOfMemoryError): \x1b[36mray::WorkerDict.{method}()\x1b[39m (pid={pid}, ip=10.0.0.{n}, "
            f"actor_id={rng.randbytes(16).hex()}, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f3e54b86650>)"
        )
        for depth in range(rng.randrange(1, 6)):
            text += [f'  File "/workspace/verl/workers/fsdp_workers.py", line {100 + depth}, in {METHODS[method]}', f"    x{depth} = self.step{depth}()"]
        text.append(
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {n + 1}.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 2.97 GiB is free."
        )
        truth.append((pid, method))
    return "\n".join(text) + "\n", truth


@pytest.mark.parametrize("seed", range(12))
def test_each_failure_of_a_paste_turned_round_is_told_by_its_own_traceback(tmp_path, seed):
    """Turned round, a CUDA OOM stands one line from its own traceback's frames and one from
    the next traceback's header: of two clues as near, the one read before it is its own,
    in a paste read in the order it was written as in one that stands newest first."""
    text, truth = _failures(seed)
    for name, data in (("as-written.log", text), ("newest-first.log", "\n".join(reversed(text.splitlines())) + "\n")):
        log = tmp_path / name
        log.write_text(data, encoding="utf-8")
        ooms = sorted((e.fields["requested_bytes"], e.pid, e.method) for e in analyze(str(log), jobs=1).events if e.kind == "cuda_oom")
        assert [(pid, method) for _, pid, method in ooms] == truth, name


_CODE = re.compile(r"\x1b\[[0-9;]*m")


def terminal_wrapped(text: str, width: int) -> str:
    """Every line cut where a terminal `width` columns wide cuts it: a colour code takes no
    column, a tab runs to the next stop of eight, every other character one column; the
    segments keep what was written (codes and tabs)."""
    out = []
    for line in text.split("\n"):
        segment, col, i = "", 0, 0
        while i < len(line):
            m = _CODE.match(line, i)
            if m:
                segment, i = segment + m.group(0), m.end()
                continue
            step = 8 - col % 8 if line[i] == "\t" else 1
            if col + step > width:
                out.append(segment)
                segment, col = "", 0
                step = 8 if line[i] == "\t" else 1
            segment, col, i = segment + line[i], col + step, i + 1
        out.append(segment)
    return "\n".join(out)


def coloured(text: str) -> str:
    """Ray's prefixes and the log levels in the colours Ray and vLLM print them in."""
    text = re.sub(r"^(\((?:raylet|[\w.<>:]+ pid=\d+(?:, ip=[\d.]+)?)\))", "\x1b[36m\\1\x1b[0m", text, flags=re.M)
    return re.sub(r"\b(ERROR|WARNING|INFO)\b", "\x1b[31m\\1\x1b[0m", text)


TERMINAL = ["202_rlinf_415.log", "209_ray_7317.log", "235_openrlhf_265.log", "201_verl_2950.log", "150_vllm_2734.log", "240_vllm_33297.log"]


@pytest.mark.parametrize("name", TERMINAL)
@pytest.mark.parametrize("width", [100, 132, 160])
def test_a_wrap_at_the_columns_a_terminal_shows_is_undone(name, width, tmp_path):
    """A coloured log shown in a terminal and copied from it: its codes take no column and
    its tabs run to their stops, so the characters of a cut line are not the wrap's width;
    the columns are (layout.columns), and the events read as from the log itself."""
    text = coloured((REAL / name).read_text())
    original = tmp_path / "original.log"
    original.write_text(text)
    copied = tmp_path / "copied.log"
    copied.write_text(terminal_wrapped(text, width))
    want, got = analyze(str(original), jobs=1), analyze(str(copied), jobs=1)
    assert sorted(map(facts, got.events), key=str) == sorted(map(facts, want.events), key=str)
    assert got.verdict == want.verdict


@pytest.mark.parametrize("width", [80, 100, 132])
def test_a_line_whose_tab_a_terminal_widened_is_joined_though_fewer_characters_than_the_wrap(width):
    """Each watchdog line behind a logger's time and a tab, wrapped by a terminal: the first
    segment holds fewer characters than the wrap is wide (its tab took up to eight columns),
    and is still joined to the rest of its line."""
    text = "\n".join(f"I1203 10:00:{r:02d}.12\t{line}" for r, line in enumerate(WATCHDOG.split("\n")))  # the tab from column 17 to 24
    events = found(terminal_wrapped(text, width))
    assert [(e.fields["seq"], e.fields["timeout_ms"], e.rank) for e in events] == [(int(f"38{r}6"), 600000, r) for r in range(6)]


DEEPSPEED = (
    "[2022-02-21 23:35:{s:02d},338] [INFO] [utils.py:827:see_memory_usage] MA 4.{s:02d} GB         Max_MA 5.09 GB         "
    "CA 6.39 GB         Max_CA 7 GB \n"
    "[2022-02-21 23:35:{s:02d},338] [INFO] [utils.py:832:see_memory_usage] CPU Virtual Memory:  used = 50.5 GB, percent = 40.2%"
)


def _at_a_run_edge(line: str, width: int) -> bool:
    """Does a wrap at `width` cut `line` just before or just after a run of blanks? The
    segment then ends as a padded line does, or the next begins as a new line does."""
    return any((line[c - 1] == " ") != (line[c] == " ") for c in range(width, len(line), width))


@pytest.mark.parametrize("width", range(80, 141))
def test_a_wrap_inside_the_blanks_between_deepspeed_figures_is_undone(width):
    """DeepSpeed's figures stand nine blanks apart: a wrap may fall inside that run, and the
    segment then ends in blanks as a padded line does. The next one begins with blanks and
    is no padded line itself, so it goes on. A start-up's six readings, wrapped at every
    width whose cuts fall inside a run or inside a word."""
    text = "\n".join(DEEPSPEED.format(s=s) for s in range(10, 16))
    if any(_at_a_run_edge(line, width) for line in text.split("\n")):
        pytest.skip("a cut at the edge of a run of blanks: told from padding by nothing (known, layout.padded)")
    gpu = [e.fields for e in found(wrapped(text, width)) if e.memory == "gpu"]
    assert [(f["allocated_bytes"], f["reserved_bytes"], f["peak_reserved_bytes"]) for f in gpu] == [
        (round(float(f"4.{s}") * (1 << 30)), round(6.39 * (1 << 30)), 7 << 30) for s in range(10, 16)
    ]
    assert not any(f.get("truncated") for f in gpu)


def test_blanks_a_terminal_capture_pads_every_line_with_are_no_wrap():
    """tmux pads every line to the pane's width: an indented line after a padded one is a
    line of its own, not the rest of it."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/app/verl/trainer/main_ppo.py", line 64, in main',
        "    run_ppo(config)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is free.",
    ]
    text = "\n".join(line.ljust(160) for line in lines)
    (event,) = found(text)
    assert (event.kind, event.fields["requested_bytes"]) == ("cuda_oom", 2 << 30)
    assert event.source.line == 4


# One long report among short lines: a wrap that cuts it through a trigger is found (wrap_measure)


def _cuts(line: str, trigger: re.Match[str]) -> list[int]:
    """Where a terminal of WRAP_MIN columns or more may cut a line through its trigger, with a
    word of it on each side (a segment ending in blanks would be padding)."""
    return [
        cut
        for cut in range(max(trigger.start() + 1, 80), trigger.end())
        if not line[cut - 1].isspace() and any(c.isalnum() for c in line[trigger.start() : cut]) and any(c.isalnum() for c in line[cut : trigger.end()])
    ]


LONG_SAMPLES = [
    (s.text, cuts)
    for fam in families()
    for s in fam.samples
    if "\n" not in s.text and s.text.isascii() and (trigger := fam.trigger_text.search(s.text)) and (cuts := _cuts(s.text, trigger))
]
SHORT = ["INFO step done", "loading shards", "(pid=4) epoch 3 started", "saving checkpoint to /tmp/ckpt", "metrics flushed"]


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_one_report_cut_through_its_trigger_is_read_as_written(data):
    """A report longer than the terminal among lines that all fit: cut where its trigger
    stands, it is the one piece of evidence of the wrap, and it is read whole again."""
    line, cuts = data.draw(st.sampled_from(LONG_SAMPLES), label="report")
    width = data.draw(st.sampled_from(cuts), label="cut inside the trigger")
    before = data.draw(st.lists(st.sampled_from(SHORT), min_size=1, max_size=6), label="before")
    after = data.draw(st.lists(st.sampled_from(SHORT), min_size=0, max_size=6), label="after")
    plain = "\n".join([*before, line, *after]) + "\n"
    text = wrapped(plain.rstrip("\n"), width) + "\n"
    assert wrap_layout(text.encode(), False, cues(families()).triggers)[0] == width
    assert [facts(e) for e in found(text)] == [facts(e) for e in found(plain)]


ALL_SAMPLES = [s.text for fam in families() for s in fam.samples]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_triggers_search_finds_what_re_finds_in_any_window(data):
    """Triggers.search asks `re` only of a window the core's DFA finds a trigger in: in any
    window of reports and words (a word's middle, a line's start, text past ASCII), it finds
    what `re` alone finds, where it finds it."""
    pieces = data.draw(st.lists(st.sampled_from(ALL_SAMPLES) | st.sampled_from([*SHORT, "é", "\n", "_x", "  "]), min_size=1, max_size=4), label="text")
    text = data.draw(st.sampled_from(["", " ", "\n"]), label="between").join(pieces)
    triggers = cues(families()).triggers
    edges = sorted(
        {max(0, min(len(text), e + d)) for m in triggers.compiled.finditer(text) for e in m.span() for d in (-1, 0, 1)}
    )  # where a window's edge matters
    pos = data.draw(st.sampled_from(edges) | st.integers(0, len(text)) if edges else st.integers(0, len(text)), label="pos")
    end = data.draw(st.sampled_from([e for e in edges if e >= pos] or [len(text)]) | st.integers(pos, len(text)), label="end")
    got, want = triggers.search(text, pos, end), triggers.compiled.search(text, pos, end)
    assert (got and got.span()) == (want and want.span())


def test_the_widest_line_continued_by_no_trigger_is_no_wrap():
    """The widest line of a log and the line after it, which make no trigger together: no
    wrap, however the next line begins."""
    widest = "2026-03-12 11:17:34 INFO the reward model finished its batch of 512 prompts in 41.2 s with a mean score of 0.71 and"
    text = "\n".join(["INFO step 1", widest, "then it went on", "INFO step 2"]) + "\n"
    assert wrap_layout(text.encode(), False, cues(families()).triggers) is None


# Records of one format, some as long as a whole number of rows: the last row of such a
# record is exactly as wide as the wrap, and the next record must not be read as its rest

READING_SAMPLES = [  # as a program prints them after its own head: no envelope of their own before them
    s.text
    for fam in families()
    for s in fam.samples
    if s.kind in ("gpu_memory", "host_memory") and "\n" not in s.text and s.text.isascii() and peel(s.text).text == s.text
]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_record_that_fills_its_last_row_is_not_continued_by_the_next(data):
    """A program that heads each record alike (its name and a time, digits aside) and a
    terminal that wrapped them: a record whose length is a multiple of the width leaves a
    last row as wide as the wrap, and the next record's head, like this record's own, says
    it begins anew (layout.continues: `began`). Every reading is read, none joined to another."""
    width = data.draw(st.integers(80, 200), label="width")
    records = []
    for n in range(data.draw(st.integers(4, 8), label="records")):
        head = f"(AReaL) 20260409-23:{n:02d}:{data.draw(st.integers(10, 59)):02d}.{data.draw(st.integers(100, 999))} IOStruct INFO: "
        line = head + data.draw(st.sampled_from(READING_SAMPLES), label="reading")
        if data.draw(st.booleans(), label="fills its last row"):
            line += "x" * (-len(line) % width)  # some text after the reading, to the row's end
        assume(len(line) > width)
        records.append(line)
    plain = "\n".join(records) + "\n"
    text = wrapped(plain.rstrip("\n"), width) + "\n"
    assert [facts(e) for e in found(text)] == [facts(e) for e in found(plain)]


# A report upside down tells the order of a paste with no time in it (newest_first, blocks)

CUES = cues(families())
BLOCK_SAMPLES = [
    (fam.name, s.text.split("\n"))
    for fam in families()
    for block in CUES.blocks
    if block.start is fam.start
    for s in fam.samples
    if len(lines := s.text.split("\n")) >= 3
    and block.start.search(lines[0])
    and not block.continues.match(lines[0])
    and all(block.continues.match(line) for line in lines[1:3])
]
OTHER = ["loading shards", "Episode [1/1]:  12%|#         | 3/25", "INFO step done", "saving checkpoint to /tmp/ckpt", "metrics flushed"]


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_a_report_whose_lines_stand_above_its_start_tells_a_paste_newest_first(data):
    """A multi-line report of every family that has lines of its own (a kill report's table,
    an ActorDiedError's fields, a CUDA OOM's allocator lines) among lines that tell no order:
    upside down it is read as newest first, as written as it is."""
    name, block = data.draw(st.sampled_from(BLOCK_SAMPLES), label="report")
    before = data.draw(st.lists(st.sampled_from(OTHER), max_size=5), label="before")
    after = data.draw(st.lists(st.sampled_from(OTHER), min_size=1, max_size=5), label="after")
    written = [*before, *block, *after]
    assert not newest_first(("\n".join(written) + "\n").encode(), CUES.blocks), name
    assert newest_first(("\n".join(reversed(written)) + "\n").encode(), CUES.blocks), name
    assert not newest_first(("\n".join(reversed(written)) + "\n").encode()), name  # no time, no traceback: the report alone tells it


def test_a_report_s_paragraphs_apart_still_tell_its_order():
    """Ray's kill report prints blank lines between its paragraphs: turned round, its lines
    of its own stand above its first line with blanks between them, and still tell it."""
    report = [
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        "",
        "Memory on the node (IP: 10.0.0.3, ID: 5bf8d24f) where the task was running was 54.86GB / 57.60GB (0.952354), which exceeds the memory usage threshold of 0.95.",
        "",
        "Top 10 memory users:",
        "PID\tMEM(GB)\tCOMMAND",
        "",
        "Consider provisioning more memory on this node.",
    ]
    assert newest_first(("\n".join(reversed(report)) + "\n").encode(), CUES.blocks)
    assert not newest_first(("\n".join(report) + "\n").encode(), CUES.blocks)


@pytest.mark.parametrize("comma", [",", ""])  # faulthandler's frames print none before `in`
@pytest.mark.parametrize("indent", ["", "  ", "    "])
def test_a_frame_as_wide_as_the_wrap_keeps_its_code_on_its_own_line(indent, comma):
    """A `File` line that happens to be exactly as wide as the wrap is followed by its code,
    indented deeper: that is the next line, not the rest of it; a `File` line cut inside its
    function's name is continued by the rest of the name."""
    frame = f'{indent}File "/mnt/public/agent_system/multi_turn_rollout/rollout_loop.py", line 326{comma} in vanilla_multi_turn_loop'
    code = f"{indent}    batch_output = actor_rollout_wg.generate_sequences(batch_input)"
    assert not continues(frame, code, len(frame))
    assert continues(frame[:-4], "loop", len(frame) - 4)


def test_blanks_a_trigger_runs_across_are_no_padding():
    """A wrap that falls right after the two blanks of DeepSpeed's `CPU Virtual Memory:  used`
    leaves a segment that ends as a padded line does: the trigger across the cut says it goes
    on. A progress bar padded to the width, then a line of its own, stays two lines."""
    cut = "[2025-03-02 11:32:05,441] [INFO] [utils.py:800:see_memory_usage] CPU Virtual Memory:  "
    assert not continues(cut, "used = 127.01 GB, percent = 12.6%", len(cut))
    assert continues(cut, "used = 127.01 GB, percent = 12.6%", len(cut), triggers=CUES.triggers)
    bar = "Training Progress:  12%|#         | 3/25 [07:52<57:41, 157.34s/it]      "
    assert not continues(bar, "step:3 - actor/entropy:0.342", len(bar), triggers=CUES.triggers)


@settings(max_examples=60, deadline=None)
@given(
    envelope=st.sampled_from(["> ", "[2026-03-11 17:47:54] ", "2026-03-11T17:47:54.123Z ", "| "]),
    width=st.integers(90, 200),
    before=st.lists(st.sampled_from(SHORT), min_size=3, max_size=8),
    after=st.lists(st.sampled_from(SHORT), min_size=1, max_size=8),
)
def test_one_line_cut_after_an_envelope_was_put_on_every_line_is_joined(envelope, width, before, after):
    """A quote or a stamp put before every line, then a terminal's wrap: the one long line's
    rest lacks the envelope every other line has, and that tells the wrap."""
    header = "ray.exceptions.RayTaskError(NotImplementedError): ray::TaskRunner.run() (pid=2991687, ip=10.21.175.69, actor_id=aa12428bb212c26e78160ab001000000, repr=<main_ppo.TaskRunner object at 0x7f89aca2aba0>)"
    lines = [envelope + line for line in [*before, header, *after]]
    assume(len(lines[len(before)]) > width and all(len(line) < width for line in lines if header not in line))
    text = wrapped("\n".join(lines), width) + "\n"
    assert wrap_layout(text.encode(), False, CUES.triggers)[0] == width
    [task] = [c.fields["task"] for c in found_clues(text)]
    assert task["actor_id"] == "aa12428bb212c26e78160ab001000000" and task["pid"] == 2991687


def test_a_stamped_log_s_unstamped_lines_are_no_lost_envelope():
    """Python's logging stamps its records but not the lines of a traceback: the widest
    record followed by one of them is no wrap."""
    lines = [f"2026-03-11 17:47:{n:02d},100 INFO step {n} done" for n in range(6)]
    lines += [
        "2026-03-11 17:47:54,464 ERROR trainer failed while running the validation pass of the reward model, see below",
        "Traceback (most recent call last):",
    ]
    lines += ['  File "/verl/trainer/main_ppo.py", line 317, in run', "    trainer.fit()", "ValueError: bad batch"]
    assert wrap_layout(("\n".join(lines) + "\n").encode(), False, CUES.triggers) is None
