"""The HTML report in a real browser (Debian's headless Chromium driven by Playwright): it
loads with no console error and no network request, plotly draws the traces the diagnosis
holds, a click on an event row shows its raw block, and log text never runs as script.
Screenshots of the reports land in test-output/ for a person to look at.

`make test` installs Chromium; under CI (CI set) a missing browser fails instead of skipping."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import ROOT
from oomlens import analyze
from oomlens.cli import main
from oomlens.kinds import shipped
from oomlens.outputs import html as report
from test_report import FIXTURE_INPUTS, big_log, evil_log, plotly_cdn_url

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
OUTPUT = ROOT / "test-output"
SEEDS = ("openrlhf-reward-model-host-oom", "cascade-kernel-oom-multinode", "ray2.60-b-rl-actor-oom", "easyr1-gpu-growth", "healthy-noisy-run")
BIG = 25_000  # readings per metric of the synthetic long run
LOAD_BUDGET_S = 15  # a long run's page must draw well within this on a 2-core machine

pytestmark = pytest.mark.slow  # a browser starts, and a long run is drawn


def _need(what: str) -> None:
    message = f"browser tests need {what} (`make test` installs it)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need("the playwright package")
    if not shutil.which(CHROMIUM):
        _need(CHROMIUM)
    with sync_playwright() as playwright:
        # launch() starts from a fresh temporary profile (user-data-dir) every time
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """name -> (diagnosis, report path) for the seed fixtures, a hostile log and a long run."""
    OUTPUT.mkdir(exist_ok=True)
    work = tmp_path_factory.mktemp("logs")
    inputs = {name: FIXTURE_INPUTS[name] for name in SEEDS}
    inputs["injection"] = evil_log(work / "evil.log")
    inputs["long-run"] = big_log(work / "long-run.log", BIG)
    built = {}
    for name, source in inputs.items():
        diagnosis = analyze(str(source), jobs=1)
        built[name] = (diagnosis, report.write(diagnosis, OUTPUT / f"report-{name}.html"))
    return built


class Loaded:
    """A report open in a page, with what the page logged and asked the network for."""

    def __init__(self, browser, path: Path, served: dict[str, str] | None = None) -> None:
        self.url = path.resolve().as_uri()
        self.served = served or {}  # URL -> script body, answered as the network would
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.route("**/*", self._route)
        started = time.monotonic()
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-plotted]", state="attached", timeout=LOAD_BUDGET_S * 1000)
        self.seconds = time.monotonic() - started

    def _route(self, route) -> None:
        url = route.request.url
        self.requests.append(url)
        if url == self.url or url.startswith("data:"):
            route.continue_()
        elif url in self.served:
            route.fulfill(status=200, content_type="application/javascript", body=self.served[url])
        else:
            route.abort()

    def traces(self, div: str) -> list[dict]:
        return self.page.evaluate(
            """div => document.getElementById(div).data.map(t => ({
                 name: t.name, group: t.legendgroup, type: t.type, n: t.x.length, ids: t.customdata || [] }))""",
            div,
        )

    def hover(self, div: str, trace: int, point: int) -> str:
        """Hover a point the way a mouse would, and read the tooltip's text."""
        return self.page.evaluate(
            """async ([div, trace, point]) => {
                 const gd = document.getElementById(div), t = gd._fullData[trace];
                 await new Promise(done => setTimeout(done, 60));  // plotly throttles hover events
                 Plotly.Fx.hover(gd, [{curveNumber: trace, pointNumber: point}], t.xaxis + t.yaxis);
                 return gd.querySelector('.hoverlayer').textContent; }""",
            [div, trace, point],
        )


@pytest.fixture(scope="module")
def opened(browser, reports):
    """Every report opened once; each leaves a screenshot in test-output/."""
    pages = {}
    for name, (_diagnosis, path) in reports.items():
        loaded = Loaded(browser, path)
        loaded.page.screenshot(path=str(OUTPUT / f"report-{name}.png"), full_page=True)
        pages[name] = loaded
    yield pages
    for loaded in pages.values():
        loaded.page.close()


