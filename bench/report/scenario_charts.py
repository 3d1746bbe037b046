"""Charts of a scenario's history on its page: how each variant's throughput moved from run to run,
with the steps `history.judge_run` found marked where they happened."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench import fingerprint
from bench.report.chart import Chart, layout, line_shape
from bench.report.history import Step
from bench.report.runs import RunView
from bench.report.summaries import RunSummary, summarize

LONG = 60  # runs from which the trend draws lines and interquartile bands, not markers and whiskers
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")  # plotly's own, made explicit for the bands


def _band(colour: str) -> str:
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},0.15)"


def trend_chart(runs: Sequence[RunSummary | RunView], steps: Sequence[Step] = ()) -> Chart:
    """Throughput per variant across runs of one scenario, oldest to newest, steps marked.

    Over `LONG` runs or more, each variant is a line with its interquartile range as a band: a
    thousand markers and whiskers per variant would take the browser seconds to draw and say
    no more at that width. The runs' labels are written once for every trace (`Chart.shared`).
    """
    chart = Chart("trend", "Throughput over runs",
                  "The headline examples/s (examples of the unobserved timed windows ÷ their "
                  "wall clock) of each variant in each run of this scenario, oldest on the left; "
                  "whiskers (or, over many runs, the shaded band): the interquartile range of its "
                  "windows' examples/s. The axis shows start time and "
                  "commit. ▲ marks a run whose steps got slower than the runs before it and ▼ "
                  "one that got faster, judged as the nightly gate judges a night: against the "
                  "runs of its own machine. A dashed line marks where the machine changed (CPU "
                  "model, flags or count, GPUs).")
    if len(runs) < 2:
        chart.note = "Only one run of this scenario so far; the trend appears from the second."
        return chart
    summaries = [r if isinstance(r, RunSummary) else summarize(r) for r in runs]
    xs = {r.name: f"{r.started_at[:16].replace('T', ' ')}<br>{r.commit}" for r in summaries}
    series: dict[str, list[tuple[str, float, tuple[float, float]]]] = {}
    for run in summaries:
        for vid, (headline, below, above) in run.points.items():
            series.setdefault(vid, []).append((xs[run.name], headline, (below, above)))
    long = len(summaries) >= LONG
    data: list[dict[str, Any]] = []
    for n, (vid, points) in enumerate(series.items()):
        x, y = [p[0] for p in points], [p[1] for p in points]
        colour = COLOURS[n % len(COLOURS)]
        line = {"type": "scatter", "name": vid, "legendgroup": vid, "x": x, "y": y,
                "line": {"color": colour, "width": 1.5 if long else 2},
                "hovertemplate": "headline: %{y:,.0f} examples/s"
                                 "<extra>%{fullData.name}</extra>"}
        if not long:
            data.append({**line, "mode": "lines+markers", "error_y": {
                "type": "data", "symmetric": False, "thickness": 1,
                "array": [p[2][1] for p in points], "arrayminus": [p[2][0] for p in points]}})
            continue
        edge = {"type": "scatter", "mode": "lines", "legendgroup": vid, "showlegend": False,
                "x": x, "line": {"width": 0}, "hoverinfo": "skip"}
        data += [{**edge, "name": f"{vid} p25", "y": [p[1] - p[2][0] for p in points]},
                 {**edge, "name": f"{vid} p75", "y": [p[1] + p[2][1] for p in points],
                  "fill": "tonexty", "fillcolor": _band(colour)},
                 {**line, "mode": "lines"}]
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
    labels = list(xs.values())
    shapes, notes = machine_changes(summaries)
    chart.figure = {"data": data, "layout": layout(
        440, yaxis={"title": {"text": "examples/s (the headline)"}, "rangemode": "tozero"},
        xaxis={"type": "category", "categoryorder": "array", "categoryarray": labels,
               **({"nticks": 12} if long else {})},
        legend={"font": {"size": 10}}, shapes=shapes, annotations=notes)}
    chart.shared = {"runs": labels}
    return chart


def machine_changes(runs: Sequence[RunSummary]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A dashed line before each run whose machine differs from the run before it, and its label:
    the same code runs at another speed there, so a step at the line is the machine's."""
    shapes, notes = [], []
    for i in range(1, len(runs)):
        if not fingerprint.same_machine(runs[i].hardware, runs[i - 1].hardware):
            shapes.append(line_shape("x", "paper", i - 0.5, i - 0.5, 0, 1))
            notes.append({"x": i - 0.5, "xref": "x", "y": 1, "yref": "paper", "yanchor": "bottom",
                          "xanchor": "left", "showarrow": False, "font": {"size": 10},
                          "text": f"machine: {fingerprint.describe_machine(runs[i].hardware)}"})
    return shapes, notes
