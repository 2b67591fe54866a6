"""The HTML report: one self-contained page that shows an incident instead of telling it.

The verdict and its fixes on top, memory per node, process and GPU on one axis with the
failures marked on it, Ray's top memory users at each kill, then every failure with its
raw log block. plotly.js is inlined once, so the page opens offline (an e-mail
attachment, a CI artifact) and asks the network for nothing; `plotly="cdn"` loads the
plotly.js that plotly.py pins from plotly's CDN instead (a page of a few hundred KB), and
the Content-Security-Policy allows that one URL. A page whose inputs could not be read
says so and shows no all-clear.

Log text is untrusted. It reaches the page only through `html.escape`, or as JSON inside
`<script type="application/json">` with `<`, `>`, `&`, U+2028 and U+2029 written as
`\\u003c`-style escapes; the page's own script reads that JSON and sets `textContent`.
Terminal escape sequences (colour codes, in every form the envelopes peel, and OSC
titles and links) are taken out of the raw blocks shown: a browser would show them as
debris.

Long series are cut to at most MAX_POINTS points by keeping the lowest and highest reading
of each bucket (deterministic, and the peak before an OOM survives), and drawn as SVG: a
report must also open on a machine without WebGL.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import html
import json
import os
import re
import secrets
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..correlate import Incident
from ..envelopes import ANSI
from ..events import Event
from ..kinds import Kinds
from ..text import GIB, gib, when as in_words
from ..timeline import Sample
from .table import summary as event_summary
from .verdict import ends, framework_words, listed_ends

if TYPE_CHECKING:
    from ..diagnosis import Diagnosis

MAX_POINTS = 2000  # per series: ~ one point per pixel column of a wide screen, min and max
MARKERS_UP_TO = 200  # a series with more points is drawn as a line only (SVG markers cost)
HOVER_LINES = 30  # lines of a raw block shown on hover; the table shows all of it
HOVER_WIDTH = 160
MAX_KILL_CHARTS = 12
MARGIN = {"l": 60, "r": 20, "t": 70, "b": 50}  # the timeline's; its view buttons stand in the top one
TOP_WITHOUT_BUTTONS = 30  # room for an incident's label alone: the first screen is short
PLOTLY_CDN = "https://cdn.plot.ly/plotly-{version}.min.js"  # where plotly.py's own to_html(include_plotlyjs="cdn") loads it
T = TypeVar("T")
# What a terminal would act on and a browser shows as debris: the colour codes the envelopes
# peel (data/envelopes.toml's debris: whole, with the ESC lost or replaced, written out),
# then OSC sequences (a window title, a hyperlink: ESC ] ... BEL or ESC \), then any
# other escape (ESC, its intermediate bytes, its final byte).
ESCAPES = re.compile(ANSI.pattern + r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -/]*[0-~]?")


# -- small helpers ---------------------------------------------------------------------------


def esc(value: object) -> str:
    """Text for HTML: never markup."""
    return html.escape("" if value is None else str(value), quote=True)


def plain(value: object) -> str:
    """Text for a plotly label or tooltip. plotly reads a few tags and the entities &lt;
    &gt; &amp; in them (into SVG text, never as HTML), and shows &quot; as it is."""
    return html.escape("" if value is None else str(value), quote=False)


def script_json(data: Any) -> str:
    """JSON that is safe inside <script type="application/json">: no `</script>`, no `<!--`,
    no line separators that old parsers end a line on."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    for char, escape in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def _clock(time: str | None) -> str:
    return time.replace("T", " ") if time else "no time"


def _when(event: Event) -> str:
    """An event's time in words (text.when): its stamp, or for a line that printed none the
    interval its neighbours bound ("between 03:33:59 and 03:44:22")."""
    return in_words(event.time, event.time_latest, event.time_inferred) or "no time"


def _short(text: str | None, width: int = 48) -> str:
    text = text or ""
    return text if len(text) <= width else text[: width - 1] + "…"


def clean(text: str) -> str:
    """Log text as the page shows it: as written, less its terminal escape sequences."""
    return ESCAPES.sub("", text) if "\x1b" in text or "[" in text else text


def _hover_block(text: str) -> str:
    """A raw log block as plotly hover text: escaped, cut to what a tooltip can hold."""
    lines = clean(text).splitlines() or [""]
    shown = [_short(line, HOVER_WIDTH) for line in lines[:HOVER_LINES]]
    if len(lines) > HOVER_LINES:
        shown.append(f"… {len(lines) - HOVER_LINES} more lines in the event table")
    return "<br>".join(plain(line) for line in shown)


def _source(event: Event) -> str:
    return f"{event.source.path}:{event.source.line}"


def short_paths(paths: Sequence[str]) -> dict[str, str]:
    """Each path as its last few parts, as many as tell it apart from the others shown
    (`node-10.0.0.3/logs/gcs_server.out` beside `node-10.0.0.4/logs/gcs_server.out`, plain
    `driver-console.log` where it is the only one): a page of 120-character paths shows
    none of them whole on a phone, and the folder they share says nothing."""
    parts = {p: [x for x in re.split(r"[/\\]", p) if x] or [p] for p in set(paths)}
    shown: dict[str, str] = {}
    for path, mine in parts.items():
        for k in range(1, len(mine) + 1):
            tail = mine[-k:]
            if all(other[-k:] != tail for q, other in parts.items() if q != path):
                break
        shown[path] = path if k == len(mine) else "/".join(mine[-k:])
    return shown


def _link(event: Event, shown: dict[str, str]) -> str:
    """A link to an event's row: its file as `shown` shortens it, the whole path on hover."""
    full = _source(event)
    short = f"{shown.get(event.source.path, event.source.path)}:{event.source.line}"
    return f'<a href="#event-{esc(event.id)}" class="src" title="{esc(full)}">{esc(short)}</a>'


def _spans(numbers: set[int]) -> str:
    """Whole numbers as runs: {0, 1, 2, 3, 5} -> "0–3, 5"."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _who(event: Event) -> str:
    parts = []
    if event.pid is not None:
        parts.append(f"pid {event.pid}")
    name = ".".join(p for p in (event.actor, event.method) if p)
    if name:
        parts.append(name)
    if event.rank is not None:
        parts.append(f"rank {event.rank}")
    if event.gpu is not None:
        parts.append(f"GPU {event.gpu}")
    return " ".join(parts)


def downsample(points: Sequence[T], value: Callable[[T], float], limit: int = MAX_POINTS) -> list[T]:
    """At most `limit` points: the lowest and the highest of each of limit/2 runs of
    consecutive points, in their order. The envelope a person sees, and the peak before an
    OOM, survive; the same input always gives the same points."""
    if len(points) <= limit:
        return list(points)
    buckets = limit // 2
    kept: list[T] = []
    for b in range(buckets):
        chunk = points[b * len(points) // buckets : (b + 1) * len(points) // buckets]
        low = min(range(len(chunk)), key=lambda i: value(chunk[i]))
        high = max(range(len(chunk)), key=lambda i: value(chunk[i]))
        kept.extend(chunk[i] for i in sorted({low, high}))
    return kept


# -- the memory timeline ---------------------------------------------------------------------


@dataclass
class Series:
    """One line of the timeline: a node's, a process's or a device's memory of one metric."""

    name: str
    memory: str  # host | gpu
    node: str | None = None
    group: str = ""  # its name less the process (pid, rank, GPU): series alike share one legend entry
    readings: list[Sample] = field(default_factory=list)


