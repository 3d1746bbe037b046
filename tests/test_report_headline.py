"""One headline everywhere: every chart, trend, table, export and terminal line that shows a
variant's examples/s shows the headline (examples ÷ wall clock of the unobserved windows), and
the typical-step rate (global batch ÷ median observed step) only beside it, named as such.

The records are schema 2 with a headline well below the typical step, as a variant whose
unobserved windows ran slower than its median observed step gives: a chart that plotted the
typical-step rate would then read 20% off the table. Fast: no TensorFlow.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bench.record.model import VariantRecord
from bench.report.export import to_pytest_benchmark
from bench.report.run_charts import run_charts
from bench.report.runs import load_run
from bench.report.scenario_charts import trend_chart
from bench.report.site import render_site
from bench.report.tables import COLUMNS
from bench.report.terminal import render_outcome_line, render_summary
from tests.fixtures.report_runs import standard_records, write_run

SLOWER = 0.8  # the unobserved windows' pace against the typical observed step


def with_headline(record: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """`record` as schema 2 writes it, its unobserved windows `SLOWER` than its typical step
    (each window a little apart from the others), so its headline and typical step differ."""
    if record["status"] != "ok":
        return {**record, "schema": 2}
    thr = dict(record["throughput"])
    steps = len(record["samples"]["timed"][0])
    gb = record["effective"]["global_batch"]
    rates = [thr["median"] * SLOWER * (1 + 0.02 * ((seed + i) % 3 - 1))
             for i in range(len(record["samples"]["timed"]))]
    window_s = [gb * steps / rate for rate in rates]
    thr.update(headline=gb * steps * len(rates) / sum(window_s), per_repeat=rates)
    return {**record, "schema": 2, "throughput": thr,
            "measurement": {"window_steps": steps, "window_s": window_s}}


def headline_records(scenario: str = "report_test") -> list[dict[str, Any]]:
    return [with_headline(r, i) for i, r in enumerate(standard_records(scenario))]


@pytest.fixture
def records() -> list[VariantRecord]:
    return [VariantRecord.load(r) for r in headline_records()]


def test_the_records_tell_the_headline_from_the_typical_step(records: list[VariantRecord]
                                                             ) -> None:
    ok = [r for r in records if r.ok]
    assert len(ok) == 4 and all(r.schema_version == 2 for r in ok)
    for rec in ok:
        assert rec.headline == pytest.approx(SLOWER * rec.typical_step_rate, rel=0.02)
        assert min(rec.window_rates) < rec.headline < max(rec.window_rates)


def _table(page: str) -> dict[str, list[str]]:
    """The run page's table of every figure: variant id -> its cells' texts."""
    rows = re.findall(r'<tr class="status-[a-z]+">(.*?)</tr>', page, re.S)
    cells = [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
             for row in rows]
    return {row[0]: row for row in cells}


def _figures(page: str) -> dict[str, dict[str, Any]]:
    found = re.findall(r'<script type="application/json" data-figure="([^"]+)">(.*?)</script>',
                       page, re.S)
    return {fid: json.loads(body) for fid, body in found}


def test_the_run_page_charts_and_table_show_the_headline(tmp_path: Path,
                                                         records: list[VariantRecord]) -> None:
    write_run(tmp_path / "results", "report_test-20261122T051803Z", headline_records())
    render_site([tmp_path / "results"], tmp_path / "site")
    page = (tmp_path / "site" / "run-report_test-20261122T051803Z.html").read_text()
    table, figures = _table(page), _figures(page)
    by_id = {str(r.variant_id): r for r in records if r.ok}
    column, typical_column = COLUMNS.index("examples/s"), COLUMNS.index("typical step ex/s")
    throughput = figures["throughput"]["data"]
    bars, dots, ticks = throughput
    assert bars["y"] == list(by_id)
    for vid, bar, text, tick in zip(bars["y"], bars["x"], bars["text"], ticks["x"], strict=True):
        rec = by_id[vid]
        assert bar == pytest.approx(rec.headline, rel=1e-3)  # not the typical step's rate
        assert text == table[vid][column] == f"{rec.headline:,.0f}"
        assert tick == pytest.approx(rec.typical_step_rate, rel=1e-3)
        assert table[vid][typical_column] == f"{rec.typical_step_rate:,.0f}"
    assert ticks["name"] == "typical step" and all(w > 0 for w in ticks["error_x"]["arrayminus"])
    # the dots are the headline's own windows: the unobserved ones
    assert dots["x"] == pytest.approx([x for r in by_id.values() for x in r.window_rates],
                                      rel=1e-3)
    hover = bars["hovertext"][0]
    assert hover.startswith(f"headline: {by_id[bars['y'][0]].headline:,.0f} examples/s")
    assert "typical step: " in hover
    scaling = figures["scaling"]["data"][0]  # mirrored, 1 and 2 replicas
    assert scaling["y"] == pytest.approx([by_id[v].headline for v in
                                          ("mirrored-r1-fit-float32-gb64",
                                           "mirrored-r2-fit-float32-gb128")], rel=1e-3)


def test_the_trend_plots_the_headline_with_its_windows_spread(tmp_path: Path,
                                                              records: list[VariantRecord]
                                                              ) -> None:
    runs = [load_run(write_run(tmp_path, f"report_test-2026112{i}T051803Z", headline_records()))
            for i in (1, 2)]
    chart = trend_chart(runs)
    assert chart.figure is not None
    lines = {t["name"]: t for t in chart.figure["data"] if t.get("mode") == "lines+markers"}
    for rec in (r for r in records if r.ok):
        line = lines[str(rec.variant_id)]
        assert line["y"] == pytest.approx([rec.headline] * 2, rel=1e-3)
        rates = sorted(rec.window_rates)  # three windows: the quartiles sit between them
        assert line["error_y"]["arrayminus"][0] == pytest.approx(
            rec.headline - (rates[0] + rates[1]) / 2, rel=1e-3)
        assert line["error_y"]["array"][0] == pytest.approx(
            (rates[1] + rates[2]) / 2 - rec.headline, rel=1e-3)
    assert "headline" in chart.figure["layout"]["yaxis"]["title"]["text"]


def test_no_chart_of_a_run_plots_the_typical_step_as_the_variant_s_figure(
        tmp_path: Path, records: list[VariantRecord]) -> None:
    """Wherever a chart draws a value per variant, it is the headline; the typical-step rate
    is only the marks beside the bars (a scatter named for it), never a chart's bars or line."""
    run = load_run(write_run(tmp_path, "r", headline_records()))
    typical = {round(r.typical_step_rate or 0.0) for r in records if r.ok}
    for chart in run_charts(run):
        for trace in (chart.figure or {}).get("data", []):
            if trace.get("name") == "typical step" and trace["type"] == "scatter":
                continue
            values = [v for axis in ("x", "y") for v in trace.get(axis) or []
                      if isinstance(v, float)]
            assert not typical & {round(v) for v in values}, (chart.id, trace.get("name"))


def test_export_and_terminal_give_the_headline(tmp_path: Path,
                                               records: list[VariantRecord]) -> None:
    run_dir = write_run(tmp_path, "r", headline_records())
    exported = {b["name"]: b["extra_info"] for b in to_pytest_benchmark(run_dir)["benchmarks"]}
    console = Console(record=True, width=250)
    render_summary(console, records)
    text = console.export_text()
    for rec in (r for r in records if r.ok):
        info = exported[rec.variant_id]
        assert info["examples_per_sec"] == rec.headline
        assert info["typical_step_examples_per_sec"] == rec.typical_step_rate
        line = render_outcome_line(rec)
        assert f"{rec.headline:,.0f} ± " in line and f"{rec.typical_step_rate:,.0f}" not in line
        assert f"{rec.headline:,.0f} ± " in text
