"""The charts of a run with a `[fault]`: each variant's step times across the fault with its
recovery timeline marked, and a table of the figures (time to recover, steps redone).

They read the record's `recovery` section (bench.launch.recovery_timeline); a run without one
gets none.
"""

from __future__ import annotations

from typing import Any

from bench.record.cluster import InjectedFault, Recovery, RecoveryStep
from bench.record.model import VariantRecord
from bench.report.chart import Chart, colour, layout, line_shape
from bench.report.runs import RunView

# The timeline's phases as the chart labels them, in order.
PHASES = {"fault_injected": "fault injected", "detected": "detected",
          "cluster_back_up": "cluster back up", "state_restored": "state restored",
          "first_step_after_restore": "first step", "back_to_speed": "within 5%"}
PHASE_COLOURS = {"fault_injected": "#d62728", "detected": "#ff7f0e",
                 "cluster_back_up": "#8c564b", "state_restored": "#2ca02c",
                 "first_step_after_restore": "#1f77b4", "back_to_speed": "#17becf"}


def _with_recovery(run: RunView) -> list[VariantRecord]:
    return [r for r in run.records if r.recovery]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def step_chart(rec: VariantRecord) -> Chart:
    """Step time against wall time (0 = the fault), before and after, the phases as lines."""
    vid = rec.variant_id
    recovery: Recovery = rec.recovery or Recovery()
    chart = Chart(f"recovery-{vid}", f"Recovery after a lost worker: {vid}",
                  "Each step's time (ms, log scale) at the wall-clock second it ended, 0 being "
                  "the fault: before it (attempt 1) and after the recovery (the restarted cluster, "
                  "or the coordinator going on without the lost worker). The vertical lines mark "
                  "the recovery timeline; the gap between the fault and the first step is the "
                  "time lost, and steps after the restore with numbers already seen are redone.")
    series = recovery.series or []
    timeline = recovery.timeline or {}
    zero = timeline.get("fault_injected")
    if not series or zero is None:
        chart.note = "No step was recorded around the fault" + (
            f" ({rec.reason})" if rec.reason else "") + "."
        return chart
    data = []
    goes_on = rec.variant.kind is not None and rec.variant.kind.recovers_by == "task"
    for attempt, name in ((1, "before the fault"), (2, "after the restore")):
        points = [e for e in series if e.attempt == attempt]
        if attempt == 1 and goes_on:  # the coordinator went on through the fault
            before = [e for e in points if (e.t or 0.0) <= zero]
            after = [e for e in points if (e.t or 0.0) > zero]
            points = before
            data.append(_trace(after, zero, "after the fault", "#ff7f0e"))
        if points:
            data.append(_trace(points, zero, name, colour(rec) if attempt == 1 else "#2ca02c"))
    shapes, annotations = [], []
    for i, (key, label) in enumerate(PHASES.items()):
        at = timeline.get(key)
        if at is None:
            continue
        x = at - zero
        shapes.append(line_shape("x", "paper", x, x, 0, 1, dash="dot",
                                 colour_=PHASE_COLOURS[key]))
        annotations.append({"text": f"{label} ({x:+.1f} s)", "x": x, "xref": "x",
                            "y": 1 - 0.07 * i, "yref": "paper", "showarrow": False,
                            "xanchor": "left", "font": {"size": 10,
                                                        "color": PHASE_COLOURS[key]}})
    chart.figure = {"data": [d for d in data if d["x"]], "layout": layout(
        380, xaxis={"title": {"text": "seconds after the fault"}},
        yaxis={"title": {"text": "ms per step"}, "type": "log"},
        legend={"orientation": "h", "y": -0.2}, shapes=shapes, annotations=annotations)}
    return chart


def _trace(points: list[RecoveryStep], zero: float, name: str, line: str) -> dict[str, Any]:
    return {"type": "scatter", "mode": "lines+markers", "name": name,
            "x": [(e.t or 0.0) - zero for e in points], "y": [(e.dt or 0.0) * 1e3 for e in points],
            "customdata": [[e.step, e.loss] for e in points],
            "marker": {"size": 4}, "line": {"color": line, "width": 1},
            "hovertemplate": "step %{customdata[0]}: %{y:.1f} ms, loss %{customdata[1]:.4f}"
                             "<extra>" + name + "</extra>"}


def recovery_table(recs: list[VariantRecord]) -> Chart:
    chart = Chart("recovery-table", "Recovery figures",
                  "Per variant: time from the fault to the first step after the restore, and to "
                  "steps back within 5% of the pre-fault median; the steps redone (work lost "
                  "since the last backup); whether the loss went on from the backup.")
    columns: dict[str, list[Any]] = {k: [] for k in (
        "variant", "status", "fault", "detected", "back up", "restored", "time to recover",
        "within 5%", "steps redone", "backup every", "loss continues")}
    for rec in recs:
        recovery = rec.recovery or Recovery()
        rel = recovery.timeline_s or {}
        fault = recovery.fault or InjectedFault()
        continues = recovery.continuity.continues if recovery.continuity else None
        goes_on = rec.variant.kind is not None and rec.variant.kind.recovers_by == "task"
        row = [rec.variant_id, rec.status,
               f"{fault.task} {fault.signal} at step {fault.injected_at_step}",
               _seconds(rel.get("detected")), _seconds(rel.get("cluster_back_up")),
               _seconds(rel.get("state_restored")), _seconds(recovery.time_to_recover_s),
               _seconds(recovery.time_to_speed_s),
               "-" if recovery.steps_redone is None else str(recovery.steps_redone),
               # a coordinator that goes on backs nothing up: its variables live on the ps tasks
               "-" if goes_on else str(fault.backup_every),
               {True: "yes", False: "no"}.get(continues, "-")]
        for column, value in zip(columns, row, strict=True):
            columns[column].append(value)
    widths = [4.5, 1, 2.5] + [1.2] * (len(columns) - 3)  # the variant id needs room
    chart.figure = {"data": [{"type": "table", "columnwidth": widths,
                              "header": {"values": list(columns)},
                              "cells": {"values": list(columns.values()), "height": 40}}],
                    "layout": layout(130 + 48 * len(recs))}
    return chart


def recovery_charts(run: RunView) -> list[Chart]:
    """The fault's charts (none for a run without a [fault])."""
    recs = _with_recovery(run)
    return [recovery_table(recs), *(step_chart(r) for r in recs)] if recs else []
