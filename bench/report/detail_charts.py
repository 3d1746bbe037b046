"""The charts that look inside a variant: its trace's top ops, its workers side by side (so a
straggler shows), and what measuring it cost (observer and profiler ratios).

Drawn from the records only, with the integrity rules of the step breakdown: op times are shares
of the traced steps applied to the untraced median step, never the profiler's inflated ms.
"""

from __future__ import annotations

import os
from collections import Counter

from bench.record.model import OBSERVER_FLAG_RATIO
from bench.report.chart import Chart, categories_axis, colour, layout, line_shape
from bench.report.derived import (
    STRAGGLER_RATIO,
    TRACE_INFLATION_LIMIT,
    measurement_costs,
    op_shares,
    worker_rows,
)
from bench.report.runs import RunView

TOP_OPS_PER_VARIANT = 5
SLOW = "#d62728"


LABEL_CHARS = 48  # an op's label on the heatmap's axis; its full name is in the hover


def _short(name: str, limit: int = LABEL_CHARS) -> str:
    return name if len(name) <= limit else "…" + name[-(limit - 1):]


def _shared_tail(a: str, b: str) -> int:
    """How many characters `a` and `b` end alike in."""
    return len(os.path.commonprefix([a[::-1], b[::-1]]))


def op_labels(names: list[str], limit: int = LABEL_CHARS) -> list[str]:
    """One label per op name, no two alike: a heatmap's rows are its distinct labels, so ops
    whose cut names collided would be drawn as one row, their cells under the wrong label.

    A long name is cut to its end ("…" and the last characters: where the op's kind is). Names
    that end alike beyond the cut show, before that end, the part where they part: the segment
    (up to the next "/") holding the first character from the end that differs. Labels still
    alike (the names part in more places than a label shows) are the full names."""
    cut = [_short(n, limit) for n in names]
    labels = list(cut)
    for i, name in enumerate(names):
        rivals = [other for other, label in zip(names, cut, strict=True)
                  if label == cut[i] and other != name]
        if not rivals:
            continue
        parts = len(name) - max(_shared_tail(name, other) for other in rivals)
        slash = name.find("/", parts)
        end = min(parts + limit // 4, len(name) if slash < 0 else max(slash, parts + 1))
        start = max(0, end - limit // 2)
        labels[i] = ("…" if start else "") + name[start:end] + "…" + name[-(limit // 2):]
    alike = Counter(labels)
    return [name if alike[label] > 1 else label for name, label in zip(names, labels, strict=True)]


def top_ops_chart(run: RunView) -> Chart:
    chart = Chart("top-ops", "Top ops of each variant's trace",
                  "Each cell: an op's self time as a share of the step (its self time over the "
                  "traced steps' wall time), for the ops among the 5 largest of any variant. "
                  "The tables under the figures give the milliseconds that share is of the "
                  "untraced median step. Ops on "
                  "parallel host threads overlap, so a column can add up to more than 100%. "
                  "The tables under the figures list each variant's top 10.")
    shares = {str(r.variant_id): op_shares(r) for r in run.ok}
    traced = [r for r in run.ok if shares[str(r.variant_id)]]
    if not traced:
        chart.note = ("No variant has an analysed trace (measure.trace_steps = 0, --quick, or the "
                      "analysis failed), so there are no ops to show.")
        return chart
    largest: dict[str, float] = {}
    for rec in traced:
        for op in shares[str(rec.variant_id)][:TOP_OPS_PER_VARIANT]:
            largest[op["name"]] = max(largest.get(op["name"], 0.0), op["share"])
    names = sorted(largest, key=largest.__getitem__, reverse=True)
    ids = [str(r.variant_id) for r in traced]
    by_op = {vid: {op["name"]: op for op in shares[vid]} for vid in ids}
    z = [[100 * by_op[vid][n]["share"] if n in by_op[vid] else None for vid in ids] for n in names]
    chart.figure = {"data": [{
        "type": "heatmap", "x": ids, "y": op_labels(names), "z": z,
        "customdata": [[n] * len(ids) for n in names],
        "colorscale": [[0, "#eef4fb"], [1, "#08306b"]], "zmin": 0, "hoverongaps": False, "xgap": 2, "ygap": 2,
        "text": [[f"{v:.0f}%" if v is not None else "" for v in row] for row in z],
        "texttemplate": "%{text}", "colorbar": {"title": {"text": "% of step"}},
        "hovertemplate": "%{x}<br>%{customdata}<br>%{z:.1f}% of the step<extra></extra>"}],
        "layout": layout(max(320, 140 + 26 * len(names)), xaxis={"type": "category",
                                                                 "tickangle": -30},
                         yaxis=categories_axis(), margin={"l": 10, "r": 10, "t": 20, "b": 160})}
    inflated = [str(r.variant_id) for r in traced
                if (r.profiler_ratio or 0) > TRACE_INFLATION_LIMIT]
    if inflated:
        chart.note = (f"Tracing slowed the traced steps over {TRACE_INFLATION_LIMIT}× for "
                      + ", ".join(inflated) + ": their shares are telling, their ms less so.")
    return chart


def workers_chart(run: RunView) -> Chart:
    chart = Chart("workers", "Workers of each multi-worker variant",
                  "One bar per worker: its median step time in ms; whiskers from its 5th to 95th "
                  f"percentile step. Red: a worker over {STRAGGLER_RATIO:.2f}× the fastest "
                  "worker's median (a straggler); every worker of a synchronous all-reduce waits "
                  "for the slowest, so a straggler also shows as collective time on the others.")
    recs = [r for r in run.ok if worker_rows(r)]
    if not recs:
        chart.note = "No MultiWorker or ParameterServer variant in this run reported per-worker steps."
        return chart
    labels, medians, low, high, colours, text = [], [], [], [], [], []
    for rec in recs:
        for row in worker_rows(rec):
            labels.append(f"{rec.variant_id} · {row['task']}")
            medians.append(row["median_ms"])
            low.append(row["median_ms"] - row["p5_ms"])
            high.append(row["p95_ms"] - row["median_ms"])
            colours.append(SLOW if row["vs_fastest"] > STRAGGLER_RATIO else colour(rec))
            text.append(f"{row['median_ms']:.1f} ms  ×{row['vs_fastest']:.2f}")
    chart.figure = {"data": [{
        "type": "bar", "orientation": "h", "y": labels, "x": medians, "text": text,
        "textposition": "inside", "insidetextanchor": "start", "marker": {"color": colours},
        "error_x": {"type": "data", "symmetric": False, "array": high, "arrayminus": low,
                    "color": "#333333", "thickness": 1.2},
        "hovertemplate": "%{y}<br>median %{x:.2f} ms<extra></extra>"}],
        "layout": layout(max(260, 110 + 30 * len(labels)), showlegend=False,
                         xaxis={"title": {"text": "ms per step (median, p5–p95)"}},
                         yaxis=categories_axis())}
    return chart


def measurement_cost_chart(run: RunView) -> Chart:
    chart = Chart("measurement-cost", "What measuring cost each variant",
                  "Bars grow from 1.0 (no cost); a red outline marks a ratio over its limit "
                  "(dashed lines). Observer: the timed windows (a hook and a host "
                  "sync every step) ÷ a block run unobserved, per step; over "
                  f"{OBSERVER_FLAG_RATIO:g}× (and faster per step than 95% of the observed "
                  "stretches as long, so beyond the machine's noise) the per-step observation "
                  "itself slows the step. "
                  "Profiler: traced ÷ untraced median step; over "
                  f"{TRACE_INFLATION_LIMIT:g}× the trace's own milliseconds overstate the step, "
                  "which is why the breakdown and top ops are shown as shares.")
    costs = {str(r.variant_id): measurement_costs(r) for r in run.ok}
    ids = [vid for vid, c in costs.items() if c["observer"] or c["profiler"]]
    if not ids:
        chart.note = "No variant recorded an observer or profiler ratio."
        return chart
    ratios = [c[k] for vid in ids for k in ("observer", "profiler") if (c := costs[vid])[k]]
    span = [min(0.95, min(ratios) - 0.05), max(TRACE_INFLATION_LIMIT, max(ratios)) * 1.12 + 0.05]
    data = []
    for key, name, base_colour, limit in (("observer", "observer ×", "#4c78a8", OBSERVER_FLAG_RATIO),
                                          ("profiler", "profiler ×", "#f58518",
                                           TRACE_INFLATION_LIMIT)):
        values = [costs[vid][key] for vid in ids]
        if all(v is None for v in values):  # e.g. --quick: nothing traced, no profiler bars
            continue
        over = ([costs[vid]["observer_flagged"] for vid in ids] if key == "observer" else
                [v is not None and v > limit for v in values])
        data.append({
            "type": "bar", "orientation": "h", "name": name, "y": ids, "base": 1.0,
            "x": [v - 1.0 if v is not None else None for v in values],
            "marker": {"color": base_colour, "opacity": [1.0 if o else 0.55 for o in over],
                       "line": {"color": SLOW, "width": [2.5 if o else 0 for o in over]}},
            "text": [(f"×{v:.2f}" + (" over the limit" if o else "")) if v is not None else ""
                     for v, o in zip(values, over, strict=True)],
            "textposition": "outside", "customdata": values, "cliponaxis": False,
            "hovertemplate": "%{y}<br>" + name + " %{customdata:.3f}<extra></extra>"})
    chart.figure = {"data": data, "layout": layout(
        max(300, 120 + 56 * len(ids)), barmode="group", bargap=0.35,
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"},
        xaxis={"title": {"text": "ratio (1.0 = measuring costs nothing)"}, "range": span},
        yaxis=categories_axis(),
        shapes=[line_shape("x", "paper", x, x, 0, 1, colour_=c)
                for x, c in ((1.0, "#333333"), (OBSERVER_FLAG_RATIO, "#4c78a8"),
                             (TRACE_INFLATION_LIMIT, "#f58518"))])}
    return chart


def detail_charts(run: RunView) -> list[Chart]:
    return [top_ops_chart(run), workers_chart(run), measurement_cost_chart(run)]
