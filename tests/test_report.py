"""The HTML report from run directories: pages, charts, words, escaping, offline assets, errors.

Fast: records are written in bench's schema by tests/fixtures/report_runs.py. The real-run,
real-browser check is tests/test_report_browser.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.errors import BenchError
from bench.record.model import load_all
from bench.report.chart import html_safe_json
from bench.report.narrative import summarize_run
from bench.report.run_charts import run_charts
from bench.report.runs import load_run
from bench.report.scenario_charts import trend_chart
from bench.report.site import render_site
from tests.browser import need_chromium, open_page
from tests.conftest import bench
from tests.fixtures.report_runs import (
    ENVIRONMENT,
    cluster_record,
    ok_record,
    problem_record,
    standard_records,
    variant,
    write_run,
)

FIGURE = re.compile(r'<script type="application/json" data-figure="([^"]+)">(.*?)</script>', re.S)


def figures_in(html: str) -> dict[str, dict]:
    return {fid: json.loads(body) for fid, body in FIGURE.findall(html)}


@pytest.fixture
def site(tmp_path: Path) -> Path:
    write_run(tmp_path / "results", "report_test-20261122T051803Z", standard_records(),
              description="all charts")
    render_site([tmp_path / "results"], tmp_path / "site")
    return tmp_path / "site"


def test_run_page_has_every_chart_with_the_run_data(site: Path) -> None:
    html = (site / "run-report_test-20261122T051803Z.html").read_text()
    figs = figures_in(html)
    assert set(figs) == {"throughput", "scaling", "breakdown", "distribution", "timeline",
                         "precision", "top-ops", "measurement-cost"}  # no workers: no cluster
    bars = figs["throughput"]["data"][0]
    assert bars["y"] == ["default-r1-fit-float32-gb64", "default-r1-fit-mixed_bfloat16-gb64",
                         "mirrored-r1-fit-float32-gb64", "mirrored-r2-fit-float32-gb128"]
    assert bars["x"][0] == pytest.approx(64 / 0.004, rel=0.1)
    typical = figs["throughput"]["data"][2]  # the typical step beside each bar
    assert all(lo > 0 for lo in typical["error_x"]["arrayminus"])  # spread over steps is drawn
    assert len(figs["throughput"]["data"][1]["x"]) == 4 * 3  # one dot per repeat
    assert bars["marker"]["line"]["width"][:2] == [2.5, 2.5]  # baselines outlined
    # headlines (examples over the unobserved windows' clocks), never the typical-step rates
    headline = {r["variant_id"]: r["throughput"]["headline"] for r in standard_records()
                if r["status"] == "ok"}
    speedup = figs["precision"]["data"][0]
    assert speedup["name"] == "mixed_bfloat16"
    assert speedup["y"][0] == pytest.approx(headline["default-r1-fit-mixed_bfloat16-gb64"]
                                            / headline["default-r1-fit-float32-gb64"])
    assert speedup["y"][0] == pytest.approx(0.004 / 0.005, rel=0.05)
    stacked = {t["name"]: t["x"] for t in figs["breakdown"]["data"]}
    assert set(stacked) == {"input", "compute", "collective", "other"}
    efficiency = figs["scaling"]["data"][2]["y"]  # mirrored: 1 and 2 replicas
    assert efficiency[0] == pytest.approx(1.0)
    assert efficiency[1] == pytest.approx(headline["mirrored-r2-fit-float32-gb128"]  # 4 digits
                                          / (2 * headline["mirrored-r1-fit-float32-gb64"]), abs=1e-4)
    assert "weak scaling" in html


def test_every_figure_is_valid_plotly(tmp_path: Path) -> None:
    """Figures are plain dicts for speed; plotly's own validator checks every property here."""
    import plotly.graph_objects as go

    run = load_run(write_run(tmp_path, "r", [*standard_records(), cluster_record()]))
    charts = [*run_charts(run), trend_chart([run, run])]
    assert all(chart.rendered for chart in charts)
    for chart in charts:
        go.Figure(chart.figure)  # raises ValueError naming any invalid property


def test_summary_names_the_fastest_the_scaling_and_the_problems(tmp_path: Path) -> None:
    records = standard_records()
    run = load_run(write_run(tmp_path, "r", records))
    text = "\n".join(summarize_run(run))
    assert (f"Fastest: default-r1-fit-float32-gb64 at {records[0]['throughput']['headline']:,.0f} "
            "examples/s") in text
    assert "Best scaling: mirrored-r2-fit-float32-gb128, efficiency 0.3" in text
    assert "logical CPU devices" in text  # simulated replicas explained
    assert "No variant is input-bound" in text
    assert "1 failed: mirrored-r2-nccl-fit-float32-gb128 — InvalidArgumentError" in text
    assert "1 skipped: tpu-r1-fit-float32-gb64 — no TPU" in text
    assert "mixed_bfloat16-gb64 ×0.8" in text
    assert re.search(r"MFU \(achieved FLOP/s over the measured matmul peak: float32 300 GFLOP/s\): "
                     r"\d+\.\d% at best", text)


