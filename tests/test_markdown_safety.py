"""The markdown summary carries no attack (issue 32, item 11): whatever a log holds (backticks,
HTML, links, @mentions, line ends, `|`, control characters), rendered by a real CommonMark/GFM
renderer (markdown-it-py, with tables and link detection) it is text, every table stays one
table, and the page has the blocks oomlens wrote, no more."""

from __future__ import annotations

import copy
import dataclasses
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from markdown_it import MarkdownIt

import oomlens
from conftest import SESSIONS
from oomlens.outputs import markdown

RENDERER = MarkdownIt("gfm-like")  # CommonMark, GFM tables and strike-through, raw HTML, links found in text
BLOCKS = {"h2", "h3", "p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "hr"}
INLINE = {"code", "strong", "sub"}  # what oomlens itself writes inside a block
HOSTILE = [
    "`",
    "``",
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "[click](https://evil.example/x)",
    "![i](https://evil.example/i.png)",
    "https://evil.example/a",
    "www.evil.example",
    "evil.co/x",
    "logits.to(torch.float32)",
    "@octocat",
    "dev@evil.example",
    "\r",
    "\r## forged heading",
    "\n# forged",
    "\r\n| forged | row |",
    "|",
    "\\|",
    "*em*",
    "__strong__",
    "~~gone~~",
    "&lt;b&gt;",
    "&#60;b&#62;",
    "\x1b]52;c;aGVsbG8=\x07",
    "\x1b[2J",
    "\x9b31m",
    "\u202e",
    "\x00",
    "\x08",
    "1. ",
    "- ",
    "> ",
    "<!--",
    "<https://evil.example>",
]
HOSTILE_TEXT = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=4)), min_size=1, max_size=5).map("".join)
KEEP = {"kind", "id", "event", "memory", "metric", "role", "component"}  # what the renderer looks up, not only shows


class Tags(HTMLParser):
    """The tags of a rendered page, and its text outside code."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []
        self._code = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.tags.append(tag)
        self._code += tag == "code"

    def handle_endtag(self, tag: str) -> None:
        self._code -= tag == "code"

    def handle_data(self, data: str) -> None:
        if not self._code:
            self.text.append(data)

    def handle_comment(self, data: str) -> None:
        self.tags.append("!--")


def rendered(md: str) -> Tags:
    tags = Tags()
    tags.feed(RENDERER.render(md))
    return tags


def blocks(tags: Tags) -> list[str]:
    return [t for t in tags.tags if t in BLOCKS]


def poisoned(value: Any, text: str, seen: set[int]) -> Any:
    """`value` with `text` put into every string it holds (dataclass attributes, tables,
    lists), but the names the renderer looks things up by."""
    if isinstance(value, str):
        return value + text
    if id(value) in seen:
        return value
    seen.add(id(value))
    if isinstance(value, dict):
        return {k: (v if k in KEEP else poisoned(v, text, seen)) for k, v in value.items()}
    if isinstance(value, list):
        return [poisoned(v, text, seen) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if f.name not in KEEP and f.name not in ("kinds", "inputs", "clues"):
                setattr(value, f.name, poisoned(getattr(value, f.name), text, seen))
    return value


@pytest.fixture(scope="module")
def diagnoses() -> list[oomlens.Diagnosis]:
    return [oomlens.analyze(str(SESSIONS / name), jobs=1) for name in ("ray2.60-b-rl-actor-oom", "ray2.58-m-two-node-oom")]


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_hostile_text_in_every_field_stays_text(diagnoses, data):
    clean = data.draw(st.sampled_from(diagnoses))
    text = data.draw(HOSTILE_TEXT)
    hostile = poisoned(copy.deepcopy(clean), text, set())
    md = markdown.render(hostile)
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", md), "a control character from the log"
    page = rendered(md)
    assert set(page.tags) <= BLOCKS | INLINE, f"live tags {set(page.tags) - BLOCKS - INLINE} from {text!r}"
    assert blocks(page) == blocks(rendered(markdown.render(clean))), f"the page's blocks changed with {text!r}"
    assert not re.search(r"@\w", "".join(page.text)), f"a live mention from {text!r}"


def test_a_log_with_hostile_names_renders_as_written(tmp_path: Path):
    """The whole path from a log: a kill report whose task name and Top-10 command carry
    backticks, HTML and a mention; the names show as code, whole."""
    name = "evil``<img src=x onerror=alert(1)>@octocat|`"
    log = tmp_path / "driver.log"
    log.write_text(
        "(raylet) Task t failed due to oom. There are 0 oom retries remaining, so the task will be retried. Error: 1 worker(s) "
        "were killed due to the node running low on memory. Memory on the node (IP: 10.0.0.1, ID: 4cb25bc0) was 28.62GB / 30.00GB "
        "(0.954017), which exceeds the memory usage threshold of 0.950000; Ray killed 1 worker(s) based on the killing policy: "
        f"[(Task: job ID=05000000, lease ID=2f00ffff, task name={name}, required resources={{CPU: 1}}, pid=3471, actual memory "
        f"used=2.85GB, worker ID=8150a4b5)]; Top 10 memory users: PID MEM(GB) COMMAND, 3471 2.85 ray::{name}\n"
    )
    md = oomlens.analyze(str(log), jobs=1).to_markdown()
    html = RENDERER.render(md)
    page = rendered(md)
    assert set(page.tags) <= BLOCKS | INLINE
    assert "<img" not in html and "<a " not in html
    assert "<code>evil``&lt;img src=x onerror=alert(1)&gt;@octocat|`</code>" in html  # the killed worker's name, whole
    assert "<code>ray::evil``&lt;img src=x onerror=alert(1)&gt;@octocat|`</code>" in html  # the Top-10 command


@pytest.mark.parametrize("text", ["a`b", "``x``", "`", " lead", "tail ", " both ", "plain"])
def test_a_code_span_shows_its_text_exactly(text):
    html = RENDERER.render(markdown._code(text))
    assert html == f"<p><code>{text.replace('&', '&amp;')}</code></p>\n"
