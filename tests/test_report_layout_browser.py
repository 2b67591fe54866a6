"""The report as a person sees it (issue 31, items 14-16), in Debian's Chromium at a phone's
width (390 px) and a desktop's (1400×1000): the page never scrolls sideways and the verdict and
its fixes lie within the screen; at the desktop's size the first screen holds the verdict and
the memory leading to the failure; the cascade is grouped, its paths short with the whole path
on hover; the timeline's axes start at zero, each group of series alike has one legend entry,
the legend covers no plot and no label covers another, and nodes far apart in memory get a
panel each. Screenshots land in test-output/ for a person to look at."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomlens import analyze
from oomlens.outputs import html as report
from test_report import FIXTURE_INPUTS
from test_report_browser import OUTPUT, SEEDS, browser  # noqa: F401 - the browser fixture

pytestmark = pytest.mark.slow  # a browser starts

SIZES = {"phone": (390, 844), "desktop": (1400, 1000)}
NODES = {"10.0.0.1": 560, "10.0.0.2": 180}  # host GiB at the start: three times apart
WORKERS = 16
RANKS = 8
# the real excerpts whose verdicts carry the most fixes (eight each: veRL's and EasyR1's, and
# Ray's threshold), beside facts of a Ray kill's Top-10: the tallest verdicts of the corpus
TALL = ("201_verl_2950.log", "005_verl_224.log")


def fleet_log(path: Path) -> Path:
    """Two nodes whose host memory lies three times apart, sixteen vLLM workers alike on one,
    then NCCL watchdog timeouts of ranks 0-7 (veRL's and DeepSpeed's lines, as Ray's driver
    console carries them)."""
    lines = []
    for minute in range(6):
        t = f"2025-06-28 18:{10 + minute:02d}:00"
        for n, (node, used) in enumerate(NODES.items()):
            lines.append(
                f"(TaskRunner pid={900 + n}, ip={node}) [{t},100] [INFO] [utils.py:840:see_memory_usage] CPU Virtual Memory:  "
                f"used = {used + 8 * minute}.0 GB, percent = 80.0%"
            )
        for worker in range(WORKERS):
            lines.append(
                f"(WorkerDict pid={5000 + worker}, ip=10.0.0.1) DEBUG:{t},{200 + worker}:Before building vllm rollout, memory allocated (GB): "
                f"{10 + minute}.5, memory reserved (GB): {12 + minute}.0, device memory used/total (GB): {20 + minute}.25/79.11"
            )
    for rank in range(RANKS):
        lines.append(
            f"(WorkerDict pid={5000 + rank}, ip=10.0.0.1) [2025-06-28 18:16:0{rank},500 E {5000 + rank} 6881] logging.cc:101: Unhandled exception: "
            f"N3c1016DistBackendErrorE. what(): [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated with exception: "
            f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1495581, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=1800000) ran for 1800036 milliseconds before timing out."
        )
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    OUTPUT.mkdir(exist_ok=True)
    work = tmp_path_factory.mktemp("layout")
    (work / "nested" / "deeper").mkdir(parents=True)
    inputs = {name: FIXTURE_INPUTS[name] for name in (*SEEDS, *TALL)} | {"fleet": fleet_log(work / "nested" / "deeper" / "fleet.log")}
    return {name: report.write(analyze(str(source), jobs=1), work / f"{name}.html") for name, source in inputs.items()}


# a window resized: the page redraws each plot at its box's new width by itself (plotly's
# `responsive: true`); then what plotly does on a resize, awaited, so its last relayout is done,
# and the page's own fit of each plot's height to its legend (data-fitting while it runs)
REDRAWN = "() => Array.from(document.querySelectorAll('.js-plotly-plot')).every(div => Math.abs(div._fullLayout.width - div.clientWidth) < 1)"
RESIZED = "() => Promise.all(Array.from(document.querySelectorAll('.js-plotly-plot')).map(div => Plotly.Plots.resize(div)))"
FITTED = "() => document.querySelector('[data-fitting]') === null"


class Shown:
    """Each report open in one page, seen at each size: half the reports load at a phone's size
    and half at a desktop's, and each is then seen at the other as a window resized (a phone
    turned, a window narrowed): plotly lays its plots out anew, the page's CSS reflows. A
    screenshot of each first screen in test-output/."""

    def __init__(self, chromium, pages: dict[str, Path]) -> None:
        self.at: dict[str, tuple[object, str]] = {}  # name -> (its page, the size it is at)
        self.shot: set[Path] = set()
        for index, (name, path) in enumerate(pages.items()):
            size = list(SIZES)[index % len(SIZES)]
            width, height = SIZES[size]
            page = chromium.new_page(viewport={"width": width, "height": height})
            page.goto(path.resolve().as_uri())
            page.wait_for_selector("body[data-plotted]", state="attached", timeout=30_000)
            self.at[name] = (page, size)
            self._shot(name)

    def __getitem__(self, key: tuple[str, str]):
        name, size = key
        page, now = self.at[name]
        if now != size:
            width, height = SIZES[size]
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_function(REDRAWN, timeout=10_000)
            page.evaluate(RESIZED)
            page.wait_for_function(FITTED)
            self.at[name] = (page, size)
            self._shot(name)
        return page

    def _shot(self, name: str) -> None:
        page, size = self.at[name]
        path = OUTPUT / f"layout-{name}-{size}.png"
        if path not in self.shot:
            page.screenshot(path=str(path))
            self.shot.add(path)

    def close(self) -> None:
        for page, _ in self.at.values():
            page.close()


@pytest.fixture(scope="module")
def opened(browser, pages):  # noqa: F811 - the browser fixture
    """Each report at each size, drawn (Shown)."""
    shown = Shown(browser, pages)
    yield shown
    shown.close()


CASES = [(name, size) for name in [*SEEDS, *TALL, "fleet"] for size in SIZES]
BOXES = """sel => Array.from(document.querySelectorAll(sel)).map(e => e.getBoundingClientRect())
  .filter(r => r.width > 0 && r.height > 0).map(r => [r.left, r.top, r.right, r.bottom])"""


def overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


@pytest.mark.parametrize("name,size", CASES)
def test_the_page_never_scrolls_sideways_and_the_verdict_fits(opened, name, size):
    page = opened[(name, size)]
    width = page.evaluate("window.innerWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    right = max(r[2] for r in page.evaluate(BOXES, "#verdict, #verdict *"))  # the headline, facts and every fix's value
    assert right <= width


@pytest.mark.parametrize("name,size", CASES)
def test_the_legend_covers_no_plot_and_no_label_another(opened, name, size):
    page = opened[(name, size)]
    plots = page.evaluate(BOXES, "#timeline .draglayer .nsewdrag")
    legend = page.evaluate(BOXES, "#timeline .legend .bg")
    assert plots
    assert not [(box, plot) for box in legend for plot in plots if overlap(box, plot)]
    labels = page.evaluate(BOXES, "#timeline .annotation-text, #timeline .infolayer g[class^='g-y'], #timeline .updatemenu-container .updatemenu-button")
    assert not [(a, b) for i, a in enumerate(labels) for b in labels[i + 1 :] if overlap(a, b)]


@pytest.mark.parametrize("name", [n for n in SEEDS if n != "healthy-noisy-run"] + [*TALL, "fleet"])
def test_the_first_desktop_screen_holds_the_verdict_and_the_memory_before_the_failure(opened, name):
    page = opened[(name, "desktop")]
    assert page.evaluate(BOXES, "#verdict h2")[0][3] <= 1000
    first_panel = page.evaluate(BOXES, "#timeline .draglayer .nsewdrag")[0]
    assert first_panel[3] <= 1000  # the whole of the first memory panel, above the fold
    readings = page.evaluate("document.getElementById('timeline').data.filter(t => ['host', 'gpu'].includes(t.legendgroup)).length")
    assert readings > 0


@pytest.mark.parametrize("name", [*TALL])
def test_fixes_past_the_first_screen_are_counted_and_one_click_shows_every_one(browser, pages, name):  # noqa: F811 - the browser fixture
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(pages[name].resolve().as_uri())
    page.wait_for_selector("body[data-plotted]", state="attached", timeout=30_000)
    fixes = analyze(str(FIXTURE_INPUTS[name]), jobs=1)
    every = [r["setting"] for r in fixes.remedies[fixes.verdict["incident"]]]
    settings = "#verdict table.remedies tbody:not([hidden]) td[data-label=setting]"
    shown = page.locator(settings).all_text_contents()
    assert shown == every[: report.FIXES_SHOWN] and len(every) > report.FIXES_SHOWN
    button = page.locator("#verdict button.more-fixes")
    assert button.text_content() == f"{len(every) - report.FIXES_SHOWN} more fixes"
    button.click()
    assert page.locator(settings).all_text_contents() == every and not button.is_visible()
    page.close()


@pytest.mark.parametrize("name", [*SEEDS, "fleet"])
def test_memory_axes_start_at_zero(opened, name):
    ranges = opened[(name, "desktop")].evaluate(
        """() => { const l = document.getElementById('timeline')._fullLayout;
             return Object.keys(l).filter(k => /^yaxis\\d*$/.test(k) && l[k].type !== 'category').map(k => l[k].range[0]); }"""
    )
    assert ranges and all(low <= 0 for low in ranges)


def test_a_fleet_cascade_is_grouped_and_its_paths_short(opened, pages):
    page = opened[("fleet", "desktop")]
    groups = page.locator("#cascade ul.cascade > li").all_text_contents()
    assert [g.split(",")[0] for g in groups] == [f"{RANKS - 1} × watchdog timeout"]
    assert f"ranks 1–{RANKS - 1} on node 10.0.0.1" in groups[0]
    links = page.locator("#cascade a.src")
    assert links.count() == RANKS - 1
    full = links.first.get_attribute("title")
    assert full.endswith(".log:" + full.rsplit(":", 1)[1]) and "/nested/deeper/" in full
    assert links.first.text_content() == "fleet.log:" + full.rsplit(":", 1)[1]  # the one file: its name tells it apart


def test_a_fleet_legend_has_one_entry_per_group_and_a_panel_per_node(opened):
    page = opened[("fleet", "desktop")]
    entries = page.evaluate("Array.from(document.querySelectorAll('#timeline .legend .traces')).map(e => e.textContent)")
    gpu = [e.split(" · ")[0] for e in entries if e.startswith("GPU") and not e.startswith("GPU total")]
    assert sorted(gpu) == [f"GPU {metric} ×{WORKERS}" for metric in ("allocated", "reserved", "used")]  # 48 series, 3 entries
    assert len(entries) == len(set(entries))
    titles = page.evaluate("""Array.from(document.querySelectorAll("#timeline .infolayer g[class^='g-y']")).map(e => e.textContent)""")
    assert [t for t in titles if t.startswith("host")] == [f"host GiB · {node}" for node in NODES]