def test_an_mfu_above_the_peak_is_called_out_not_reported_as_a_figure(tmp_path: Path) -> None:
    """A step faster than the measured peak means the peak read low: the summary says so and
    names the cache to delete, and the terminal line marks the variant."""
    from bench.record.model import VariantRecord
    from bench.report.terminal import render_outcome_line

    fast, slow = (ok_record(variant(vid), 0.004) for vid in ("default-r1-fit-float32-gb64",
                                                            "default-r1-ctl-float32-gb64"))
    fast["utilization"].update(mfu=1.07, peak={"dtype": "float32", "cache": "/c/peak.json"})
    slow["utilization"]["mfu"] = 0.4
    run = load_run(write_run(tmp_path, "r", [fast, slow]))
    text = "\n".join(summarize_run(run))
    assert ("Above 100% on 1 (default-r1-fit-float32-gb64): a step cannot outrun the device's peak"
            in text)
    assert "delete /c/peak.json to measure it again" in text
    lines = {vid: render_outcome_line(VariantRecord.load(r)) for vid, r in
             (("fast", fast), ("slow", slow))}
    assert "107.0% MFU  [yellow](above the measured peak" in lines["fast"]
    assert "above the measured peak" not in lines["slow"]


def test_an_input_bound_variant_is_called_out(tmp_path: Path) -> None:
    v = variant("default-r1-fit-float32-gb64")
    run = load_run(write_run(tmp_path, "r", [ok_record(v, 0.010, input_ms=4.0)]))
    assert any(line.startswith("Input-bound: default-r1-fit-float32-gb64 (40% of the step")
               for line in summarize_run(run))