def series_of(readings: list[Sample]) -> list[Series]:
    """Host memory per node and per process, GPU memory per node and process, one series per
    metric; a sample's label (the phase it was logged in) shows on hover.

    A process is one series whichever lines name it: a reading that names only its rank (or
    its GPU) joins the process that rank or GPU belongs to on that node, when another
    reading tells it. (Copies of one line in two files are one reading: timeline.samples.)"""
    pid_of: dict[tuple, int] = {}
    for s in readings:
        if s.pid is not None:
            for name, value in (("rank", s.rank), ("gpu", s.gpu)):
                if value is not None:
                    pid_of.setdefault((s.node, name, value), s.pid)
    found: dict[tuple, Series] = {}
    for s in readings:
        pid = s.pid if s.pid is not None else pid_of.get((s.node, "rank", s.rank)) or pid_of.get((s.node, "gpu", s.gpu))
        if s.memory == "host" and s.label == "node":
            key: tuple = ("host", s.node, "node")
            name = group = f"host used · node {s.node or '?'}"
        elif s.memory == "host":
            key = ("host", s.node, pid, s.metric)
            name = " · ".join(p for p in (f"host {s.metric}", f"pid {pid}" if pid is not None else "", _short(s.process, 40), s.node or "") if p)
            group = " · ".join(p for p in (f"host {s.metric}", _short(s.process, 40), s.node or "") if p)
        else:
            key = ("gpu", s.node, pid, s.metric) if pid is not None else ("gpu", s.node, s.rank, s.gpu, s.metric)
            where = [f"rank {s.rank}" if s.rank is not None else "", f"GPU {s.gpu}" if s.gpu is not None else "", f"pid {pid}" if pid is not None else ""]
            name = " · ".join(p for p in (f"GPU {s.metric}", *where, _short(s.process, 40), s.node or "") if p)
            group = " · ".join(p for p in (f"GPU {s.metric}", _short(s.process, 40), s.node or "") if p)
        found.setdefault(key, Series(name, s.memory, s.node, group)).readings.append(s)
    return list(found.values())


SCALES_APART = 2.0  # nodes whose peaks differ by this factor or more get a panel each


def _panels(series: list[Series]) -> dict[tuple[str, str | None], tuple[str, str | None]]:
    """Which memory panel each (memory, node) is drawn in, host first: one panel per memory
    kind, or one per node where the nodes' peaks lie SCALES_APART or more apart (640 GiB
    beside 235 GiB on one axis flattens the smaller). A panel is (memory, its node or None)."""
    panels: dict[tuple[str, str | None], tuple[str, str | None]] = {}
    for memory in ("host", "gpu"):
        peaks: dict[str | None, int] = {}
        for one in series:
            if one.memory == memory:
                peaks[one.node] = max(peaks.get(one.node, 0), *(s.bytes for s in one.readings))
        named = [p for node, p in peaks.items() if node is not None]
        apart = len(named) > 1 and max(named) >= SCALES_APART * max(min(named), 1)
        for node in sorted(peaks, key=lambda n: (n is None, n or "")):
            panels[(memory, node)] = (memory, node if apart else None)
    return panels


def _legend_names(series: list[Series]) -> dict[int, str]:
    """The series that show in the legend (by id), with the name each shows: one entry for
    series alike but for their process (16 vLLM workers' "GPU used" lines are one entry,
    "GPU used · vLLM ×16"); the others draw and hover as ever, and the entry hides them all."""
    groups: dict[tuple[str, str], list[Series]] = {}
    for one in series:
        groups.setdefault((one.memory, one.group or one.name), []).append(one)
    names = {}
    for (_memory, group), members in groups.items():
        first = members[0]
        if len(members) == 1:
            names[id(first)] = first.name
        else:
            metric, *rest = group.split(" · ")
            names[id(first)] = " · ".join([f"{metric} ×{len(members)}", *rest])
    return names


@dataclass(frozen=True, slots=True)
class Place:
    """Where a reading or failure goes along x, and how sure that is."""

    x: Any
    minus: float = 0.0  # how far before x it may have been (ms on a time axis)
    plus: float = 0.0  # how far after
    inferred: bool = False  # its line printed no time: x is the middle of its interval


class Axis:
    """Where things go along x: their time, whenever anything in the logs has one. A reading
    or failure whose line printed no time lies between the stamps before and after it,
    drawn hollow with that interval as a grey segment; the lines that share one interval
    are spread over it in their order in the log. Only when nothing at all has a time is x
    the place in the event list (log order). Log order, and the training step where veRL
    printed its steps, are other views of the same figure."""

    def __init__(self, diagnosis: Diagnosis) -> None:
        self.events = {e.id: e for e in diagnosis.events}
        self.by_time = any(e.time or e.time_latest for e in diagnosis.events)
        self.order = {e.id: n for n, e in enumerate(diagnosis.events, 1)}
        self.step: dict[str, int] = {}  # event id -> the last training step printed at or before it
        last = None
        for event in diagnosis.events:
            if event.kind in diagnosis.kinds.memory_lines and event.fields.get("step") is not None:
                last = event.fields["step"]
            if last is not None:
                self.step[event.id or ""] = last  # as step_of looks it up
        self.within: dict[str, float] = {}  # event id -> its place in its interval, 0..1, by log order
        sharing: dict[tuple[str, str], list[Event]] = {}
        for event in diagnosis.events:
            if (event.time_inferred or event.time is None) and event.time and event.time_latest:
                sharing.setdefault((event.time, event.time_latest), []).append(event)
        for group in sharing.values():
            group.sort(key=lambda e: (e.source.path, e.source.line))
            for i, event in enumerate(group, 1):
                self.within[event.id or ""] = i / (len(group) + 1)

    @property
    def title(self) -> str:
        return "time" if self.by_time else "event number (log order: no line in these logs prints a time)"

    def of_sample(self, s: Sample) -> Place | None:
        return self.of_event(self.events[s.event]) if s.event in self.events else None

    def of_event(self, e: Event) -> Place | None:
        if not self.by_time:
            return Place(self.order.get(e.id))
        if e.time and not e.time_inferred:
            return Place(_shown(e.time))
        early, late = e.time, e.time_latest
        if early is None or late is None:  # one end only (or none): the point stands there
            end = early or late
            return Place(_shown(end), inferred=True) if end else None
        a, b = datetime.fromisoformat(early), datetime.fromisoformat(late)
        at = a + (b - a) * self.within.get(e.id or "", 0.5)
        return Place(_shown(at.isoformat(timespec="milliseconds")), (at - a).total_seconds() * 1000, (b - at).total_seconds() * 1000, True)

    def step_of(self, event_id: str | None) -> int | None:
        return self.step.get(event_id or "")


def _shown(time: str) -> str:
    return time.replace("T", " ")


def _xs(places: list[Place | None]) -> list[Any]:
    return [p.x if p is not None else None for p in places]


