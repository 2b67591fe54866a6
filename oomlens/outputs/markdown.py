"""A summary a user pastes into a GitHub issue: what maintainers of veRL and OpenRLHF ask for
(the phase, Ray's top memory users, memory per worker over time), and nothing they don't."""

from __future__ import annotations

import re

from ..diagnosis import Diagnosis
from ..text import gib, when
from .filters import Filters, listing
from .table import left_out
from .verdict import all_clear, framework_words, nothing_read

MAX_ROWS = 40


def _gib(n: int | None) -> str:
    return "" if n is None else gib(n, unit=False)  # a cell of a GiB column: empty when not shown


# what a log may hold that a renderer would act on or a reader would not see: C0 and C1
# controls, DEL, and the bidi controls that reorder what is shown (Trojan Source)
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# what may open markup inside a line (emphasis, code, links, images, HTML, entities, tables,
# strike-through), and what opens a block (a list, a heading) where prose starts
# (an `_` inside a word opens nothing: reward_model_0 stays as written)
PUNCTUATION = re.compile(r"([\\`*\[\]<>!|~&#]|(?<![^\W_])_|_(?![^\W_]))|^([-+=]|\d+(?=[.)]))")
# a word a renderer would make live (a mention, an e-mail, a URL, and a bare host name under a
# top-level domain that linkify-it and chat apps link without a scheme: `logits.to(`, `todo.md`):
# shown as code, where nothing is
TLDS = r"[a-z]{2}|com|net|org|edu|gov|biz|info|name|pro|aero|asia|coop|museum|shop|web|xxx|рф"
HOST = r"(?:[^\W_]|-)"  # a host name's character: any script's letter or digit, or a hyphen (`²evil.co` is one host to linkify)
LIVE = re.compile(rf"\S*(?:@|://|www\.)\S*|(?<![\w.-]){HOST}+(?:\.{HOST}+)*\.(?:{TLDS})(?![\w-])\S*", re.IGNORECASE)
BACKTICKS = re.compile(r"`+")


def _visible(text: str) -> str:
    """`text` with every control character written as its escape (`\\x1b`, `\\u202e`), a
    line break or tab as a space: a pasted summary shows what the log held, and nothing
    in it moves the cursor, ends a table row or reorders the line."""
    text = text.replace("\n", " ").replace("\t", " ")
    return CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


def _code(text: object, cell: bool = False) -> str:
    """Log text as a code span: nothing in it is markup, a link or a mention. Its fence is
    longer than any run of backticks inside, and the spaces around the text are the ones
    CommonMark strips; in a table cell a `|` is escaped, as GFM reads cells before spans."""
    body = _visible("" if text is None else str(text))
    if not body:
        return ""
    if cell:
        body = body.replace("|", "\\|")
    fence = "`" * (max((len(m) for m in BACKTICKS.findall(body)), default=0) + 1)
    if body[0] == "`" or body[-1] == "`" or (body[0] == body[-1] == " " and body.strip()):
        body = f" {body} "  # the one space a side CommonMark strips
    return f"{fence}{body}{fence}"


def _text(text: object, cell: bool = False) -> str:
    """Text that may hold words from the logs, as prose: every punctuation character a
    renderer could read as markup escaped, control characters made visible, and a word
    GFM would link (a URL, an e-mail, an @mention) shown as code."""
    body = _visible("" if text is None else str(text))
    out, at = [], 0
    for m in LIVE.finditer(body):
        out += [_escaped(body[at : m.start()], not cell and at == 0), _code(m.group(), cell)]
        at = m.end()
    out.append(_escaped(body[at:], not cell and at == 0))
    return "".join(out)


def _escaped(text: str, starts_block: bool) -> str:
    """Markup characters escaped; where `text` begins a block (prose, not a table cell),
    a list or heading marker at its start too."""

    def escape(m: re.Match[str]) -> str:
        if m.group(1):
            return f"\\{m.group(1)}"
        if not starts_block:
            return m.group(2)
        return f"{m.group(2)}\\" if m.group(2)[0].isdigit() else f"\\{m.group(2)}"

    return PUNCTUATION.sub(escape, text)


def _cell(text: object) -> str:
    """A table cell: escaped prose, a `|` escaped as GFM reads cells (one row a line)."""
    return _text(text, cell=True)


