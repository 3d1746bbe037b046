"""The charts of a run with a `[target]`: each variant's curves (the metric against examples seen
and against seconds of training), and examples/s against time to target, which shows where the
fastest per example is not the fastest to a trained model. None for a run without a target."""

from __future__ import annotations

from typing import Any

from bench.record.model import VariantRecord
from bench.report.chart import Chart, colour, layout, line_shape
from bench.report.runs import RunView
from bench.report.targets import target_rows

_DASHES = ("solid", "dot", "dash", "longdash", "dashdot", "longdashdot")


def _with_target(run: RunView) -> list[VariantRecord]:
    return [r for r in run.records if r.ok and r.counts_as_variant and r.target is not None
            and r.target.status == "ok"]


def curves_chart(run: RunView, against: str) -> Chart:
    """The metric at each evaluation, every seed a line, against examples seen or seconds."""
    by_examples = against == "examples"
    chart = Chart(f"target-curves-{against}",
                  "Training curves: " + ("metric against examples seen" if by_examples else
                                        "metric against seconds of training"),
                  "One line per variant and seed: the metric on the held-out split at each "
                  "evaluation, " + ("against the training examples seen (the same points for "
                                    "every global batch: a property of the algorithm, the same "
                                    "on any machine)." if by_examples else
                                    "against the seconds of training so far, evaluation "
                                    "apart (this machine's).") +
                  " The dashed line is the target; hover for the values.")
    recs = _with_target(run)
    if not recs:
        chart.note = "No variant trained to the target."
        return chart
    traces: list[dict[str, Any]] = []
    for index, rec in enumerate(recs):
        for seed in rec.target.seeds or []:
            points = seed.curve or []
            traces.append({
                "type": "scatter", "mode": "lines+markers",
                "x": [p.examples if by_examples else p.seconds for p in points],
                "y": [p.value for p in points],
                # one legend entry a variant, which shows and hides all its seeds' lines
                "name": rec.variant_id, "legendgroup": rec.variant_id,
                "showlegend": seed.seed == rec.target.seeds[0].seed,
                "line": {"color": colour(rec), "dash": _DASHES[index % len(_DASHES)]},
                "hovertemplate": f"{rec.variant_id}<br>seed {seed.seed}<br>%{{x:,.4g}} "
                                 f"{'examples' if by_examples else 's'}: %{{y:.4g}}"
                                 "<extra></extra>"})
    target = recs[0].target
    right = max((x for t in traces for x in t["x"] if x is not None), default=1.0)
    chart.figure = {"data": traces, "layout": layout(
        420, xaxis={"title": {"text": "examples seen" if by_examples else
                              "seconds of training"}, "rangemode": "tozero"},
        yaxis={"title": {"text": f"{target.metric} ({target.eval_split})"}},
        legend={"orientation": "h", "y": -0.2},
        shapes=[line_shape("x", "y", 0, right, target.value or 0, target.value or 0)])}
    return chart


def speed_against_target_chart(run: RunView) -> Chart:
    """Examples/s (x) against time to target (y): up-right is fast per example but slow to a
    trained model."""
    chart = Chart("target-speed", "Examples/s against time to target",
                  "One dot per variant: its headline examples/s (x) and its median measured "
                  "seconds of training to the target (y), whiskers for the seeds' range. A dot "
                  "to the right that sits higher than another is faster per example but slower "
                  "to a trained model. Each dot is labelled with its rank in the time-to-target "
                  "table (hover for its name). Crosses: the projected time (examples to target "
                  "÷ examples/s).")
    recs = [r for r in _with_target(run) if r.headline and r.target.time_to_target is not None]
    if not recs:
        chart.note = "No variant both measured examples/s and reached the target."
        return chart
    seconds = [r.target.seconds for r in recs]
    rank = {row.variant_id: i for i, row in enumerate(target_rows(run.records), start=1)}
    chart.figure = {"data": [
        {"type": "scatter", "mode": "markers+text", "name": "measured",
         "x": [r.headline for r in recs], "y": [s.median for s in seconds],
         "text": [str(rank.get(str(r.variant_id), "")) for r in recs],
         "customdata": [str(r.variant_id) for r in recs], "textposition": "middle right",
         "marker": {"size": 11, "color": [colour(r) for r in recs]},
         "error_y": {"type": "data", "symmetric": False,
                     "array": [(s.high or s.median) - s.median for s in seconds],
                     "arrayminus": [s.median - (s.low or s.median) for s in seconds]},
         "hovertemplate": "%{customdata} (rank %{text})<br>%{x:,.0f} examples/s<br>"
                          "%{y:.2f} s to target"
                          "<extra></extra>"},
        {"type": "scatter", "mode": "markers", "name": "projected",
         "x": [r.headline for r in recs], "y": [r.target.projected_s for r in recs],
         "marker": {"symbol": "x", "size": 9, "color": "#888888"},
         "hovertemplate": "projected %{y:.2f} s<extra></extra>"}],
        "layout": layout(420, xaxis={"title": {"text": "headline examples/s"}},
                         yaxis={"title": {"text": "seconds to target"}, "rangemode": "tozero"},
                         legend={"orientation": "h", "y": -0.2})}
    return chart


def target_charts(run: RunView) -> list[Chart]:
    """The target's charts (none for a run without a [target])."""
    if not any(r.target is not None for r in run.records):
        return []
    return [curves_chart(run, "examples"), curves_chart(run, "seconds"),
            speed_against_target_chart(run)]
