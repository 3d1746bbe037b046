"""Charts of a scenario's history on its page: how each variant's throughput moved from run to run,
with the steps `history.detect_steps` found marked where they happened."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.report.chart import Chart, layout
from bench.report.history import Step
from bench.report.runs import RunView
from bench.report.summaries import RunSummary, summarize


def trend_chart(runs: Sequence[RunSummary | RunView], steps: Sequence[Step] = ()) -> Chart:
    """Throughput per variant across runs of one scenario, oldest to newest, steps marked."""
    chart = Chart("trend", "Throughput over runs",
                  "Median examples/s of each variant in each run of this scenario, oldest on the "
                  "left; whiskers: interquartile range over steps. The axis shows start time and "
                  "commit. ▲ marks a run whose steps got slower than the previous run's and ▼ one "
                  "that got faster, judged as `bench compare` judges them.")
    if len(runs) < 2:
        chart.note = "Only one run of this scenario so far; the trend appears from the second."
        return chart
    summaries = [r if isinstance(r, RunSummary) else summarize(r) for r in runs]
    xs = {r.name: f"{r.started_at[:16].replace('T', ' ')}<br>{r.commit}" for r in summaries}
    series: dict[str, list[tuple[str, float, tuple[float, float]]]] = {}
    for run in summaries:
        for vid, (median, below, above) in run.points.items():
            series.setdefault(vid, []).append((xs[run.name], median, (below, above)))
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines+markers", "name": vid, "legendgroup": vid,
         "x": [p[0] for p in points], "y": [p[1] for p in points],
         "error_y": {"type": "data", "symmetric": False, "thickness": 1,
                     "array": [p[2][1] for p in points], "arrayminus": [p[2][0] for p in points]},
         "hovertemplate": "%{y:,.0f} examples/s<extra>%{fullData.name}</extra>"}
        for vid, points in series.items()]
    at = {(x, vid): y for vid, points in series.items() for x, y, _ in points}
    for status, symbol, col in (("regression", "triangle-up", "#cf222e"),
                                ("improvement", "triangle-down", "#1a7f37")):
        marked = [s for s in steps if s.verdict.status == status
                  and (xs.get(s.run), s.variant_id) in at]
        if marked:
            data.append({"type": "scatter", "mode": "markers", "name": f"{status}s",
                         "x": [xs[s.run] for s in marked],
                         "y": [at[(xs[s.run], s.variant_id)] for s in marked],
                         "text": [f"{s.variant_id}<br>{s.text}" for s in marked],
                         "hovertemplate": "%{text}<extra></extra>",
                         "marker": {"symbol": symbol, "size": 14, "color": col,
                                    "line": {"color": "#ffffff", "width": 1}}})
    chart.figure = {"data": data, "layout": layout(
        440, yaxis={"title": {"text": "examples/s"}, "rangemode": "tozero"},
        xaxis={"type": "category", "categoryorder": "array", "categoryarray": list(xs.values())},
        legend={"font": {"size": 10}})}
    return chart