def render(diagnosis: Diagnosis, filters: Filters | None = None) -> str:
    """The summary; `filters` choose the events its event list shows (failures by default)."""
    out = ["## oomlens diagnosis", ""]
    v = diagnosis.verdict
    if not diagnosis.readable:
        out.append(f"**Nothing read:** {_text(nothing_read(diagnosis, 'below'))}.")
    elif v is None:
        clear = all_clear(diagnosis, "below")
        out.append(_text(clear[0].upper() + clear[1:]) + ".")
    else:
        out += [
            f"**Root cause:** {_text(v['summary'])}",
            "",
            f"**Component:** {_text(v['component'] or 'unknown')} · **memory:** {_text(v['memory'] or 'not shown')} · "
            f"**confidence:** {v['confidence']:.2f}" + (f" · **framework:** {_text(framework_words(diagnosis))}" if diagnosis.frameworks else ""),
        ]
    if diagnosis.clocks:
        out += [""] + [f"- clock: {_cell(note.sentence())}" for note in diagnosis.clocks]
    if diagnosis.reduction_notes:
        out += [""] + [f"- {_cell(note)}" for note in diagnosis.reduction_notes]
    for incident in diagnosis.incidents:
        heading = f"Incident {incident.id}: {diagnosis.kinds.label(incident.root.kind, incident.root.device)} ({incident.memory or 'memory not shown'})"
        out += ["", f"### {_text(heading)}", ""]
        if incident.session:
            out += [f"**Session:** {_code(incident.session)}", ""]
        out += [f"- {_cell(line)}" for line in incident.evidence]
        killed = incident.root.fields.get("killed")
        if isinstance(killed, list) and killed:  # every worker the kill report names (a raylet summary's is a count)
            out += ["", f"Workers Ray killed ({len(killed)}):", "", "| pid | GiB | name |", "|---|---|---|"]
            out += [
                f"| {_cell(k.get('pid') if k.get('pid') is not None else k.get('worker_id'))} | {_gib(k.get('bytes'))} | {_code(k.get('name'), cell=True)} |"
                for k in killed
            ]
        remedies = diagnosis.remedies.get(incident.id or "", [])
        if remedies:
            out += ["", "| setting | value | now | why |", "|---|---|---|---|"]
            out += [f"| {_code(r['setting'], cell=True)} | {_cell(r['value'])} | {_cell(r.get('current'))} | {_cell(r['why'])} |" for r in remedies]
        top = incident.root.fields.get("top")  # a kill report's Top-10 table
        if top:
            out += ["", "Ray's top memory users at the kill:", "", "| pid | GiB | command |", "|---|---|---|"]
            out += [f"| {_cell(r['pid'])} | {_gib(r['bytes'])} | {_code(r['command'], cell=True)} |" for r in top]
    readings = [s for s in diagnosis.timeline if s.label not in ("Top 10", "killed", "node")]
    if readings:
        out += ["", "### Memory over time", "", "| time | node | pid | process / label | memory | metric | GiB | of GiB |", "|---|---|---|---|---|---|---|---|"]
        shown = readings if len(readings) <= MAX_ROWS else readings[: MAX_ROWS // 2] + readings[-MAX_ROWS // 2 :]
        for s in shown:
            out.append(
                f"| {_cell(s.time)} | {_cell(s.node)} | {_cell(s.pid)} | {_cell(s.label or s.process)} | {_cell(s.memory)} | {_cell(s.metric)} | {_gib(s.bytes)} | {_gib(s.total_bytes)} |"
            )
        if len(readings) > MAX_ROWS:
            out.append(f"\n({len(readings) - MAX_ROWS} readings in the middle left out)")
    chosen = listing(diagnosis, filters or Filters())
    if chosen.rows:
        out += ["", "### Events", "", "| id | time | kind | node | pid | process | source |", "|---|---|---|---|---|---|---|"]
        for e, node in chosen.rows[:MAX_ROWS]:
            who = ".".join(p for p in (e.actor, e.method) if p)
            out.append(
                f"| {_cell(e.id)} | {_cell(when(e.time, e.time_latest, e.time_inferred) or None)} | {_cell(e.kind)} | {_cell(node)} | {_cell(e.pid)} | {_cell(who)} | {_code(f'{e.source.path}:{e.source.line}', cell=True)} |"
            )
    notes = [f"{len(chosen.rows) - MAX_ROWS:,} more event(s) not shown here: --format json has every one"] if len(chosen.rows) > MAX_ROWS else []
    notes += left_out(chosen, len(chosen.rows), any(e.kind in diagnosis.kinds.memory_lines for e, _ in chosen.rows))
    if notes and diagnosis.readable:
        out += [""] + [f"- {_cell(note)}" for note in notes]
    problems = diagnosis.problems
    if problems:
        out += ["", "### Inputs that could not be read fully", ""] + [f"- {_cell(p)}" for p in problems]
    out += ["", "<sub>generated by oomlens from the logs alone</sub>", ""]
    return "\n".join(out)
