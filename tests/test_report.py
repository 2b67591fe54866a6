"""`oomlens report`: the HTML page renders what the diagnosis holds, every reading and every
failure exactly once, and log text never becomes markup. (The page in a real browser:
test_report_browser.py.)"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import plotly.graph_objects as go
import pytest
from click.testing import CliRunner
from plotly.offline import get_plotlyjs

from conftest import FIXTURES, REAL, SESSIONS, sample
from oomlens import analyze
from oomlens.cli import main
from oomlens.kinds import shipped
from oomlens.outputs import html as report
from oomlens.outputs.verdict import ends

INCIDENTS = FIXTURES / "incidents"


def fixture_inputs() -> dict[str, Path]:
    """Every incident, session and real-log fixture, by the path a user would give (never
    expected.json)."""
    found = {}
    for folder in sorted(p for p in INCIDENTS.iterdir() if p.is_dir()):
        found[folder.name] = folder / "session" if (folder / "session").exists() else folder / "driver-console.log"
    for folder in sorted(p for p in SESSIONS.iterdir() if p.is_dir()):
        found[folder.name] = folder
    for log in sorted(REAL.glob("*.log")):
        found[log.name] = log
    return found


FIXTURE_INPUTS = fixture_inputs()

PAYLOADS = (
    "<script>window.__pwned=1</script>",
    '"><img src=x onerror="window.__pwned=2">',
    "</script><script>window.__pwned=3</script>",
)


def evil_log(path: Path) -> Path:
    """A Ray kill report and memory lines whose process names and labels carry HTML payloads."""
    source = (SESSIONS / "ray2.60-b-rl-actor-oom" / "driver-console.log").read_text().splitlines()
    start = next(i for i, line in enumerate(source) if line.startswith("ray.exceptions.OutOfMemoryError"))
    end = next(i for i, line in enumerate(source) if line.startswith("Refer to the documentation"))
    block = source[start : end + 1]
    for command, payload in zip(("ray::RewardModelRayActor.compute_reward", "ray::DashboardAgent", "ray::RuntimeEnvAgent"), PAYLOADS, strict=True):
        block = [line.replace(command, command + payload) for line in block]  # Top-10 commands
    memory = [f"(WorkerDict pid=14523) Before {p} in sharding manager memory, memory allocated (GB): 12.81, memory reserved (GB): 45.77" for p in PAYLOADS]
    path.write_text("\n".join(memory + block) + "\n")
    return path


def big_log(path: Path, lines: int) -> Path:
    """One GPU's veRL memory line, timestamped once a second: `lines` readings per metric."""
    with path.open("w") as out:
        for i in range(lines):
            allocated = 1 + (i % 100) / 10 + (5.0 if i == lines // 3 else 0)  # one spike downsampling must keep
            out.write(
                f"(WorkerDict pid=169054) DEBUG:2025-06-28 {10 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d},828:Before building vllm rollout, "
                f"memory allocated (GB): {allocated:.2f}, memory reserved (GB): 12.00, device memory used/total (GB): 14.11/23.59\n"
            )
    return path


def figures_of(page: str) -> dict:
    """The figures JSON embedded in a report."""
    blob = re.search(r'<script type="application/json" id="oomlens-figures">(.*?)</script>', page, re.S)
    assert blob is not None
    return json.loads(blob.group(1))


def memory_traces(figure: dict) -> list[dict]:
    return [t for t in figure["data"] if t.get("legendgroup") in ("host", "gpu")]


def event_traces(figure: dict) -> list[dict]:
    return [t for t in figure["data"] if t.get("legendgroup") == "events"]


def failures(diagnosis) -> list:
    return [e for e in diagnosis.events if e.kind != "gpu_memory"]


@pytest.fixture(scope="module", params=sample(sorted(FIXTURE_INPUTS)))
def rendered(request):
    diagnosis = analyze(str(FIXTURE_INPUTS[request.param]), jobs=1)
    return request.param, diagnosis, report.render(diagnosis)


def test_every_reading_is_plotted_once(rendered):
    name, diagnosis, page = rendered
    readings = diagnosis.timeline
    figures = figures_of(page)
    if not readings and not failures(diagnosis):
        assert "timeline" not in figures
        return
    traces = memory_traces(figures["timeline"])
    by_time = figures["timeline"]["layout"]["xaxis"].get("type") == "date"
    by_id = {e.id: e for e in diagnosis.events}
    placeable = [s for s in readings if not by_time or by_id[s.event].time or by_id[s.event].time_latest]
    drawn = {(x, y) for t in traces for x, y in zip(t["x"], t["y"], strict=True)}
    place = report.Axis(diagnosis).of_sample
    assert Counter(i for t in traces for i in t["customdata"]) == Counter(s.event for s in placeable), name
    for s in placeable:  # every reading with a time (or an interval) is drawn where its time says
        assert (place(s).x, round(s.bytes / report.GIB, 4)) in drawn, (name, s)
    assert all(len(t["x"]) == len(t["y"]) == len(t["customdata"]) for t in traces)
    names = [t["name"] for t in traces]
    assert len(names) == len(set(names)), f"{name}: two series share a legend name"


def test_every_figure_is_one_plotly_accepts(rendered):
    """The page's figures are built as plain dicts (html.Grid); plotly.py's own figure
    classes validate each here: a property plotly.js does not know, or a value it would
    refuse, fails (the template is plotly's own, and as `template="plotly_white"` writes it)."""
    name, _diagnosis, page = rendered
    for key, figure in figures_of(page).items():
        assert figure["layout"].pop("template") == report.template(), (name, key)
        go.Figure(figure)  # raises ValueError on anything plotly does not accept


def test_failures_are_marked_on_the_timeline(rendered):
    name, diagnosis, page = rendered
    if not failures(diagnosis):
        return
    timeline = figures_of(page)["timeline"]
    by_time = timeline["layout"]["xaxis"].get("type") == "date"
    placed = [e for e in failures(diagnosis) if e.time or e.time_latest or not by_time]
    # a kind's legend names the devices its events are on (an NPU's allocator failure: "NPU OOM")
    expected = {
        shipped().label_across(kind, (e.device for e in placed if e.kind == kind)): sorted(e.id for e in placed if e.kind == kind)
        for kind in {e.kind for e in placed}
    }
    assert {t["name"]: sorted(t["customdata"]) for t in event_traces(timeline)} == expected, name
    roots = [i.root for i in diagnosis.incidents if i.root.time or i.root.time_latest or not by_time]
    assert len(timeline["layout"].get("shapes", [])) == len(roots)


def test_header_states_verdict_cascade_and_fixes(rendered):
    name, diagnosis, page = rendered
    verdict = page[page.index('id="verdict"') : page.index('id="events"')]
    if diagnosis.verdict is None:  # green, and how the run ended when it ended on purpose
        assert "No OOM or crash found in these logs" in verdict
        assert 'class="verdict ok"' in verdict and all(html.escape(e) in verdict for e in ends(diagnosis))
        return
    assert html.escape(diagnosis.verdict["summary"]) in verdict
    assert f"confidence {diagnosis.verdict['confidence']:.2f}" in verdict
    incident = next((i for i in diagnosis.incidents if i.id == diagnosis.verdict["incident"]), None)
    if incident is None:
        return
    for event in incident.cascade:  # every member, in its group, its whole path on hover
        assert f'title="{html.escape(f"{event.source.path}:{event.source.line}")}"' in verdict, name
    for remedy in diagnosis.remedies.get(incident.id, []):
        assert f"<code>{html.escape(remedy['setting'])}</code>" in verdict, name


def test_event_table_has_every_failure_with_its_source(rendered):
    name, diagnosis, page = rendered
    rows = re.findall(r'<tbody id="event-(e\d+)"', page)
    assert rows == [e.id for e in failures(diagnosis)], name
    for event in failures(diagnosis):
        shown = report.clean(event.text)  # as written, less colour codes
        assert f"<pre>{html.escape(shown)}</pre>" in page
        assert "\x1b" not in shown and not re.search(r"\[[0-9;]+m", shown), name
        assert html.escape(f"{event.source.path}:{event.source.line}") in page


def test_top_memory_users_at_each_kill(rendered):
    name, diagnosis, page = rendered
    figures = figures_of(page)
    kills = [e for e in diagnosis.events if e.kind == "ray_oom_kill" and e.fields.get("top")]
    assert sorted(k for k in figures if k.startswith("kill-")) == sorted(f"kill-{e.id}" for e in kills[: report.MAX_KILL_CHARTS])
    for kill in kills[: report.MAX_KILL_CHARTS]:
        bars = figures[f"kill-{kill.id}"]["data"][0]
        assert bars["customdata"] == [row["pid"] for row in kill.fields["top"]]
        assert bars["x"] == [round(row["bytes"] / 1024**3, 4) for row in kill.fields["top"]]
        incident = next(i for i in diagnosis.incidents if i.root is kill or kill in i.cascade)
        red = [pid for pid, colour in zip(bars["customdata"], bars["marker"]["color"], strict=True) if colour == "#d62728"]
        blamed = incident.culprit["pid"] if incident.culprit else None
        assert red == ([blamed] if blamed in bars["customdata"] else []), name


def test_multi_node_cascade_shows_both_nodes():
    diagnosis = analyze(str(FIXTURE_INPUTS["cascade-kernel-oom-multinode"]))
    page = report.render(diagnosis)
    names = " ".join(t["name"] for t in memory_traces(figures_of(page)["timeline"]))
    nodes = {s.node for s in diagnosis.timeline if s.node}
    assert len(nodes) >= 2 and all(node in names for node in nodes)
    incident = diagnosis.incidents[0]
    cascade_nodes = {e.node for e in incident.cascade if e.node}
    assert len(cascade_nodes) >= 2
    header = page[page.index('id="verdict"') : page.index('id="events"')]
    assert f"The cascade: {len(incident.cascade)} failure(s)" in header
    assert all(f"on node {node}" in header for node in cascade_nodes)


def test_log_text_never_becomes_markup(tmp_path):
    diagnosis = analyze(str(evil_log(tmp_path / "evil.log")))
    page = report.render(diagnosis)
    from plotly.offline import get_plotlyjs

    ours = page.count("<script") - get_plotlyjs().count("<script")
    assert ours == 3  # the figures JSON, plotly.js, the page's own script
    assert "<img" not in page.lower() and 'onerror="window' not in page
    figures = page[page.index('id="oomlens-figures">') : page.index("</script>", page.index('id="oomlens-figures">'))]
    assert not re.search("[<>&\u2028\u2029]", figures.split(">", 1)[1])
    kill = next(e for e in diagnosis.events if e.kind == "ray_oom_kill")
    assert all(payload in kill.text for payload in PAYLOADS)
    assert f"<pre>{html.escape(kill.text)}</pre>" in page  # shown as text in the table's raw block
    figures = figures_of(page)
    labels = [t["name"] for t in figures["timeline"]["data"]] + figures[f"kill-{kill.id}"]["data"][0]["y"]
    hover = [h for t in memory_traces(figures["timeline"]) for h in t["hovertext"]]
    for payload in PAYLOADS:  # plotly reads a subset of HTML in labels: they get it escaped
        assert any(html.escape(payload, quote=False) in h for h in hover)
        assert not any(payload in h for h in hover)
    assert any("&lt;" in label for label in labels) and not any("<" in label for label in labels)


def test_script_json_escapes_what_ends_a_script():
    text = report.script_json({"a": "</script><!-- & \u2028\u2029"})
    assert not re.search("[<>&\u2028\u2029]", text)
    assert json.loads(text) == {"a": "</script><!-- & \u2028\u2029"}


def test_downsample_keeps_extremes_in_order_and_is_deterministic():
    values = [(i * 7919) % 1000 for i in range(50_000)]
    values[31_337] = 5000
    kept = report.downsample(list(range(len(values))), lambda i: values[i], limit=400)
    assert len(kept) <= 400 and kept == sorted(kept)
    assert 31_337 in kept and values.index(min(values)) in kept
    assert kept == report.downsample(list(range(len(values))), lambda i: values[i], limit=400)
    assert report.downsample([3, 1, 2], lambda v: v, limit=400) == [3, 1, 2]


def test_long_series_are_cut_to_max_points(tmp_path):
    lines = 3 * report.MAX_POINTS
    diagnosis = analyze(str(big_log(tmp_path / "big.log", lines)), all_readings=True)  # the page cuts them, not the reduction
    traces = memory_traces(figures_of(report.render(diagnosis))["timeline"])
    readings = diagnosis.timeline
    assert len(traces) == len({s.metric for s in readings})
    for trace in traces:
        metric = trace["name"].split(" · ")[0].split()[-1]
        values = [s.bytes / 1024**3 for s in readings if s.metric == metric]
        assert len(values) == lines and len(trace["y"]) <= report.MAX_POINTS
        assert max(trace["y"]) == pytest.approx(max(values)) and min(trace["y"]) == pytest.approx(min(values))
        assert trace["mode"] == "lines"


def test_report_command(tmp_path):
    out = tmp_path / "oom-report.html"
    result = CliRunner().invoke(main, ["report", str(FIXTURE_INPUTS["openrlhf-reward-model-host-oom"]), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!DOCTYPE html>") and str(out) in result.output
    missing = CliRunner().invoke(main, ["report", str(tmp_path / "nothing-here"), "-o", str(tmp_path / "r.html")])
    assert missing.exit_code == 1 and "nothing-here: no such file or folder: nothing read" in missing.output  # one line: the problem
    unwritable = CliRunner().invoke(main, ["report", str(FIXTURE_INPUTS["healthy-noisy-run"]), "-o", str(tmp_path / "no" / "r.html")])
    assert unwritable.exit_code == 1 and "cannot write" in unwritable.output


def test_default_output_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["report", str(FIXTURE_INPUTS["healthy-noisy-run"])])
    assert result.exit_code == 0 and (tmp_path / "oom-report.html").exists()


def test_help_does_not_load_plotly():
    code = (
        "import sys\nfrom oomlens.cli import main\nimport oomlens.outputs.html\n"
        "try:\n    main(['report', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('plotly', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "[]"


# -- nothing read, part read -----------------------------------------------------------------


def verdict_of(page: str) -> str:
    """The header section of a page, whatever follows it."""
    start = page.index('<section id="verdict"')
    return page[start : page.index("</section>", start)]


@pytest.mark.parametrize("made", ["missing", "empty"])
def test_nothing_read_is_never_an_all_clear_page(tmp_path, made):
    target = tmp_path / "logs"
    if made == "empty":
        target.mkdir()
    out = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", str(target), "-o", str(out)])
    assert result.exit_code == 1 and (": nothing read" in result.output or "nothing to read" in result.output)  # the problem, one line
    page = out.read_text()
    header = verdict_of(page)
    assert "<h2>Nothing could be read</h2>" in header and 'class="verdict unread"' in header
    problem = "no such file or folder: nothing read" if made == "missing" else "empty folder: nothing to read"
    assert f"<li>{html.escape(f'{target}: {problem}')}</li>" in header
    assert "No OOM or crash found" not in page and "verdict ok" not in page and "<title>oomlens: nothing could be read</title>" in page
    assert "No failure events" not in page and 'id="memory"' not in page  # nothing that reads as good news
    assert get_plotlyjs()[:200] not in page  # nothing to draw: no plotly.js either


def test_part_read_says_how_much_and_what_not(tmp_path):
    healthy = FIXTURE_INPUTS["healthy-noisy-run"]
    text = healthy.read_bytes()
    (tmp_path / "cut.log.gz").write_bytes(gzip.compress(text)[: len(text) // 8])  # cut while copied
    missing = tmp_path / "gone.log"
    out = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", str(healthy), str(tmp_path / "cut.log.gz"), str(missing), "-o", str(out)])
    assert result.exit_code == 0, result.output
    diagnosis = analyze(str(healthy), str(tmp_path / "cut.log.gz"), str(missing))
    assert diagnosis.verdict is None and len(diagnosis.problems) == 2
    header = verdict_of(out.read_text())
    assert "<h2>No OOM or crash found in what could be read</h2>" in header and 'class="verdict partial"' in header
    read = sum(i.bytes for i in diagnosis.inputs)
    assert f"Read: 2 of 3 input(s), {read:,} bytes in {sum(i.lines for i in diagnosis.inputs):,} lines (1 read whole)" in header
    assert read > len(text)  # the whole healthy log and the part of the cut copy before its cut
    for problem in diagnosis.problems:
        assert f"<li>{html.escape(problem)}</li>" in header


def test_a_crash_by_a_signal_is_named_in_what_could_be_read_too(tmp_path):
    """A SIGFPE in a worker (a real excerpt) beside an input that could not be read: the
    crash is the verdict (a process_error, no memory failure), never "no crash"."""
    out = tmp_path / "r.html"
    CliRunner().invoke(main, ["report", str(REAL / "236_toolrl_26.log"), str(tmp_path / "missing.log"), "-o", str(out)])
    header = verdict_of(out.read_text())
    assert "no memory failure: the rollout process pid 14361 died of signal SIGFPE" in header and "crash found" not in header


def test_all_read_all_clear_stays_green(tmp_path):
    out = tmp_path / "r.html"
    assert CliRunner().invoke(main, ["report", str(FIXTURE_INPUTS["healthy-noisy-run"]), "-o", str(out)]).exit_code == 0
    header = verdict_of(out.read_text())
    assert 'class="verdict ok"' in header and "<h2>No OOM or crash found in these logs</h2>" in header


# -- colour codes ----------------------------------------------------------------------------


def test_colour_codes_are_not_in_the_raw_blocks():
    """Ray colours its prefixes on the driver console: the raw block shows the line as
    written, less its colour codes."""
    diagnosis = analyze(str(FIXTURE_INPUTS["ray2.60-c-actor-sigkill"]))
    page = report.render(diagnosis)
    coloured = [e for e in failures(diagnosis) if "\x1b[" in e.text]
    assert coloured
    for event in coloured:
        assert f"<pre>{html.escape(event.text.replace(chr(27) + '[33m', '').replace(chr(27) + '[36m', '').replace(chr(27) + '[0m', ''))}</pre>" in page
    hovers = [h for t in event_traces(figures_of(page)["timeline"]) for h in t["hovertext"]]
    assert hovers and not any("\x1b" in h or "[33m" in h or "[0m" in h for h in hovers)
    assert "\x1b" not in page


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("\x1b[33m(raylet)\x1b[0m A worker died", "(raylet) A worker died"),
        ("[36m(WorkerDict pid=1)[0m hi", "(WorkerDict pid=1) hi"),  # the ESC byte lost
        ("`[36m(pid=9)`[0m q", "(pid=9) q"),
        ("\ufffd[33m(raylet)\ufffd[0m x", "(raylet) x"),
        ("\x1b]0;trainer\x07step 3 \x1b]8;;https://example.org\x1b\\docs\x1b]8;;\x1b\\ end", "step 3 docs end"),  # OSC: a title, a link
        ("\x1b(Bplain \x1b[1;31mbold red\x1b[m", "plain bold red"),
        ("list[0] = x[1] [tail", "list[0] = x[1] [tail"),  # brackets that are no colour code stay
    ],
)
def test_clean_takes_out_escape_sequences_only(raw, shown):
    assert report.clean(raw) == shown


# -- where the page goes, and where plotly.js comes from ------------------------------------


def test_report_to_stdout(tmp_path):
    source = FIXTURE_INPUTS["openrlhf-reward-model-host-oom"]
    run = subprocess.run([sys.executable, "-m", "oomlens", "report", str(source), "-o", "-"], cwd=tmp_path, capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr
    page = run.stdout.decode("utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>") and "wrote" not in page[-200:]
    assert page == report.render(analyze(str(source)))
    assert list(tmp_path.iterdir()) == []  # no file named "-"
    nothing = subprocess.run([sys.executable, "-m", "oomlens", "report", str(tmp_path / "none"), "-o", "-"], cwd=tmp_path, capture_output=True, timeout=120)
    assert (
        nothing.returncode == 1
        and b"<h2>Nothing could be read</h2>" in nothing.stdout
        and nothing.stderr.endswith(b"none: no such file or folder: nothing read\n")
    )


def plotly_cdn_url() -> str:
    """The URL plotly.py itself loads plotly.js from, for a page that does not inline it."""
    import plotly.graph_objects as go
    import plotly.io

    url = re.search(r'<script[^>]* src="(https://cdn[^"]+)"', plotly.io.to_html(go.Figure(), include_plotlyjs="cdn"))
    assert url is not None
    return url.group(1)


def csp_of(page: str) -> dict[str, list[str]]:
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    assert policy is not None
    return {name: values for name, *values in (part.split() for part in policy.group(1).split(";"))}


def inline_hashes(page: str) -> set[str]:
    """The CSP hash of each script written inside the page (not the figures' JSON)."""
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    return {"'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'" for s in scripts}


def test_plotly_inline_or_from_its_cdn(tmp_path):
    source = str(FIXTURE_INPUTS["ray2.60-b-rl-actor-oom"])
    pages = {}
    for plotly in ("inline", "cdn"):
        out = tmp_path / f"{plotly}.html"
        result = CliRunner().invoke(main, ["report", source, "-o", str(out), "--plotly", plotly])
        assert result.exit_code == 0, result.output
        pages[plotly] = out.read_text()
    inline, cdn = pages["inline"], pages["cdn"]
    assert get_plotlyjs() in inline and len(inline.encode()) > 3_000_000
    assert get_plotlyjs()[:200] not in cdn and len(cdn.encode()) < 500_000
    url = plotly_cdn_url()
    assert f'<script src="{url}"></script>' in cdn and "<script src=" not in inline
    assert sorted(csp_of(cdn)["script-src"]) == sorted([*inline_hashes(cdn), url])  # that one URL, and our own script
    assert sorted(csp_of(inline)["script-src"]) == sorted(inline_hashes(inline))
    assert csp_of(cdn)["default-src"] == csp_of(inline)["default-src"] == ["'none'"]
    assert figures_of(cdn) == figures_of(inline)
    assert CliRunner().invoke(main, ["report", source, "--plotly", "web"]).exit_code == 2


def test_a_time_a_line_did_not_print_is_told_as_the_interval_its_neighbours_bound(tmp_path):
    """A failure on a line that printed no time lies between the stamps around it: the
    report's rows and hovers and the markdown table say "between A and B", never a lower
    bound marked with a sign."""
    diagnosis = analyze(str(SESSIONS / "ray2.60-v-vllm-cpu-kv-cache"), jobs=1)
    inferred = [e for e in diagnosis.events if e.time_inferred and e.time_latest and e.time_latest != e.time]
    assert inferred
    page = diagnosis.to_html(tmp_path / "r.html").read_text(encoding="utf-8")
    rows = re.findall(r'<tr class="row"[^>]*><td>[^<]*</td><td>([^<]*)</td>', page)
    assert not [r for r in rows if r.endswith("~")]
    assert any(r.startswith("between ") for r in rows)
    table = diagnosis.to_markdown()
    assert "between " in table and "~ |" not in table