@pytest.mark.parametrize("name", [*SEEDS, "injection", "long-run"])
def test_loads_offline_with_no_console_error(opened, name):
    loaded = opened[name]
    assert loaded.errors == []
    assert loaded.requests == [loaded.url]
    assert (OUTPUT / f"report-{name}.png").stat().st_size > 10_000


@pytest.mark.parametrize("name", SEEDS)
def test_plot_holds_every_reading_and_failure(opened, reports, name):
    diagnosis, _ = reports[name]
    traces = opened[name].traces("timeline")
    memory = [t for t in traces if t["group"] in ("host", "gpu")]
    by_id = {e.id: e for e in diagnosis.events}
    by_time = opened[name].page.evaluate("document.getElementById('timeline').layout.xaxis.type") == "date"
    placeable = [s for s in diagnosis.timeline if not by_time or by_id[s.event].time or by_id[s.event].time_latest]
    assert Counter(i for t in memory for i in t["ids"]) == Counter(s.event for s in placeable)
    failures = [e for e in diagnosis.events if e.kind != "gpu_memory"]
    marked = {t["name"]: t["n"] for t in traces if t["group"] == "events"}
    assert marked == dict(Counter(shipped().label(e.kind) for e in failures if e.time or e.time_latest or not by_time))
    drawn = opened[name].page.evaluate("document.querySelectorAll('#timeline .scatterlayer .trace').length")
    assert drawn == len(traces)


def test_series_names_and_counts_per_process(opened, reports):
    diagnosis, _ = reports["ray2.60-b-rl-actor-oom"]
    traces = {t["name"]: t["n"] for t in opened["ray2.60-b-rl-actor-oom"].traces("timeline")}
    readings = diagnosis.timeline
    for metric in ("allocated", "reserved"):
        of_worker = [s for s in readings if s.memory == "gpu" and s.metric == metric]
        pid = of_worker[0].pid
        name = next(n for n in traces if n.startswith(f"GPU {metric} · pid {pid}"))
        assert traces[name] == len(of_worker) == sum(1 for s in readings if s.pid == pid and s.metric == metric)
    kill = next(e for e in diagnosis.events if e.kind == "ray_oom_kill")
    threshold = f"Ray threshold {kill.fields['threshold']} · node {kill.node}"
    assert traces[threshold] == 2 and traces[f"host total · node {kill.node}"] == 2


def test_multi_node_series(opened, reports):
    diagnosis, _ = reports["cascade-kernel-oom-multinode"]
    names = [t["name"] for t in opened["cascade-kernel-oom-multinode"].traces("timeline")]
    for node in {s.node for s in diagnosis.timeline if s.node}:
        assert any(name.endswith(f"· {node}") for name in names)


def test_kill_bars_highlight_the_culprit(opened, reports):
    diagnosis, _ = reports["openrlhf-reward-model-host-oom"]
    incident = diagnosis.incidents[0]
    page = opened["openrlhf-reward-model-host-oom"].page
    bars = page.evaluate(f"document.getElementById('kill-{incident.root.id}').data[0]")
    assert bars["customdata"] == [row["pid"] for row in incident.root.fields["top"]]
    colours = dict(zip(bars["customdata"], bars["marker"]["color"], strict=True))
    assert colours.pop(incident.culprit["pid"]) == "#d62728"
    assert "#d62728" not in colours.values()
    assert page.locator(f"#kill-{incident.root.id} .barlayer .point").count() == len(bars["customdata"])