class Grid:
    """A plotly figure as plotly.js reads it (a dict), built without plotly.py's figure
    classes: those validate and copy every property on every assignment, most of a
    report's time. tests/test_report.py validates every fixture's figures with them.
    Rows of one column sharing their x axis, as `make_subplots(rows, cols=1,
    shared_xaxes=True, row_heights=heights, vertical_spacing=spacing)` lays them out."""

    def __init__(self, heights: list[float], spacing: float = 0.05) -> None:
        self.rows = len(heights)
        self.data: list[dict[str, Any]] = []
        self.layout: dict[str, Any] = {}
        up = [(1.0 - spacing * (self.rows - 1)) * (h / float(sum(heights))) for h in reversed(heights)]  # from the bottom
        starts = [sum(up[:k]) + k * spacing for k in range(self.rows)]  # make_subplots' own sums, to its last bit
        domains = [[start, start + height] for start, height in zip(starts, up, strict=True)][::-1]
        for row, domain in enumerate(domains, 1):
            x, y = self.axis("x", row), self.axis("y", row)
            self.layout[x] = {"anchor": self.ref("y", row), "domain": [0.0, 1.0]}
            if row < self.rows:  # the bottom row's axis is the one with labels, the others follow it
                self.layout[x] |= {"matches": self.ref("x", self.rows), "showticklabels": False}
            self.layout[y] = {"anchor": self.ref("x", row), "domain": domain}

    @staticmethod
    def ref(letter: str, row: int) -> str:
        """A trace's name for the axis of its row ("x", "y2")."""
        return letter if row == 1 else f"{letter}{row}"

    @staticmethod
    def axis(letter: str, row: int) -> str:
        """The layout's key of a row's axis ("xaxis", "yaxis2")."""
        return f"{letter}axis" if row == 1 else f"{letter}axis{row}"

    def add(self, trace: dict[str, Any], row: int) -> None:
        self.data.append({"type": "scatter", **trace, "xaxis": self.ref("x", row), "yaxis": self.ref("y", row)})

    def axes(self, letter: str, row: int | None = None, **settings: Any) -> None:  # noqa: ANN401 - plotly.js's axis settings
        """Settings on one row's axis, or on every row's."""
        for n in [row] if row else range(1, self.rows + 1):
            self.layout[self.axis(letter, n)].update(settings)

    def figure(self) -> dict[str, Any]:
        return {"data": self.data, "layout": self.layout}


@functools.cache
def template() -> dict[str, Any]:
    """plotly's "plotly_white" look, as `update_layout(template="plotly_white")` writes it."""
    import plotly.io as pio

    return pio.templates["plotly_white"].to_plotly_json()


def timeline_figure(diagnosis: Diagnosis) -> tuple[dict[str, Any] | None, str]:
    """The plotly figure (as JSON-ready dict) and a sentence about what it leaves out."""
    axis = Axis(diagnosis)
    all_readings = diagnosis.timeline
    readings = [s for s in all_readings if axis.of_sample(s) is not None]
    all_series = series_of(readings)
    by_id = axis.events
    kinds = diagnosis.kinds
    failures = [e for e in diagnosis.events if e.kind not in kinds.memory_lines]
    placed = [e for e in failures if axis.of_event(e) is not None]
    panels = _panels(all_series)
    rows: list[tuple[str, str | None]] = [*dict.fromkeys(panels.values()), *([("events", None)] if placed else [])]
    if not rows:
        return None, ""
    heights = [0.25 + 0.08 * len({e.kind for e in placed}) if memory == "events" else 1.0 for memory, _ in rows]
    fig = Grid(heights)
    for n, (memory, node) in enumerate(rows, 1):  # each panel says what it shows on its own axis: no title for a label to cover
        title = "failures" if memory == "events" else f"{'host' if memory == 'host' else 'GPU'} GiB" + (f" · {node}" if node else "")
        fig.axes("y", n, title={"text": title, "font": {"size": 11}})
        if memory != "events":
            fig.axes("y", n, rangemode="tozero")  # memory from zero: a flat 310 GiB is no sawtooth
    xs = _xs([axis.of_sample(s) for s in readings] + [axis.of_event(e) for e in placed])  # all placed: none is None
    span = _span(xs, axis.by_time)
    steps: list[list[Any]] = []  # each trace's x on the training-step axis, in trace order
    orders: list[list[Any]] = []  # and in log order
    shown_interval = False
    legend = _legend_names(all_series)
    for one in sorted(all_series, key=lambda one: one.memory != "host"):  # host first, as the rows
        row = rows.index(panels[(one.memory, one.node)]) + 1
        points = downsample(one.readings, lambda s: s.bytes)  # in event order: by time, or log order
        places = [axis.of_sample(s) for s in points]
        fig.add(
            {
                "x": _xs(places),
                "y": [round(s.bytes / GIB, 4) for s in points],
                "name": plain(legend.get(id(one), one.name)),
                "showlegend": id(one) in legend,
                "legendgroup": one.memory,
                "mode": "lines+markers" if len(points) <= MARKERS_UP_TO else "lines",
                "marker": _marker(places),
                "hovertext": [_sample_hover(s, by_id.get(s.event), p) for s, p in zip(points, places, strict=True)],
                "hoverinfo": "text",
                "customdata": [s.event for s in points],
            },
            row,
        )
        steps.append([axis.step_of(s.event) for s in points])
        orders.append([axis.order.get(s.event) for s in points])
        spans = _intervals(places, [round(s.bytes / GIB, 4) for s in points])
        if spans:
            fig.add(
                {**spans, "name": "interval of a line without its own time", "legendgroup": "intervals", "showlegend": not shown_interval, "hoverinfo": "skip"},
                row,
            )
            shown_interval = True
            steps.append([None] * len(spans["x"]))
            orders.append([None] * len(spans["x"]))
    step_span = _span([x for xs_ in steps for x in xs_ if x is not None] + [axis.step_of(e.id) for e in placed if axis.step_of(e.id) is not None], False)
    order_span = _span([axis.order[s.event] for s in readings] + [axis.order[e.id] for e in placed], False)
    for name, memory, node, level, dash in _limits(diagnosis, readings):
        panel = panels.get((memory, node), panels.get((memory, None)))
        if panel is None:  # a limit of a memory no reading shows
            continue
        fig.add(
            {
                "x": span,
                "y": [level, level],
                "name": plain(name),
                "legendgroup": "limits",
                "mode": "lines",
                "line": {"dash": dash, "color": "#d62728" if dash == "dash" else "#7f7f7f", "width": 1},
                "hovertext": [plain(f"{name}: {level:.2f} GiB")] * 2,
                "hoverinfo": "text",
            },
            rows.index(panel) + 1,
        )
        steps.append(step_span)
        orders.append(order_span)
    if placed:
        row = rows.index(("events", None)) + 1
        for kind in sorted({e.kind for e in placed}, key=kinds.order):
            of_kind = [e for e in placed if e.kind == kind]
            places = [axis.of_event(e) for e in of_kind]
            symbol, colour = kinds[kind].marker
            fig.add(
                {
                    "x": _xs(places),
                    "y": [kinds.label_across(kind, (e.device for e in of_kind))] * len(of_kind),
                    "name": kinds.label_across(kind, (e.device for e in of_kind)),
                    "legendgroup": "events",
                    "mode": "markers",
                    "marker": {
                        "symbol": symbol,
                        "color": colour,
                        "size": 12,
                        "line": {"width": 1},
                        "opacity": [0.45 if p is not None and p.inferred else 1.0 for p in places],
                    },
                    "hovertext": [_event_hover(e, kinds) for e in of_kind],
                    "hoverinfo": "text",
                    "customdata": [e.id for e in of_kind],
                },
                row,
            )
            steps.append([axis.step_of(e.id) for e in of_kind])
            orders.append([axis.order.get(e.id) for e in of_kind])
        fig.axes("y", row, type="category")
    shapes = []
    lines: list[dict[str, Any]] = []
    labels: list[dict[str, Any]] = []
    for incident in diagnosis.incidents:
        place = axis.of_event(incident.root)
        if place is not None:
            lines.append(
                {
                    "type": "line",
                    "x0": place.x,
                    "x1": place.x,
                    "xref": "x",
                    "y0": 0,
                    "y1": 1,
                    "yref": "paper",
                    "line": {"color": "#d62728", "width": 1, "dash": "dot"},
                }
            )
            labels.append(
                {
                    "x": place.x,
                    "y": 1.0,
                    "yref": "paper",
                    "xref": "x",
                    "text": plain(f"{incident.id}: {kinds.label(incident.root.kind, incident.root.device)}"),
                    "showarrow": False,
                    "yanchor": "bottom",
                    "font": {"color": "#d62728", "size": 11},
                }
            )
            shapes.append((place.x, axis.step_of(incident.root.id), axis.order.get(incident.root.id)))
    if lines:
        fig.layout |= {"shapes": lines, "annotations": labels}
    fig.axes("x", len(rows), title={"text": axis.title})
    height = int(260 * sum(heights) + 160)
    if axis.by_time:
        fig.axes("x", type="date")
    elif span and span[1] - span[0] <= 10:
        fig.axes("x", dtick=1)  # event numbers are whole
    fig.layout |= {
        "height": height,
        "margin": MARGIN if axis.by_time else {**MARGIN, "t": TOP_WITHOUT_BUTTONS},
        "hovermode": "closest",
        "template": template(),
        # under the plot, across its width: beside it, a phone's legend would take the plot's place
        "legend": {"font": {"size": 11}, "orientation": "h", "x": 0, "xanchor": "left", "y": 0, "yref": "container", "yanchor": "bottom"},
        "hoverlabel": {"align": "left", "font": {"family": "monospace", "size": 11}},
    }
    if axis.by_time:
        views = [("log order", orders, "event number (log order)", [order for _, _, order in shapes])]
        if axis.step:
            views.insert(0, ("training step", steps, "training step (the last step:N printed before)", [step for _, step, _ in shapes]))
        _views(fig, views, [time for time, _, _ in shapes], height - MARGIN["t"] - MARGIN["b"])
    notes = []
    if left_out := len(failures) - len(placed):
        notes.append(f"{left_out} failure event(s) have no time and are only in the table below.")
    if unplaced := len(all_readings) - len(readings):
        notes.append(f"{unplaced} memory reading(s) have no time (no stamp before or after them in their file) and are not drawn.")
    if any((p := axis.of_event(e)) is not None and p.inferred for e in [*placed, *(by_id[s.event] for s in readings)]):
        notes.append(
            "Hollow points are on lines that print no time: each lies between the stamps before and after it in its file"
            " (the grey segment), lines that share those stamps spread over it in log order."
        )
    if after_last := sum(1 for s in readings if by_id[s.event].time_latest is None and (by_id[s.event].time_inferred or by_id[s.event].time is None)):
        notes.append(f"{after_last} reading(s) come after the last time their file prints and stand at that time: 'log order' shows them apart.")
    notes += [f"Clock: {note.sentence()}." for note in diagnosis.clocks]
    notes += [note[0].upper() + note[1:] + "." for note in diagnosis.reduction_notes]
    return fig.figure(), " ".join(notes)