def test_hostile_text_is_escaped_everywhere(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    v = variant("default-r1-fit-float32-gb64", scenario=evil)
    records = [ok_record(v, 0.004),
               problem_record(variant("mirrored-r2-fit-float32-gb128", "mirrored", 2, scenario=evil),
                              "failed", "<img src=x onerror=alert(2)>", "</script><b>boom</b>")]
    write_run(tmp_path / "results", "evil", records, description='<b onclick="alert(3)">hi</b>')
    render_site([tmp_path / "results"], tmp_path / "site")
    for page in (tmp_path / "site").glob("*.html"):
        html = page.read_text()
        assert "<script>alert(1)" not in html, page.name
        assert "<img src=x" not in html and "<b onclick" not in html and "<b>boom" not in html
        assert html.count("<script") == html.count("</script>")  # nothing closed a script early
    index = (tmp_path / "site" / "index.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in index
    assert html_safe_json('{"a": "</script>&"}') == '{"a": "\\u003c/script\\u003e\\u0026"}'


def test_site_is_offline_with_one_shared_plotly(site: Path) -> None:
    assets = sorted(p.name for p in (site / "assets").iterdir())
    assert assets == ["plotly-template.js", "plotly.min.js", "report.css", "report.js"]
    assert (site / "assets" / "plotly.min.js").stat().st_size > 1_000_000
    for page in site.glob("*.html"):
        html = page.read_text()
        refs = re.findall(r'(?:src|href)="([^"]*)"', html)
        assert refs, page.name
        assert not [r for r in refs if re.match(r"[a-z]+://", r)], page.name
        assert html.count("plotly.min.js") <= 1 and len(html) < 1_000_000  # not inlined


def test_index_lists_every_run_and_the_scenario_page_shows_the_trend(tmp_path: Path) -> None:
    root = tmp_path / "results"
    write_run(root, "report_test-20261120T000000Z", standard_records(),
              environment={**ENVIRONMENT, "started_at": "2026-11-20T00:00:00+00:00"})
    write_run(root, "report_test-20261121T000000Z", standard_records(slowdown=1.2),
              environment={**ENVIRONMENT, "started_at": "2026-11-21T00:00:00+00:00"})
    write_run(root, "other-20261121T000000Z", standard_records(scenario="other"))
    index = render_site([root], tmp_path / "site").read_text()
    for name in ("report_test-20261120T000000Z", "report_test-20261121T000000Z",
                 "other-20261121T000000Z"):
        assert f'href="run-{name}.html"' in index
    assert index.count('class="num ok" data-sort="4"') == 3
    assert index.count('class="num failed" data-sort="1"') == 3
    assert "0123456789" in index and "testhost" in index
    scenario_page = (tmp_path / "site" / "scenario-report_test.html").read_text()
    trend = figures_in(scenario_page)["trend"]
    series = {t["name"]: t["y"] for t in trend["data"]}
    assert series["default-r1-fit-float32-gb64"][1] < series["default-r1-fit-float32-gb64"][0]
    # The second run is 20% slower in every variant: each is marked as a detected step.
    marked = series["regressions"]
    assert len(marked) == 4 and all(y in [s[1] for s in series.values()] for y in marked)
    assert "Detected steps" in scenario_page
    assert re.search(r"regression: step time ×1\.2\d\d, CI 1\.\d+–1\.\d+, p=", scenario_page)
    assert "improvements" not in series


def test_missing_data_degrades_with_a_note(tmp_path: Path) -> None:
    v = variant("default-r1-fit-float32-gb64")
    records = [ok_record(v, 0.004, input_ms=None),
               problem_record(variant("mirrored-r1-fit-float32-gb64", "mirrored"), "failed", "boom")]
    planned = [r["variant"] for r in records] + [variant("mirrored-r2-fit-float32-gb128", "mirrored", 2)]
    write_run(tmp_path / "results", "r", records, planned=planned)
    render_site([tmp_path / "results"], tmp_path / "site")
    html = (tmp_path / "site" / "run-r.html").read_text()
    assert set(figures_in(html)) == {"throughput", "distribution", "timeline"}
    assert "no replica sweep" in html
    assert "No variant captured a trace (measure.trace_steps = 0, or --quick)" in html
    assert "No mixed-precision variant" in html
    assert "1 not run" in html and "mirrored-r2-fit-float32-gb128" in html


# The figures table's column under `heading`, as the page shows it after each click on it.
_COLUMN = """
const table = document.querySelector("table.sortable.figures");
const heads = Array.from(table.tHead.rows[0].cells, th => th.textContent);
const index = heads.indexOf(arguments[0]);
return Array.from(table.tBodies[0].rows, row => row.cells[index].textContent);
"""


def column_after_clicks(heading: str, clicks: int) -> Callable[[Any], list[tuple[str, list[str]]]]:
    """An `open_page` interaction: click the heading `clicks` times, each time reading its
    aria-sort and the column's cells top to bottom."""
    def interact(driver: Any) -> list[tuple[str, list[str]]]:
        from selenium.webdriver.common.by import By

        [th] = [h for h in driver.find_elements(By.CSS_SELECTOR, "table.sortable.figures thead th")
                if h.get_attribute("textContent") == heading]
        seen = []
        for _ in range(clicks):
            th.click()
            seen.append((th.get_attribute("aria-sort"), driver.execute_script(_COLUMN, heading)))
        return seen
    return interact


def test_table_sorts_numbers_as_numbers(site: Path) -> None:
    html = (site / "run-report_test-20261122T051803Z.html").read_text()
    body = html.split('<table class="sortable figures">')[1].split("</table>")[0]
    assert re.search(r'<td class="num" data-sort="1[56]\d{3}\.\d+">1[56],\d{3}</td>', body)
    # A person clicks "step ms (median)" in Chromium: 4.02 < 12.05 however the text would sort.
    need_chromium()
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", body)
    column = heads.index("step ms (median)")
    cells = [re.findall(r"<td([^>]*)>([^<]*)</td>", row)[column]
             for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body.split("<tbody>")[1], re.S)]
    key = {text: float(m[1]) if (m := re.search(r'data-sort="([^"]+)"', attrs)) else float(text)
           for attrs, text in cells}
    shown = [text for _, text in cells]
    assert sorted(shown) != sorted(shown, key=key.__getitem__)  # as text, 12.05 comes first
    report = open_page(site / "run-report_test-20261122T051803Z.html",
                       interact=column_after_clicks("step ms (median)", 2))
    assert report.js_errors == [] and report.dialogs == []
    (first, ascending), (second, descending) = report.interaction
    assert (first, second) == ("ascending", "descending")
    assert ascending == sorted(shown, key=key.__getitem__)
    assert descending == sorted(shown, key=key.__getitem__, reverse=True)


def test_rerender_updates_and_foreign_folders_are_refused(tmp_path: Path, site: Path) -> None:
    render_site([tmp_path / "results"], site)  # an earlier report: updated in place
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(BenchError, match="is not a bench report"):
        render_site([tmp_path / "results"], foreign)
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_cli_report_prints_the_index_and_rejects_bad_input(tmp_path: Path, site: Path) -> None:
    out = tmp_path / "cli-site"
    proc = bench("report", str(tmp_path / "results"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"report: {out / 'index.html'}" in proc.stdout
    assert (out / "index.html").exists()
    bad = bench("report", str(tmp_path / "nope"))
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [f"error: {tmp_path / 'nope'}: not a bench run directory"]
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = bench("report", str(empty), "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and "no bench run directories" in proc.stderr
    assert "Traceback" not in proc.stderr + bad.stderr


def test_model_labels_tell_frozen_and_fine_tuned_variants_apart() -> None:
    from bench.record.variant import RecordedVariant
    from bench.report.derived import model_label
    labels = [model_label(RecordedVariant.model_validate({"model": m})) for m in (
        {"name": "resnet50", "trainable": "head", "extra_matmul": 0},
        {"name": "resnet50", "trainable": 10, "extra_matmul": 0},
        {"name": "mlp", "trainable": "all", "extra_matmul": 224})]
    assert labels == ["resnet50 (head trainable)", "resnet50 (last 10 trainable)", "mlp +matmul 224"]


def _checkpointed(v: dict, ratio: float, match: bool = True) -> dict:
    rec = ok_record(v, 0.01)
    rec["checkpoint"] = {
        "status": "ok", "api": "CheckpointManager", "every": 10, "keep": 2, "save_count": 4,
        "save_ms": {"median": 41.5, "p95": 60.0}, "size_bytes": 2_826_135.0,
        "restore": {"ms": 37.25, "weights_match": match}, "throughput_ratio": ratio,
        "blocked_share": 0.125}
    return rec


def test_checkpoint_cost_table_summary_and_terminal(tmp_path: Path) -> None:
    from rich.console import Console

    from bench.report.terminal import render_summary

    records = [_checkpointed(variant("default-r1-ctl-float32-gb64", api="ctl"), 0.8),
               _checkpointed(variant("mirrored-r2-ctl-float32-gb128", "mirrored", 2, "ctl"),
                             0.6, match=False),
               ok_record(variant("default-r1-fit-float32-gb64"), 0.01)]  # saved nothing
    results = tmp_path / "results"
    write_run(results, "ck-20261123T000000Z", records)
    html = (render_site([results], tmp_path / "site").parent
            / "run-ck-20261123T000000Z.html").read_text()
    section = html[html.index('id="section-checkpoints"'):]
    section = section[:section.index("</section>")]
    assert section.count("<tr>") == 3  # the heading and the two variants that saved
    assert "default-r1-fit-float32-gb64" not in section
    for text in ("CheckpointManager", "41.5", "2.8 MB", "37.2", "0.80", "NO", "12.5"):
        assert text in section, text
    summary = "\n".join(summarize_run(load_run(results / "ck-20261123T000000Z")))
    assert ("Checkpoints: saving cost most on mirrored-r2-ctl-float32-gb128 (examples/s ×0.60"
            in summary)
    assert "did not give back the saved weights: mirrored-r2-ctl-float32-gb128" in summary
    console = Console(width=250, record=True)
    render_summary(console, load_all(records))
    out = console.export_text()
    assert "Checkpoint cost" in out and "×0.80" in out and "2.8 MB" in out and "12.5%" in out


def test_one_line_per_failure_however_many_variants_gave_it(tmp_path: Path) -> None:
    """Variants that failed alike are one failure: the terminal prints its reason once as the
    variants end and once at the end, naming them all; the report's summary likewise."""
    from rich.console import Console

    from bench.report.terminal import OutcomeLines, render_summary

    same = "InvalidArgumentError: the model's step failed"
    ids = [f"default-r1-fit-float32-gb{16 * (i + 1)}" for i in range(3)]
    records = [problem_record(variant(vid), "failed", same) for vid in ids]
    records.append(problem_record(variant("tpu-r1-fit-float32-gb64", "tpu"), "skipped", "no TPU"))
    loaded = load_all(records)
    lines = OutcomeLines()
    live = [lines(rec) for rec in loaded]
    assert sum(same in line for line in live) == 1 and same in live[0]
    assert live[1].endswith(f"{ids[1]}  [dim](as {ids[0]})[/]")
    assert "no TPU" in live[3]
    console = Console(width=250, record=True)
    render_summary(console, loaded)
    out = console.export_text()
    assert out.count(same) == 1 and f"failed {', '.join(ids)}: {same}" in out
    assert "skipped tpu-r1-fit-float32-gb64: no TPU" in out
    summary = "\n".join(summarize_run(load_run(write_run(tmp_path, "f", records))))
    assert summary.count(same) == 1
    assert f"3 failed: {', '.join(ids)} — {same}" in summary