def test_click_row_reveals_raw_block_and_table_sorts_and_filters(opened, reports):
    diagnosis, _ = reports["openrlhf-reward-model-host-oom"]
    page = opened["openrlhf-reward-model-host-oom"].page
    failures = [e for e in diagnosis.events if e.kind != "gpu_memory"]
    event = failures[-1]
    raw = page.locator(f"#event-{event.id} tr.raw")
    assert raw.is_hidden()
    page.click(f"#event-{event.id} tr.row")
    assert raw.is_visible()
    assert "\x1b[33m(raylet)\x1b[0m" in event.text  # as the driver console wrote it: shown as written, less the colour codes
    assert raw.locator("pre").text_content() == event.text.replace("\x1b[33m", "").replace("\x1b[0m", "")
    source = page.locator(f"#event-{event.id} tr.row code.src")  # the path as short as tells it apart, whole on hover
    assert source.get_attribute("title") == f"{event.source.path}:{event.source.line}"
    assert source.text_content() == f"{Path(event.source.path).name}:{event.source.line}"
    page.click(f"#event-{event.id} tr.row")
    assert raw.is_hidden()

    def order() -> list[str]:
        return page.evaluate("Array.from(document.querySelectorAll('#event-table tbody')).map(b => b.id.slice(6))")

    page.click("#event-table th[data-sort=kind]")
    kinds = [next(e.kind for e in failures if e.id == i) for i in order()]
    assert kinds == sorted(kinds)
    page.click("#event-table th[data-sort=order]")
    assert order() == [e.id for e in failures]
    page.select_option("#kind", "watchdog_timeout")
    visible = page.evaluate("Array.from(document.querySelectorAll('#event-table tbody:not([hidden])')).map(b => b.id.slice(6))")
    assert visible == [e.id for e in failures if e.kind == "watchdog_timeout"]
    page.select_option("#kind", "")
    page.fill("#filter", "GCS_SERVER.OUT")
    visible = page.evaluate("Array.from(document.querySelectorAll('#event-table tbody:not([hidden])')).map(b => b.id.slice(6))")
    assert visible == [e.id for e in failures if any(s.path.endswith("gcs_server.out") for s in e.sources)] != []
    page.fill("#filter", "")


def test_clicking_a_marker_opens_its_row(opened, reports):
    diagnosis, _ = reports["openrlhf-reward-model-host-oom"]
    page = opened["openrlhf-reward-model-host-oom"].page
    root = diagnosis.incidents[0].root
    box = page.evaluate(
        """id => { const gd = document.getElementById('timeline');
             gd.scrollIntoView();
             const t = gd._fullData.find(t => t.legendgroup === 'events' && t.customdata.includes(id));
             const r = gd.querySelectorAll('.trace' + t.uid + ' .point')[t.customdata.indexOf(id)].getBoundingClientRect();
             return {x: r.x + r.width / 2, y: r.y + r.height / 2}; }""",
        root.id,
    )
    assert page.locator(f"#event-{root.id} tr.raw").is_hidden()
    page.mouse.move(box["x"], box["y"])
    page.mouse.click(box["x"], box["y"])
    page.locator(f"#event-{root.id} tr.raw").wait_for(state="visible", timeout=5000)


def test_no_incident_page(opened):
    page = opened["healthy-noisy-run"].page
    assert page.locator("#verdict h2").text_content() == "No OOM or crash found in these logs"
    assert page.locator("#timeline .scatterlayer .trace").count() > 0


def test_injected_log_text_does_not_run(opened, reports):
    diagnosis, _ = reports["injection"]
    loaded = opened["injection"]
    assert loaded.page.evaluate("typeof window.__pwned") == "undefined"
    assert loaded.page.evaluate("document.querySelectorAll('img').length") == 0
    kill = next(e for e in diagnosis.events if e.kind == "ray_oom_kill")
    assert loaded.page.locator(f"#event-{kill.id} pre").text_content() == kill.text
    traces = loaded.traces("timeline")
    gpu = next(i for i, t in enumerate(traces) if t["group"] == "gpu")
    shown = [loaded.hover("timeline", gpu, point) for point in range(traces[gpu]["n"])]
    labels = [s.label for s in diagnosis.timeline if s.memory == "gpu" and s.metric == traces[gpu]["name"].split(" · ")[0].split()[-1]]
    assert all(label in text for label, text in zip(labels, shown, strict=True))  # the payloads, as plain text
    assert "<script>window.__pwned=1</script>" in shown[0]
    assert loaded.page.evaluate("typeof window.__pwned") == "undefined"