def _marker(places: list[Place | None]) -> dict[str, Any]:
    """Filled points where the line printed its time, hollow where it lies in an interval."""
    return {"symbol": ["circle-open" if p is not None and p.inferred else "circle" for p in places]}


def _intervals(places: list[Place | None], ys: list[float]) -> dict[str, Any] | None:
    """The interval of each point whose line printed no time, as thin segments from the
    stamp before it to the stamp after it (one trace: segments apart by gaps)."""
    xs: list[Any] = []
    levels: list[Any] = []
    for place, y in zip(places, ys, strict=True):
        if place is not None and (place.minus or place.plus):
            middle = datetime.fromisoformat(place.x)
            xs += [str(middle - timedelta(milliseconds=place.minus)), str(middle + timedelta(milliseconds=place.plus)), None]
            levels += [y, y, None]
    if not xs:
        return None
    return {"x": xs, "y": levels, "mode": "lines", "line": {"width": 1, "color": "rgba(120,120,120,0.45)"}}


def _views(fig: Grid, views: list[tuple[str, list[list[Any]], str, list[Any]]], roots: list[Any], plot_height: float) -> None:
    """Buttons that put the x axis on time (the figure as drawn) or on another view: (label,
    every trace's x, axis title, each root's x). Lines that print no time keep their order
    in log order, where an interval hides it; the training step is what veRL users count in."""
    axis = fig.axis("x", fig.rows)

    def button(label: str, xs: list[list[Any]], title: str, marks: list[Any], kind: str) -> dict[str, Any]:
        layout: dict[str, Any] = {f"{axis}.title.text": title, "xaxis.type": kind}
        for j, x in enumerate(marks):  # each root's line and label
            layout.update({f"shapes[{j}].x0": x, f"shapes[{j}].x1": x, f"annotations[{j}].x": x})
        return {"label": label, "method": "update", "args": [{"x": xs}, layout]}

    times = [trace["x"] for trace in fig.data]
    buttons = [button("time", times, "time", roots, "date")] + [button(label, xs, title, marks, "linear") for label, xs, title, marks in views]
    # just above the plot whatever its height (y is a share of the plot's height, the
    # buttons stand in the top margin): a fixed share leaves a tall figure a blank band
    menu = {
        "type": "buttons",
        "direction": "right",
        "x": 0,
        "y": 1 + 22 / plot_height,
        "xanchor": "left",
        "yanchor": "bottom",
        "showactive": True,
        "buttons": buttons,
    }
    fig.layout["updatemenus"] = [menu]


def _span(xs: list[Any], by_time: bool) -> list[Any]:
    """Both ends of the x axis, so limits draw as lines even when everything is one instant."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return []
    if by_time:
        low, high = min(xs), max(xs)
        if low == high:
            moment = datetime.fromisoformat(low)  # year 1 or 9999: the calendar's end is the axis's
            before, after = max(moment, datetime.min + timedelta(seconds=30)), min(moment, datetime.max - timedelta(seconds=30))
            return [str(before - timedelta(seconds=30)), str(after + timedelta(seconds=30))]
        return [low, high]
    low, high = min(xs), max(xs)
    return [low - 1, high + 1] if low == high else [low, high]


def _limits(diagnosis: Diagnosis, readings: list[Sample]) -> list[tuple[str, str, str | None, float, str]]:
    """(name, memory, node, GiB, dash) of Ray's kill threshold and each node's and device's total."""
    limits: dict[str, tuple[str, str, str | None, float, str]] = {}
    for event in diagnosis.events:
        f = event.fields
        if f.get("node_total_bytes"):  # a Ray kill report's node
            node = event.node or "?"
            total = f["node_total_bytes"] / GIB
            limits[f"host total · node {node}"] = (f"host total · node {node}", "host", event.node, total, "dot")
            if f.get("threshold") is not None:
                name = f"Ray threshold {f['threshold']} · node {node}"
                limits[name] = (name, "host", event.node, total * float(f["threshold"]), "dash")
    for s in readings:
        if s.memory == "gpu" and s.total_bytes:
            name = f"GPU total {gib(s.total_bytes)}" + (f" · node {s.node}" if s.node else "")
            limits[name] = (name, "gpu", s.node, s.total_bytes / GIB, "dot")
    return list(limits.values())


