"""The charts of one run's page: throughput, scaling, the profiler's step breakdown, step-time
distribution and timeline, and mixed precision against float32, in the order the page shows them
(with the per-worker, top-ops and measurement-cost charts of bench.report.detail_charts)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.record.model import VariantRecord
from bench.report.backends import backend_charts
from bench.report.chart import Chart, categories_axis, colour, layout, line_shape
from bench.report.derived import (
    iqr_whiskers,
    ok_with_throughput,
    precision_pairs,
    run_warming_up,
    step_breakdown,
)
from bench.report.detail_charts import measurement_cost_chart, top_ops_chart, workers_chart
from bench.report.recovery_charts import recovery_charts
from bench.report.runs import RunView
from bench.report.target_charts import target_charts
from bench.scaling import group_key, replicas_of

BREAKDOWN_COLOURS = {"input": "#e45756", "compute": "#4c78a8", "collective": "#f58518",
                     "other": "#bab0ac"}
ROW_PX = 28  # height per variant in horizontal charts


def _height(n: int) -> int:
    return max(260, 110 + ROW_PX * n)


def throughput_chart(run: RunView) -> Chart:
    chart = Chart("throughput", "Throughput by variant",
                  "Bars: the headline examples/s (the examples of the unobserved timed windows ÷ "
                  "their wall clock), the figure of the table and the terminal. Dots: each of "
                  "those windows' examples/s. Ticks: the typical step's examples/s (global batch "
                  "÷ median observed step), whiskers for its interquartile range over the steps. "
                  "Outlined bars are the single-device baselines; hover for the ratio to the "
                  "baseline.")
    recs = ok_with_throughput(run)
    if not recs:
        chart.note = "No variant finished ok, so there is no throughput to show."
        return chart
    labels = [r.variant_id for r in recs]
    headlines = [r.headline or 0.0 for r in recs]
    typical = [r.typical_step_rate or 0.0 for r in recs]
    whiskers = [iqr_whiskers(r) for r in recs]
    is_base = [r.variant.on_baseline_strategy for r in recs]
    hover = []
    for rec, rate, step_rate, base_flag in zip(recs, headlines, typical, is_base, strict=True):
        base = run.baselines.get(str(rec.variant_id))
        ratio = ("baseline" if base_flag else
                 f"×{rec.headline_ratio(base):.2f} vs {base.variant_id}"
                 if base else "no baseline in this run")
        hover.append(f"headline: {rate:,.0f} examples/s<br>typical step: {step_rate:,.0f} "
                     f"examples/s<br>spread ±{rec.spread_pct:.1f}%<br>{ratio}")
    bars = {"type": "bar", "orientation": "h", "y": labels, "x": headlines, "name": "headline",
            "showlegend": False,
            "marker": {"color": [colour(r) for r in recs],
                       "line": {"color": "#111111", "width": [2.5 if b else 0 for b in is_base]}},
            "text": [f"{h:,.0f}" for h in headlines], "textposition": "inside",
            "insidetextanchor": "start", "hovertext": hover, "hoverinfo": "text+y"}
    # The dots and ticks sit on a hidden numeric axis laid over the variants' one (variant i at
    # i), so each carries a small number instead of its variant's id again.
    per_repeat = [(x, i) for i, r in enumerate(recs) for x in r.window_rates]
    dots = {"type": "scatter", "mode": "markers", "name": "each window", "yaxis": "y2",
            "x": [p[0] for p in per_repeat], "y": [p[1] for p in per_repeat],
            "marker": {"color": "#ffffff", "size": 7, "line": {"color": "#111111", "width": 1}},
            "hovertemplate": "window: %{x:,.0f} examples/s<extra></extra>"}
    ticks = {"type": "scatter", "mode": "markers", "name": "typical step", "yaxis": "y2",
             "x": typical, "y": list(range(len(recs))),
             "marker": {"symbol": "line-ns", "size": 16, "color": "#111111",
                        "line": {"color": "#111111", "width": 2}},
             "error_x": {"type": "data", "symmetric": False, "array": [w[1] for w in whiskers],
                         "arrayminus": [w[0] for w in whiskers], "color": "#333333",
                         "thickness": 1.2},
             "hovertemplate": "typical step: %{x:,.0f} examples/s<extra></extra>"}
    chart.figure = {"data": [bars, dots, ticks], "layout": layout(
        _height(len(recs)), legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"},
        xaxis={"title": {"text": "examples/s (bars: the headline; dots: each window; ticks: "
                                 "the typical step)"}},
        **overlaid_variant_axes(len(recs)))}
    return chart


def overlaid_variant_axes(n: int) -> dict[str, Any]:
    """A y axis of n variant ids (first at the top) and a hidden numeric one laid over it where
    variant i sits at i: points drawn on the second carry a small number, not the id again."""
    span = [n - 0.5, -0.5]
    return {"yaxis": {**categories_axis(), "autorange": False, "range": span},
            "yaxis2": {"overlaying": "y", "range": span, "visible": False, "fixedrange": True}}


def _curve_name(rec: VariantRecord) -> str:
    v = rec.variant
    extra = [x for x in (v.cross_device_ops, v.collective) if x not in (None, "auto")]
    return " ".join([str(v.strategy), *extra, str(v.api), str(v.precision)])


def scaling_chart(run: RunView) -> Chart:
    chart = Chart("scaling", "Scaling with replicas",
                  "Left: examples/s against replicas in sync, per strategy; the dashed line is "
                  "ideal scaling (n × the 1-replica figure). Right: scaling efficiency = "
                  "examples/s(n) ÷ (n × examples/s(1)); 1.0 is ideal.")
    groups: dict[tuple[Any, ...], list[VariantRecord]] = {}
    for rec in ok_with_throughput(run):
        groups.setdefault(group_key(rec.variant), []).append(rec)
    curves = [sorted(g, key=replicas_of) for g in groups.values()
              if len({replicas_of(r) for r in g}) > 1 and any(replicas_of(r) == 1 for r in g)]
    if not curves:
        chart.note = ("This run has no replica sweep with a 1-replica point (e.g. `replicas = [1, 2]`"
                      " on one strategy), so there is no scaling to show.")
        return chart
    kinds = sorted({str(g[0].variant.batch_rule) for g in curves})
    described = {"weak": "weak scaling: per-replica batch fixed, global batch grows",
                 "strong": "strong scaling: global batch fixed, split over replicas"}
    chart.title += " — " + "; ".join(described[k] for k in kinds)
    data: list[dict[str, Any]] = []
    most = 1
    for n, group in enumerate(curves):
        name = _curve_name(group[0])
        line = {"color": colour(group[0]), "dash": ("solid", "dot", "dashdot", "longdash")[n % 4]}
        xs = [replicas_of(r) for r in group]
        most = max(most, *xs)
        one = next(r.headline or 0.0 for r in group if replicas_of(r) == 1)
        common = {"type": "scatter", "legendgroup": name, "x": xs}
        data += [
            {**common, "mode": "lines+markers", "name": name, "line": line,
             "y": [r.headline for r in group],
             "hovertemplate": "%{x} replicas: %{y:,.0f} examples/s<extra>" + name + "</extra>"},
            {**common, "mode": "lines", "name": f"{name} (ideal)", "showlegend": False,
             "opacity": 0.45, "line": {"color": line["color"], "dash": "dash", "width": 1},
             "y": [one * x for x in xs], "hovertemplate": "ideal: %{y:,.0f} examples/s<extra></extra>"},
            {**common, "mode": "lines+markers", "name": name, "showlegend": False, "line": line,
             "xaxis": "x2", "yaxis": "y2", "y": [r.scaling_efficiency for r in group],
             "hovertemplate": "%{x} replicas: efficiency %{y:.2f}<extra>" + name + "</extra>"},
        ]
    axis_x = {"title": {"text": "replicas in sync"}, "dtick": 1}
    chart.figure = {"data": data, "layout": layout(
        400, legend={"orientation": "h", "y": -0.25},
        xaxis={**axis_x, "domain": [0, 0.46]}, xaxis2={**axis_x, "domain": [0.54, 1], "anchor": "y2"},
        yaxis={"title": {"text": "examples/s"}, "rangemode": "tozero"},
        yaxis2={"title": {"text": "scaling efficiency"}, "rangemode": "tozero", "anchor": "x2"},
        shapes=[line_shape("x2 domain", "y2", 0, 1, 1.0, 1.0)],
        annotations=[{"text": "ideal", "xref": "x2 domain", "yref": "y2", "x": 0, "y": 1.0,
                      "xanchor": "left", "yanchor": "bottom", "showarrow": False}])}
    return chart


NO_TRACE = "no trace captured"


def missing_breakdown_reason(rec: VariantRecord) -> str:
    trace, analysis = rec.trace, rec.trace_analysis
    if trace is None or not trace.to_json():
        return NO_TRACE
    if trace.status != "captured":
        why = trace.reason or trace.error or ""
        return f"trace {trace.status}: {why}"
    if analysis is None or analysis.status != "ok":
        status = analysis.status if analysis and analysis.status is not None else "missing"
        return f"analysis {status}: {(analysis.error if analysis else None) or ''}"
    return "analysis has no breakdown"


def breakdown_chart(run: RunView) -> Chart:
    chart = Chart("breakdown", "Where the step time goes (from the profiler trace)",
                  "The traced step split into input (waiting for data), compute, collective "
                  "(all-reduce / parameter transfer) and other (host overhead, launch), as shares "
                  "of the step applied to the untraced median step, in ms: the profiler slows the "
                  "steps it traces, so its own milliseconds would overstate the step. From xprof's "
                  "analysis of the traced window after the timed steps; a † marks a variant whose "
                  "traced steps ran over 1.5× slower than untraced.")
    splits = {r.variant_id: step_breakdown(r) for r in run.ok}
    with_breakdown = [r for r in run.ok if splits[r.variant_id]]
    without = [r for r in run.ok if r not in with_breakdown]
    notes = []
    by_reason: dict[str, list[str]] = {}
    for r in without:
        by_reason.setdefault(missing_breakdown_reason(r).strip().rstrip(":"), []).append(
            str(r.variant_id))
    if not with_breakdown and list(by_reason) == [NO_TRACE]:
        notes.append("No variant captured a trace (measure.trace_steps = 0, or --quick), so "
                     "there is no breakdown.")
    elif by_reason:
        notes.append("No breakdown for: " + "; ".join(
            f"{', '.join(vids)} ({reason})" for reason, vids in by_reason.items()))
    inflated = [f"{vid} ({split['profiler_ratio']:.1f}×)" for vid, split in splits.items()
                if split and split["inflated"]]
    if inflated:
        notes.append("Tracing slowed the traced steps of " + ", ".join(inflated) + ": read their "
                     "shares, not the traced milliseconds.")
    chart.note = " ".join(notes) or chart.note
    if not with_breakdown:
        return chart
    split_of = {str(r.variant_id): splits[r.variant_id] or {} for r in with_breakdown}
    labels = [vid + (" †" if split["inflated"] else "") for vid, split in split_of.items()]
    data = [{"type": "bar", "orientation": "h", "name": part, "y": labels,
             "x": [split["scaled_ms"][part] for split in split_of.values()],
             "customdata": [100 * split["shares"][part] for split in split_of.values()],
             "marker": {"color": col},
             "hovertemplate": "%{y}<br>" + part + ": %{customdata:.1f}% of the step, "
                              "%{x:.3f} ms<extra></extra>"}
            for part, col in BREAKDOWN_COLOURS.items()]
    chart.figure = {"data": data, "layout": layout(
        _height(len(labels)), barmode="stack",
        xaxis={"title": {"text": "ms per untraced step"}},
        legend={"orientation": "h", "y": 1.08}, yaxis=categories_axis())}
    return chart


def _sampled(run: RunView, chart: Chart) -> list[VariantRecord]:
    """Ok records that kept per-step samples; without any, the chart gets a note instead."""
    recs = [r for r in run.ok if r.timed_steps]
    if not recs:
        chart.note = "No per-step samples in this run."
    return recs


def box_of(samples_ms: list[float]) -> dict[str, Any]:
    """A box plot's figures of the samples (quartiles, whiskers at the farthest samples within
    1.5 IQR, as plotly draws them) and the samples beyond the whiskers: the page carries these,
    not every step, which the timeline already holds."""
    steps = np.asarray(samples_ms, dtype=float)
    q1, median, q3 = (float(x) for x in np.percentile(steps, [25, 50, 75]))
    reach = 1.5 * (q3 - q1)
    inside = steps[(steps >= q1 - reach) & (steps <= q3 + reach)]
    return {"q1": q1, "median": median, "q3": q3, "lowerfence": float(inside.min()),
            "upperfence": float(inside.max()),
            "outliers": steps[(steps < q1 - reach) | (steps > q3 + reach)].tolist()}


def distribution_chart(run: RunView) -> Chart:
    chart = Chart("distribution", "Step-time distribution",
                  "Every timed step of every repeat, in ms (log scale). Box: quartiles and median; "
                  "whiskers: 1.5 × IQR; points beyond them are slow steps worth a look.")
    recs = _sampled(run, chart)
    if not recs:
        return chart
    data: list[dict[str, Any]] = []
    for i, rec in enumerate(recs):
        box = box_of([s * 1e3 for s in rec.timed_steps])
        name = str(rec.variant_id)
        data.append({"type": "box", "orientation": "h", "name": name, "y": [name],
                     **{k: [box[k]] for k in ("q1", "median", "q3", "lowerfence", "upperfence")},
                     "marker": {"color": colour(rec), "size": 3}, "line": {"width": 1.2}})
        if box["outliers"]:  # on the hidden numeric axis over the variants' (variant i at i)
            data.append({"type": "scatter", "mode": "markers", "name": name, "yaxis": "y2",
                         "x": box["outliers"], "y0": i, "dy": 0.000001,
                         "marker": {"color": colour(rec), "size": 3},
                         "hovertemplate": "%{x:.3f} ms<extra>" + name + "</extra>"})
    chart.figure = {"data": data, "layout": layout(
        _height(len(recs)), showlegend=False,
        xaxis={"title": {"text": "ms per step"}, "type": "log"}, **overlaid_variant_axes(len(recs)))}
    return chart


def timeline_chart(run: RunView) -> Chart:
    chart = Chart("timeline", "Step time over the run",
                  "Each variant's step times in order, in ms (log scale): warmup steps left of 0 "
                  "(shaded), then the timed repeats back to back (dotted lines); × marks where "
                  "bench found the series settled. Look for a slow tail that has not settled and "
                  "for isolated stragglers. Click legend entries to hide or isolate variants.")
    recs = _sampled(run, chart)
    if not recs:
        return chart
    data: list[dict[str, Any]] = []
    longest_warmup = 0
    warming = run_warming_up(run)
    for rec in recs:
        warmup = rec.warmup_steps
        longest_warmup = max(longest_warmup, len(warmup))
        timed = rec.timed_steps
        data.append({"type": "scatter", "mode": "lines", "name": rec.variant_id,
                     "legendgroup": rec.variant_id,
                     "x0": -len(warmup), "dx": 1,  # step numbers: from the first warmup step on
                     "y": [s * 1e3 for s in [*warmup, *timed]],
                     "line": {"color": colour(rec), "width": 1},
                     "hovertemplate": "step %{x}: %{y:.2f} ms<extra>%{fullData.name}</extra>"})
        settle = warming.get(str(rec.variant_id), 0)
        if 0 < settle < len(timed):
            data.append({"type": "scatter", "mode": "markers", "showlegend": False,
                         "legendgroup": rec.variant_id, "x": [settle], "y": [timed[settle] * 1e3],
                         "name": f"{rec.variant_id}: steady from here",
                         "marker": {"symbol": "x", "size": 9, "color": colour(rec)},
                         "hovertemplate": "steady state from timed step %{x}<extra></extra>"})
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    if longest_warmup:
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": -longest_warmup - 0.5,
                       "x1": -0.5, "y0": 0, "y1": 1, "fillcolor": "#999999", "opacity": 0.12,
                       "line": {"width": 0}})
        annotations.append({"text": "warmup", "xref": "x", "yref": "paper",
                            "x": -longest_warmup - 0.5, "y": 1, "xanchor": "left",
                            "showarrow": False})
    edges, edge = [], 0
    for window in recs[0].timed_windows[:-1]:
        edge += len(window)
        edges.append(edge - 0.5)
    chart.figure = {"data": data, "layout": layout(
        460, xaxis={"title": {"text": "step (0 = first timed step)"},
                    "minor": {"tickvals": edges, "showgrid": True, "griddash": "dot",
                              "gridcolor": "#999999", "ticks": ""}},
        yaxis={"title": {"text": "ms per step"}, "type": "log"}, legend={"font": {"size": 10}},
        shapes=shapes, annotations=annotations)}
    return chart


def precision_chart(run: RunView) -> Chart:
    chart = Chart("precision", "Mixed precision against float32",
                  "Speed-up = examples/s with the mixed policy ÷ examples/s with float32, for "
                  "variants that differ only in precision. Above 1: the mixed policy is faster.")
    pairs = precision_pairs(run.records)
    if not pairs:
        mixed = [str(r.variant_id) for r in run.records if r.variant.precision != "float32"]
        chart.note = ("No mixed-precision variant ran ok next to its float32 twin" +
                      (f" (mixed variants: {', '.join(mixed)})" if mixed else
                       "; add e.g. `precision = [\"float32\", \"mixed_bfloat16\"]`") + ".")
        return chart
    data = []
    for policy in sorted({str(m.variant.precision) for _, m in pairs}):
        chosen = [(f, m) for f, m in pairs if m.variant.precision == policy]
        data.append({
            "type": "bar", "name": policy,
            "x": [str(f.variant_id).replace("-float32", "") for f, _ in chosen],
            "y": [m.headline_ratio(f) for f, m in chosen],
            "customdata": [[f.headline, m.headline] for f, m in chosen],
            "hovertemplate": "%{x}<br>×%{y:.2f}: %{customdata[1]:,.0f} vs %{customdata[0]:,.0f} "
                             "examples/s<extra>" + policy + "</extra>"})
    chart.figure = {"data": data, "layout": layout(
        360, barmode="group", bargap=0.5, yaxis={"title": {"text": "speed-up vs float32"}},
        xaxis={"automargin": True, "type": "category"}, legend={"orientation": "h", "y": 1.1},
        shapes=[line_shape("paper", "y", 0, 1, 1.0, 1.0, colour_="#333333")])}
    return chart


def run_charts(run: RunView) -> list[Chart]:
    """Every chart of a run's page, in the order the page shows them."""
    return [throughput_chart(run), *backend_charts(run), *target_charts(run), scaling_chart(run),
            workers_chart(run),
            breakdown_chart(run), top_ops_chart(run), distribution_chart(run), timeline_chart(run),
            precision_chart(run), measurement_cost_chart(run), *recovery_charts(run)]