def test_long_run_draws_fast_and_keeps_its_peak(opened, reports):
    diagnosis, _ = reports["long-run"]
    loaded = opened["long-run"]
    assert loaded.seconds < LOAD_BUDGET_S
    readings = diagnosis.timeline
    for trace in [t for t in loaded.traces("timeline") if t["group"] == "gpu"]:
        metric = trace["name"].split(" · ")[0].split()[-1]
        values = [s.bytes for s in readings if s.metric == metric]
        [read] = diagnosis.inputs  # a day of readings, reduced to the budget, then downsampled for the page
        assert (read.readings, len(values)) == (BIG, read.readings_kept) and trace["n"] <= report.MAX_POINTS
        peak = loaded.page.evaluate(f"Math.max(...document.getElementById('timeline').data.find(t => t.name === {trace['name']!r}).y)")
        assert peak == pytest.approx(max(values) / 1024**3)


def written(tmp_path: Path, *args: str, name: str = "report.html") -> Path:
    """The page `oomlens report ARGS` writes, as a user runs it."""
    out = tmp_path / name
    CliRunner().invoke(main, ["report", *args, "-o", str(out)])
    return out


@pytest.mark.parametrize("name", ["ray2.60-c-actor-sigkill", "017_vllm_6042.log"])
def test_colour_codes_never_reach_the_page(browser, tmp_path, name):
    """Ray's coloured prefixes (whole, or with the ESC byte lost) are in the events' text,
    and not in what the page shows: the raw blocks opened, the tooltips hovered."""
    source = FIXTURE_INPUTS[name]
    diagnosis = analyze(str(source))
    failures = [e for e in diagnosis.events if e.kind != "gpu_memory"]
    assert any("[36m" in e.text or "[33m" in e.text for e in failures)
    loaded = Loaded(browser, written(tmp_path, str(source)))
    try:
        for event in failures:
            loaded.page.click(f"#event-{event.id} tr.row")
            assert loaded.page.locator(f"#event-{event.id} tr.raw").is_visible()
        shown = loaded.page.evaluate("document.body.innerText")
        traces = loaded.traces("timeline")
        for i, trace in enumerate(traces):
            if trace["group"] == "events":
                shown += "".join(loaded.hover("timeline", i, point) for point in range(trace["n"]))
        assert all(e.id in shown for e in failures)
        assert "\x1b" not in shown and not re.search(r"\[[0-9;]+m", shown)
        assert loaded.errors == []
    finally:
        loaded.page.close()


def test_cdn_page_draws_with_the_one_script_its_policy_allows(browser, opened, tmp_path):
    """--plotly cdn: the page asks plotly's CDN for the plotly.js plotly.py pins (answered
    here from the same file), draws as the inline page of the same logs does, and its
    Content-Security-Policy refuses any other script, even from the same host."""
    from plotly.offline import get_plotlyjs

    name = "openrlhf-reward-model-host-oom"
    url = plotly_cdn_url()
    cdn = Loaded(browser, written(tmp_path, str(FIXTURE_INPUTS[name]), "--plotly", "cdn", name="cdn.html"), served={url: get_plotlyjs()})
    try:
        assert cdn.errors == [] and cdn.requests == [cdn.url, url]
        assert cdn.traces("timeline") == opened[name].traces("timeline")
        refused = cdn.page.evaluate(
            """() => new Promise(done => {
                 document.addEventListener("securitypolicyviolation", e => done(e.blockedURI));
                 const s = document.createElement("script");
                 s.src = "https://cdn.plot.ly/plotly-latest.min.js";
                 document.body.appendChild(s);
               })"""
        )
        assert refused == "https://cdn.plot.ly/plotly-latest.min.js"
    finally:
        cdn.page.close()


@pytest.mark.parametrize("made", ["missing", "empty"])
def test_nothing_read_page(browser, tmp_path, made):
    target = tmp_path / "logs"
    if made == "empty":
        target.mkdir()
    loaded = Loaded(browser, written(tmp_path, str(target)))
    try:
        assert loaded.errors == [] and loaded.requests == [loaded.url]
        assert loaded.page.locator("#verdict h2").text_content() == "Nothing could be read"
        problem = "no such file or folder: nothing read" if made == "missing" else "empty folder: nothing to read"
        assert loaded.page.locator("#verdict li").all_text_contents() == [f"{target}: {problem}"]
        assert "No OOM or crash found" not in loaded.page.evaluate("document.body.innerText")
    finally:
        loaded.page.close()