def _sample_hover(s: Sample, event: Event | None, place: Place | None = None) -> str:
    when = _clock(s.time)
    if event is not None and place is not None and place.inferred:
        when = f"between {_clock(event.time)} and {_clock(event.time_latest)} (its line prints no time)"
    lines = [
        f"{gib(s.bytes)} {s.memory} {s.metric}" + (f" of {gib(s.total_bytes)}" if s.total_bytes else ""),
        s.label or "",
        " ".join(p for p in (f"pid {s.pid}" if s.pid is not None else "", s.process or "", f"node {s.node}" if s.node else "") if p),
        when,
        f"{event.id} · {_source(event)}" if event else "",
    ]
    return "<br>".join(plain(_short(line, HOVER_WIDTH)) for line in lines if line)


def _event_hover(event: Event, kinds: Kinds) -> str:
    head = f"{event.id} {kinds.label(event.kind, event.device)} · {_when(event)} · {_source(event)}"
    return f"<b>{plain(head)}</b><br>{plain(_short(event_summary(event, kinds), HOVER_WIDTH))}<br><br>{_hover_block(event.text)}"


# -- Ray's top memory users at each kill -----------------------------------------------------


def kill_figures(diagnosis: Diagnosis) -> list[tuple[Event, dict[str, Any]]]:
    """A bar chart of the Top-10 table of each Ray OOM kill, the blamed process in red."""
    figures = []
    kills = [e for e in diagnosis.events if e.fields.get("top")]  # kill reports with their Top-10 table
    for event in kills[:MAX_KILL_CHARTS]:
        top = event.fields["top"]
        incident = _incident_of(diagnosis, event)
        culprit = incident.culprit.get("pid") if incident and incident.culprit else None
        killed = {k.get("pid") for k in event.fields.get("killed") or []}
        colours = ["#d62728" if r["pid"] == culprit else "#ff7f0e" if r["pid"] in killed else "#4c78a8" for r in top]
        labels = [plain(f"pid {r['pid']} {_short(r.get('command'), 28)}") for r in top]  # the whole command on hover: a phone has room for the bars too
        hover = [
            plain(f"pid {r['pid']}: {r.get('command') or '?'}")
            + f"<br>{gib(r['bytes'])}"
            + ("<br><b>blamed: the top memory user</b>" if r["pid"] == culprit else "")
            + ("<br>killed by Ray" if r["pid"] in killed else "")
            for r in top
        ]
        bars = {
            "type": "bar",
            "x": [None if r["bytes"] is None else round(r["bytes"] / GIB, 4) for r in top],  # a size not known: no bar
            "y": labels,
            "orientation": "h",
            "name": plain(f"top memory users · {event.id}"),
            "marker": {"color": colours},
            "hovertext": hover,
            "hoverinfo": "text",
            "customdata": [r["pid"] for r in top],
        }
        layout = {
            "title": {"text": plain(f"{event.id} · {_clock(event.time)} · node {event.node or '?'}"), "font": {"size": 13}},
            "xaxis": {"title": {"text": "GiB"}},
            "yaxis": {"autorange": "reversed", "automargin": True},
            "height": 70 + 26 * len(top),
            "margin": {"l": 10, "r": 20, "t": 40, "b": 40},
            "template": template(),
            "showlegend": False,
        }
        figures.append((event, {"data": [bars], "layout": layout}))
    return figures


def _incident_of(diagnosis: Diagnosis, event: Event) -> Incident | None:
    return next((i for i in diagnosis.incidents if i.root is event or event in i.cascade), None)


# -- the page --------------------------------------------------------------------------------


def _problems_html(diagnosis: Diagnosis) -> str:
    return '<ul class="problems">' + "".join(f"<li>{esc(p)}</li>" for p in diagnosis.problems) + "</ul>"


def _unread_html(diagnosis: Diagnosis) -> str:
    """The header of a page whose inputs could not be read: nothing read is no all-clear."""
    told = "<p>No log text could be read, so oomlens cannot tell whether anything ran out of memory or crashed.</p>"
    if not diagnosis.problems:
        return f'<section id="verdict" class="verdict unread"><h2>Nothing could be read</h2>{told}<p>No input was found.</p></section>'
    return f'<section id="verdict" class="verdict unread"><h2>Nothing could be read</h2>{told}{_problems_html(diagnosis)}</section>'


def _all_clear_html(diagnosis: Diagnosis) -> str:
    """No incident: said of what was read, and of no more when some input was not read fully;
    how the run ended when it ended on purpose (all_clear)."""
    found = "<p>oomlens found no out-of-memory kill, CUDA OOM, worker death or watchdog timeout. The memory timeline below shows what the run logged.</p>"
    ended = ends(diagnosis)
    told = listed_ends(ended)
    died = f"<p>{esc(told[:1].upper() + told[1:])}.</p>" if ended else ""
    heading = "No OOM or crash found {}"
    if not diagnosis.problems:
        return f'<section id="verdict" class="verdict ok"><h2>{heading.format("in these logs")}</h2>{died}{found}</section>'
    read = [i for i in diagnosis.inputs if i.bytes or (i.opener is not None and not i.problems)]
    whole = sum(1 for i in read if not i.problems)
    amount = (
        f"<p>Read: {len(read)} of {len(diagnosis.inputs)} input(s), {sum(i.bytes for i in diagnosis.inputs):,} bytes in "
        f"{sum(i.lines for i in diagnosis.inputs):,} lines ({whole} read whole). What is missing may hold the failure:</p>"
    )
    return (
        f'<section id="verdict" class="verdict partial"><h2>{heading.format("in what could be read")}</h2>'
        f"{died}{amount}{_problems_html(diagnosis)}{found}</section>"
    )


def _verdict_html(diagnosis: Diagnosis) -> str:
    v = diagnosis.verdict
    if v is None:
        return _all_clear_html(diagnosis)
    incident = next((i for i in diagnosis.incidents if i.id == v.get("incident")), None)
    shown = short_paths([s.path for e in diagnosis.events for s in e.sources])
    memory = f"{v['memory']} memory" if v["memory"] else "host or GPU: not shown in the logs"
    rows = [
        ("Root cause", esc(v["summary"])),
        ("Component", f"<b>{esc(v['component'] or 'unknown')}</b> ({esc(memory)}), confidence {v['confidence']:.2f}"),
    ]
    if v.get("session"):
        sessions = {i.session for i in diagnosis.inputs if i.session}
        more = f" (the newest of {len(sessions)} sessions read with an incident)" if len(sessions) > 1 else ""
        rows.append(("Session", esc(v["session"] + more)))
    if incident is not None:
        rows += _incident_rows(incident, shown)
    software = [f"{name} {version}" for name, version in diagnosis.versions.items()]
    if diagnosis.frameworks or software:
        rows.append(("Seen", esc(", ".join(([f"framework {framework_words(diagnosis)}"] if diagnosis.frameworks else []) + software))))
    body = "".join(f"<tr><th>{label}</th><td>{value}</td></tr>" for label, value in rows)
    parts = [f'<section id="verdict" class="verdict"><h2>{esc(_headline(v))}</h2><table class="facts">{body}</table>']
    if incident is not None:
        parts.append(_remedies_html(diagnosis.remedies.get(incident.id or "", [])))
    parts.append("</section>")
    return "".join(parts)


def _story_html(diagnosis: Diagnosis) -> str:
    """What followed the verdict's incident (its cascade, grouped), and the other incidents:
    below the memory timeline, which the first screen shows under the verdict."""
    v = diagnosis.verdict
    if v is None:
        return ""
    incident = next((i for i in diagnosis.incidents if i.id == v.get("incident")), None)
    shown = short_paths([s.path for e in diagnosis.events for s in e.sources])
    parts = [] if incident is None else [f'<section id="cascade">{_cascade_html(incident, diagnosis.kinds, shown)}</section>']
    others = [i for i in diagnosis.incidents if i is not incident]
    if others:
        parts.append(f'<section id="incidents"><h2>{len(others)} more incident(s)</h2>')
        for other in others:
            title = f"{other.id}: {diagnosis.kinds.label(other.root.kind, other.root.device)} at {_clock(other.root.time)} — {other.component or 'unknown'} ({other.memory or 'memory not shown'}), confidence {other.confidence:.2f}"
            parts.append(
                f"<details><summary>{esc(title)}</summary><ul>{''.join(f'<li>{esc(line)}</li>' for line in other.evidence)}</ul>"
                + _remedies_html(diagnosis.remedies.get(other.id or "", []))
                + "</details>"
            )
        parts.append("</section>")
    return "".join(parts)


def _headline(v: dict[str, Any]) -> str:
    memory = {"host": "Host memory ran out", "gpu": "GPU memory ran out"}.get(v.get("memory") or "", "The run failed")
    return f"{memory}: {v['component'] or 'unknown component'}"


def _incident_rows(incident: Incident, shown: dict[str, str]) -> list[tuple[str, str]]:
    root = incident.root
    where = [
        f"node {root.node}" if root.node else "",
        f"GPU {root.fields.get('gpu', root.gpu)}" if root.fields.get("gpu", root.gpu) is not None else "",
        _who(root),
    ]
    rows = [("Where", esc(", ".join(p for p in where if p) or "not shown") + " — " + _link(root, shown))]
    if incident.culprit:
        c = incident.culprit
        rows.append(("Top memory user", esc(f"pid {c['pid']} {c['command']} {gib(c['bytes'])}")))
    killed = root.fields.get("killed")
    if isinstance(killed, list) and killed:  # a kill report's victims (a raylet summary's is a count)
        k = killed[0]
        rows.append(("Killed", esc(f"pid {k.get('pid')} {k.get('name') or ''}" + (f" ({gib(k['bytes'])})" if k.get("bytes") else ""))))
    if incident.phase:
        rows.append(("Surfaced during", esc(incident.phase)))
    if incident.trend:
        rows.append(("Trend", esc(next((e for e in incident.evidence if e.startswith("memory trend")), incident.trend))))
    return rows


def _cascade_html(incident: Incident, kinds: Kinds, shown: dict[str, str]) -> str:
    """The failures that followed the root, grouped by kind and node: "8 watchdog timeouts,
    ranks 0–7, on node 10.0.0.3, 09:12:58 – 09:13:01", each group opening onto its members
    (every one, linked to its row)."""
    if not incident.cascade:
        return "<h3>The cascade</h3><p>No other failure followed it in these logs.</p>"
    groups: dict[tuple[str, str | None], list[Event]] = {}
    for event in incident.cascade:
        groups.setdefault((event.kind, event.node), []).append(event)
    items = []
    for (kind, node), members in groups.items():
        ranks = {e.rank for e in members if e.rank is not None}
        pids = {e.pid for e in members if e.pid is not None}
        who = f"rank{'s' if len(ranks) > 1 else ''} {_spans(ranks)}" if ranks else f"pid{'s' if len(pids) > 1 else ''} {_spans(pids)}" if pids else ""
        times = sorted(_clock(e.time) for e in members if e.time)
        when = "" if not times else times[0] if times[0] == times[-1] else f"{times[0]} – {times[-1][11:] if times[0][:10] == times[-1][:10] else times[-1]}"
        head = (
            f"{len(members)} × {kinds.label(kind, members[0].device)}"
            + (f", {who}" if who else "")
            + (f" on node {node}" if node else "")
            + (f", {when}" if when else "")
        )
        if len(members) == 1:
            items.append(f"<li>{esc(head)} {_link(members[0], shown)}</li>")
            continue
        lines = []
        for event in members:
            text = f"{_when(event)} — {_who(event) or kinds.label(event.kind, event.device)}"
            lines.append(f"<li>{esc(text)} {_link(event, shown)}</li>")
        items.append(f'<li><details><summary>{esc(head)}</summary><ul class="members">{"".join(lines)}</ul></details></li>')
    return f'<h3>The cascade: {len(incident.cascade)} failure(s) this root caused</h3><ul class="cascade">{"".join(items)}</ul>'


FIXES_SHOWN = 5  # the verdict's fixes on the first screen, above the memory timeline: the rest one click away, counted


def _remedies_html(remedies: list[dict[str, Any]]) -> str:
    """The fixes in the order they are given; past the first FIXES_SHOWN, a button that says
    how many more there are and shows them: a verdict as tall as its fixes would push the
    memory leading to the failure below the first screen."""
    if not remedies:
        return ""
    rows = [
        f'<tr><td data-label="setting"><code>{esc(r["setting"])}</code></td><td data-label="value">{esc(r["value"])}</td>'
        f'<td data-label="now">{esc(r.get("current", ""))}</td><td data-label="framework">{esc(r["framework"])}</td><td data-label="why">{esc(r["why"])}</td></tr>'
        for r in remedies
    ]
    shown, more = rows[:FIXES_SHOWN], rows[FIXES_SHOWN:]
    hidden = (
        f'<tbody class="more-fixes" hidden>{"".join(more)}</tbody>'
        f'<tbody><tr><td colspan="5"><button type="button" class="more-fixes">{len(more)} more fix{"es" if len(more) > 1 else ""}</button></td></tr></tbody>'
        if more
        else ""
    )
    return (
        '<h3>What to change</h3><table class="remedies"><thead><tr><th>setting</th><th>value</th><th>now</th><th>framework</th><th>why</th></tr></thead>'
        f"<tbody>{''.join(shown)}</tbody>{hidden}</table>"
    )


def _events_html(diagnosis: Diagnosis) -> str:
    failures = [e for e in diagnosis.events if e.kind not in diagnosis.kinds.memory_lines]
    lines = len(diagnosis.events) - len(failures)
    note = (
        f'<p class="note">{lines} memory sample line(s) are not listed here: the timeline draws their readings (hover a point for its file:line).</p>'
        if lines
        else ""
    )
    if not failures:
        return f'<section id="events"><h2>Events</h2><p>No failure events.</p>{note}</section>'
    kinds = sorted({e.kind for e in failures}, key=diagnosis.kinds.order)
    options = "".join(f'<option value="{k}">{esc(diagnosis.kinds.label_across(k, (e.device for e in failures if e.kind == k)))}</option>' for k in kinds)
    shown = short_paths([s.path for e in diagnosis.events for s in e.sources])
    bodies = []
    for n, e in enumerate(failures):
        sources = "".join(f"<li><code>{esc(s.path)}:{s.line}</code>" + (f"–{s.end_line}" if s.end_line != s.line else "") + "</li>" for s in e.sources)
        more = f" (+{len(e.sources) - 1})" if len(e.sources) > 1 else ""
        bodies.append(
            f'<tbody id="event-{esc(e.id)}" data-order="{n}" data-time="{esc(e.time or "")}" data-kind="{e.kind}" data-node="{esc(e.node or "")}">'
            f'<tr class="row" tabindex="0" aria-expanded="false"><td>{esc(e.id)}</td><td>{esc(_when(e))}</td>'
            f"<td>{esc(diagnosis.kinds.label(e.kind, e.device))}</td><td>{esc(e.node or '')}</td><td>{esc(_who(e))}</td><td>{esc(event_summary(e, diagnosis.kinds))}</td>"
            f'<td><code class="src" title="{esc(_source(e))}">{esc(shown.get(e.source.path, e.source.path))}:{e.source.line}</code>{more}</td></tr>'
            f'<tr class="raw" hidden><td colspan="7"><div>Read from:</div><ul class="sources">{sources}</ul><pre>{esc(clean(e.text))}</pre></td></tr></tbody>'
        )
    return (
        f'<section id="events"><h2>Events</h2>{note}<div class="controls"><input id="filter" type="search" placeholder="filter: any text, e.g. a pid, node or file">'
        f'<select id="kind"><option value="">every kind</option>{options}</select> <span id="count"></span></div>'
        '<div class="wide"><table id="event-table"><thead><tr><th data-sort="order">#</th><th data-sort="time">time</th><th data-sort="kind">kind</th>'
        '<th data-sort="node">node</th><th>process</th><th>what</th><th>source (file:line)</th></tr></thead>'
        f'{"".join(bodies)}</table></div><p class="note">Click a row for its raw log block. A line that printed no time is placed between the times of the lines around it.</p></section>'
    )


def _inputs_html(diagnosis: Diagnosis) -> str:
    read = [i for i in diagnosis.inputs if i.opener is not None]
    problems = "".join(f"<li>{esc(p)}</li>" for p in diagnosis.problems)
    return (
        f'<section id="inputs"><h2>Inputs</h2><p>{len(read)} input(s), {sum(i.bytes for i in diagnosis.inputs)} bytes, '
        f"{len(diagnosis.events)} event(s).</p>" + (f"<p>Could not be read fully:</p><ul>{problems}</ul>" if problems else "") + "</section>"
    )


PLOTLY = ("inline", "cdn")  # where the page gets plotly.js: inside it (offline), or from plotly's CDN


def render(diagnosis: Diagnosis, plotly: str = "inline") -> str:
    """The whole page as one string: markup, plotly.js (inlined, or from its CDN when
    `plotly` is "cdn"), figures as escaped JSON. A page of inputs none of which could be
    read holds the problems and nothing that could pass for an all-clear."""
    if plotly not in PLOTLY:
        raise ValueError(f"plotly must be one of {', '.join(PLOTLY)}, not {plotly!r}")
    from plotly.offline import get_plotlyjs_version

    figures: dict[str, Any] = {}
    if diagnosis.readable:
        title = diagnosis.verdict["summary"] if diagnosis.verdict else "no OOM or crash found"
        memory, kills = _figures_html(diagnosis, figures)
        body = [_verdict_html(diagnosis), memory, _story_html(diagnosis), kills, _events_html(diagnosis), _inputs_html(diagnosis)]
    else:
        title, body = "nothing could be read", [_unread_html(diagnosis)]
    if not figures:  # nothing to draw: no plotly.js
        plotly_tag, policy = "", csp(PAGE_JS)
    elif plotly == "cdn":
        url = PLOTLY_CDN.format(version=get_plotlyjs_version())
        plotly_tag, policy = f'<script src="{esc(url)}"></script>', csp(PAGE_JS, urls=(url,))
    else:
        plotly_tag, policy = f"<script>{plotly_js()}</script>", csp(plotly_js(), PAGE_JS)
    return "".join(
        [
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{policy}">',
            f"<title>oomlens: {esc(title)}</title><style>{CSS}</style></head><body>",
            "<header><h1>oomlens report</h1></header><main>",
            *body,
            "</main>",
            f'<script type="application/json" id="oomlens-figures">{script_json(figures)}</script>',
            plotly_tag,
            f"<script>{PAGE_JS}</script>",
            "</body></html>",
        ]
    )


def _figures_html(diagnosis: Diagnosis, figures: dict[str, Any]) -> list[str]:
    """The memory timeline and the kills' bars, their figures put in `figures` by id."""
    timeline, timeline_note = timeline_figure(diagnosis)
    kills = kill_figures(diagnosis)
    if timeline is not None:
        figures["timeline"] = timeline
    timeline_html = (
        '<div id="timeline" class="plot" data-figure="timeline"></div>'
        if timeline
        else "<p>No memory reading or failure with a place on the timeline in these logs.</p>"
    )
    kill_html = []
    for event, figure in kills:
        figures[f"kill-{event.id}"] = figure
        kill_html.append(f'<div id="kill-{esc(event.id)}" class="plot bar" data-figure="kill-{esc(event.id)}"></div>')
    total_kills = sum(1 for e in diagnosis.events if e.fields.get("top"))
    kills_section = ""
    if kill_html:
        more = f'<p class="note">{total_kills - len(kills)} more kill(s) in the event table.</p>' if total_kills > len(kills) else ""
        kills_section = (
            '<section id="kills"><h2>Top memory users at each Ray OOM kill</h2><p class="note"><span class="swatch red"></span> blamed (the biggest Ray worker)'
            ' <span class="swatch orange"></span> killed by Ray <span class="swatch blue"></span> other</p>'
            f'<div class="bars">{"".join(kill_html)}</div>{more}</section>'
        )
    note = f'<p class="note">{esc(timeline_note)}</p>' if timeline_note else ""
    return [f'<section id="memory"><h2>Memory timeline</h2>{timeline_html}{note}</section>', kills_section]


def csp(*scripts: str, urls: tuple[str, ...] = ()) -> str:
    """A second wall behind the escaping: only these exact scripts run (by their hash) and
    the scripts at exactly these URLs, and the page may load nothing else from anywhere."""
    hashes = " ".join(f"'sha256-{script_hash(s)}'" for s in scripts)
    sources = " ".join([hashes, *urls])
    return f"default-src 'none'; script-src {sources}; style-src 'unsafe-inline'; img-src data:; font-src data:"


@functools.lru_cache(maxsize=4)  # the page's own script and plotly.js: the same few every report
def script_hash(script: str) -> str:
    """A script's SHA-256 as a Content-Security-Policy names it."""
    return base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()


@functools.cache
def plotly_js() -> str:
    """plotly.js as plotly.py ships it (4.8 MB): read once a process."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def write(diagnosis: Diagnosis, path: str | os.PathLike[str], plotly: str = "inline") -> Path:
    """Write the report where `path` leads (see `put`)."""
    return put(render(diagnosis, plotly).encode("utf-8"), path)


def put(data: bytes, path: str | os.PathLike[str]) -> Path:
    """Write `data` to what `path` names without replacing what is there: a device or a FIFO
    (`-o /dev/null`, `-o /dev/stdout`) is written into, never turned into a file (as root
    that breaks the machine); a symlink stays, the file it points at gets the data. Onto a
    regular file (or none) through a temporary file renamed over it: a half-written report
    never replaces a good one (a CI artifact)."""
    target = Path(path)
    try:
        mode: int | None = os.stat(target).st_mode  # through symlinks, /dev/stdout's too
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        fd = os.open(target, os.O_WRONLY)
        with open(fd, "wb") as out:
            out.write(data)
        return target
    real = Path(os.path.realpath(target))  # a symlink's file (a dangling one's, to be made)
    tmp = real.with_name(f"{real.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # a new file, never one planted there
    try:
        with open(fd, "wb") as out:
            out.write(data)
            if mode is not None:  # the mode of the file it replaces; a new one's, the umask's
                os.fchmod(out.fileno(), stat.S_IMODE(mode))
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#222;color:#fff;padding:8px 24px}header h1{font-size:18px;margin:0}
main{padding:8px 24px;max-width:1400px}
td,th,li,p,summary,h2,h3,code,a{overflow-wrap:break-word}
.wide{overflow-x:auto;max-width:100%}
section{background:#fff;border:1px solid #ddd;border-radius:6px;padding:12px 16px;margin:12px 0}
.verdict{border-left:6px solid #d62728}.verdict.ok{border-left-color:#2ca02c}.verdict.partial{border-left-color:#ff7f0e}
.verdict.unread{border-left-color:#7f7f7f}
h2{font-size:17px;margin:4px 0 10px}h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse}td,th{padding:3px 8px;text-align:left;vertical-align:top}
.facts th{color:#555;font-weight:600;white-space:nowrap}
.remedies td,.remedies th,#event-table td,#event-table th{border-bottom:1px solid #eee}
.facts td,.facts th,.remedies td,.remedies th{padding:2px 8px}.remedies{font-size:13px}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
.note{color:#666;font-size:12.5px}
.bars{display:flex;flex-wrap:wrap;gap:8px}.bar{flex:1 1 560px;min-width:min(420px,100%)}
.swatch{display:inline-block;width:10px;height:10px;margin:0 2px 0 8px}
.red{background:#d62728}.orange{background:#ff7f0e}.blue{background:#4c78a8}
#event-table{width:100%;font-size:13px}#event-table thead th{background:#f0f0f0;position:sticky;top:0}
#event-table th[data-sort]{cursor:pointer;text-decoration:underline dotted}
#event-table tr.row{cursor:pointer}#event-table tr.row:hover{background:#f5f8ff}
#event-table tbody.open tr.row{background:#eef3ff}
pre{white-space:pre-wrap;word-break:break-all;background:#f6f6f6;padding:8px;margin:4px 0;max-height:480px;overflow:auto;font-size:12px}
.controls{margin:6px 0}.controls input{width:360px;max-width:100%;box-sizing:border-box;padding:3px}
.src{color:#444}ul.sources{margin:2px 0 4px;padding-left:20px}
[hidden]{display:none!important}
button.more-fixes{font:inherit;background:none;border:0;padding:2px 0;color:#1a5fb4;cursor:pointer;text-decoration:underline}
ul.cascade{padding-left:20px;margin:4px 0}ul.members{padding-left:18px;margin:2px 0 6px}summary{cursor:pointer}
@media (max-width:700px){
li,p,summary,h2,h3,a,.facts td,.remedies td,.remedies code{overflow-wrap:anywhere}
header{padding:8px 10px}main{padding:4px 6px}section{padding:8px 10px;margin:8px 0}
.facts,.facts tbody,.facts tr,.facts th,.facts td{display:block}.facts th{padding:6px 0 0}.facts td{padding:0 0 2px}
.remedies,.remedies tbody,.remedies tr,.remedies td{display:block}.remedies thead{display:none}
.remedies tr{border-top:1px solid #ddd;padding:4px 0}.remedies td{border:0;padding:1px 0}
.remedies td::before{content:attr(data-label) ": ";color:#666}
}
"""

# The page's only script besides plotly.js: draw the figures, sort/filter the event table,
# open a row's raw block. No network, no innerHTML with data.
PAGE_JS = """
(function () {
  "use strict";
  var figures = JSON.parse(document.getElementById("oomlens-figures").textContent), drawn = [];
  document.querySelectorAll("[data-figure]").forEach(function (div) {
    var fig = figures[div.getAttribute("data-figure")], height = fig.layout.height;  // plotly keeps the layout given as its own
    drawn.push(Plotly.newPlot(div, fig.data, fig.layout, {displaylogo: false, responsive: true}).then(function (gd) {
      // a window narrowed or a phone turned: plotly redraws at the new width (responsive), and
      // the legend wraps otherwise
      gd.on("plotly_relayout", function (change) { if (change.autosize) { fit(gd, height); } });
      return fit(gd, height);
    }));
    div.on("plotly_click", function (ev) {
      var id = ev.points && ev.points[0] && ev.points[0].customdata;
      if (typeof id === "string") { openEvent(id, true); }
    });
  });
  Promise.all(drawn).then(function () { document.body.setAttribute("data-plotted", String(drawn.length)); });
  // The legend lies under the plot: the page grows by its height, so the plot keeps its own (on
  // a phone the legend wraps to many lines). A height set alone would fix the width too (plotly
  // turns autosize off): the width stays the window's. data-fitting stands while it is redone.
  function fit(gd, height) {
    var legend = gd.querySelector(".legend"), extra = legend ? Math.ceil(legend.getBBox().height) : 0;
    if (!height || gd.layout.height === height + extra) { return Promise.resolve(gd); }
    gd.setAttribute("data-fitting", "");
    function done() { gd.removeAttribute("data-fitting"); return gd; }
    return Plotly.relayout(gd, {height: height + extra, width: null, autosize: true}).then(done, done);
  }
  var table = document.getElementById("event-table");
  function toggle(body, open) {
    var raw = body.querySelector("tr.raw");
    open = open === undefined ? raw.hidden : open;
    raw.hidden = !open;
    body.classList.toggle("open", open);
    body.querySelector("tr.row").setAttribute("aria-expanded", String(open));
  }
  function openEvent(id, scroll) {
    var body = document.getElementById("event-" + id);
    if (!body || !table || !table.contains(body)) { return; }
    body.hidden = false;
    toggle(body, true);
    if (scroll) { body.scrollIntoView({block: "center"}); }
  }
  if (!table) { return; }
  table.querySelectorAll("tr.row").forEach(function (row) {
    row.addEventListener("click", function () { toggle(row.parentNode); });
    row.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); toggle(row.parentNode); }
    });
  });
  var bodies = Array.prototype.slice.call(table.tBodies);
  var filter = document.getElementById("filter"), kind = document.getElementById("kind"), count = document.getElementById("count");
  function applyFilter() {
    var words = filter.value.toLowerCase(), shown = 0;
    bodies.forEach(function (body) {
      var ok = (!kind.value || body.dataset.kind === kind.value) && (!words || body.textContent.toLowerCase().indexOf(words) >= 0);
      body.hidden = !ok;
      if (ok) { shown += 1; }
    });
    count.textContent = shown + " of " + bodies.length + " events";
  }
  filter.addEventListener("input", applyFilter);
  kind.addEventListener("change", applyFilter);
  var direction = {};
  table.querySelectorAll("th[data-sort]").forEach(function (th) {
    th.addEventListener("click", function () {
      var key = th.getAttribute("data-sort"), sign = direction[key] = -(direction[key] || -1);
      bodies.sort(function (a, b) {
        var x = a.dataset[key], y = b.dataset[key];
        if (key === "order") { return sign * (Number(x) - Number(y)); }
        if (x === y) { return Number(a.dataset.order) - Number(b.dataset.order); }
        if (!x) { return 1; }
        if (!y) { return -1; }
        return sign * (x < y ? -1 : 1);
      });
      bodies.forEach(function (body) { table.appendChild(body); });
    });
  });
  applyFilter();
  if (location.hash.indexOf("#event-") === 0) { openEvent(location.hash.slice(7), true); }
  document.querySelectorAll("a[href^='#event-']").forEach(function (a) {
    a.addEventListener("click", function () { openEvent(a.getAttribute("href").slice(7), false); });
  });
  document.querySelectorAll("button.more-fixes").forEach(function (button) {
    button.addEventListener("click", function () {
      button.closest("table").querySelector("tbody.more-fixes").hidden = false;
      button.closest("tbody").hidden = true;
    });
  });
}());
"""
