"""What the charts, tables and the page's words derive from records beyond the record's own
properties: pairs of variants that differ in one axis, the step breakdown and top ops as shares
of the step, each worker of a cluster, what measuring cost, the two speeds, epoch ends, the
variants still warming up, and labels.

Plain functions over records (bench.record.model), with no plotly, so the narrative can quote the
same pairs and figures the charts draw without loading the plotting code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.record.model import TRACE_INFLATION_LIMIT, VariantRecord
from bench.record.variant import RecordedVariant
from bench.report.runs import RunView
from bench.timing import percentile, steady_state_start

__all__ = ["TRACE_INFLATION_LIMIT"]


def ok_with_throughput(run: RunView) -> list[VariantRecord]:
    """Ok records that measured a throughput: the ones a throughput figure can place (the A/A
    control twin is left out: it states the noise floor, it is no variant of its own)."""
    return [r for r in run.ok if r.has_throughput and r.counts_as_variant]


def iqr_whiskers(rec: VariantRecord) -> tuple[float, float]:
    """Below/above the typical-step rate: the interquartile range of per-step throughput."""
    gb, typical = rec.global_batch or 0, rec.typical_step_rate or 0.0
    steps = sorted(rec.timed_steps)
    if not steps:
        return 0.0, 0.0
    return typical - gb / percentile(steps, 75), gb / percentile(steps, 25) - typical


Pair = tuple[VariantRecord, VariantRecord]


def axis_pairs(records: Sequence[VariantRecord], axis: str, reference: Any) -> list[Pair]:
    """(record with `axis` = reference, record with another value) pairs of ok records that
    differ in nothing but that axis. The run's twin and yardstick are left out: the yardstick
    (the seed MLP, fit, batch 64) can have the very axes of a scenario's baseline."""
    ok = [r for r in records if r.ok and r.counts_as_variant]
    refs = {r.variant.key(without=(axis,)): r for r in ok if r.variant.axis(axis) == reference}
    return [(refs[r.variant.key(without=(axis,))], r) for r in ok
            if r.variant.axis(axis) != reference and r.variant.key(without=(axis,)) in refs]


def precision_pairs(records: Sequence[VariantRecord]) -> list[Pair]:
    """(float32 record, mixed-precision record) pairs that differ in nothing but the policy."""
    return axis_pairs(records, "precision", "float32")


def keras_pairs(records: Sequence[VariantRecord]) -> list[Pair]:
    """(Keras 3 record, tf-keras record) pairs: the same strategy, API and all, either Keras."""
    return axis_pairs(records, "keras", "keras3")


BREAKDOWN_PARTS = ("input", "compute", "collective", "other")


def _parts_total(parts: dict[str, Any]) -> float:
    return sum(v for v in (parts.get(k) for k in BREAKDOWN_PARTS) if v)


def step_breakdown(rec: VariantRecord) -> dict[str, Any] | None:
    """Where a step's time goes, as shares of the traced step, and those shares applied to the
    untraced median step (the profiler slows the traced steps, so its own milliseconds would
    overstate the step); with how much tracing slowed the steps. None without an analysis."""
    analysis = rec.trace_analysis
    parts = (analysis.breakdown_ms if analysis else None) or {}
    total = _parts_total(parts)
    if analysis is None or analysis.status != "ok" or not total:
        return None
    shares = {k: (parts.get(k) or 0.0) / total for k in BREAKDOWN_PARTS}
    untraced_ms = (rec.median_step_s or 0.0) * 1e3
    ratio = rec.profiler_ratio
    return {"shares": shares, "untraced_step_ms": untraced_ms,
            "scaled_ms": {k: share * untraced_ms for k, share in shares.items()},
            "traced_step_ms": total, "profiler_ratio": ratio,
            "inflated": bool(ratio and ratio > TRACE_INFLATION_LIMIT)}


def op_shares(rec: VariantRecord) -> list[dict[str, Any]]:
    """The trace's top ops as shares of the step: each op's self time over the traced steps'
    wall time (bench's own clock around them), and that share applied to the untraced median
    step, as the breakdown does. Host ops on parallel threads overlap, so shares can add up to
    more than 100%. Empty without an analysis or traced step times."""
    analysis = rec.trace_analysis
    traced_ms = sum(rec.traced_steps) * 1e3
    if analysis is None or analysis.status != "ok" or not traced_ms:
        return []
    untraced_ms = (rec.median_step_s or 0.0) * 1e3
    out = []
    for op in analysis.top_ops or []:
        share = float(op.self_time_ms_total or 0.0) / traced_ms
        out.append({"name": op.name, "type": op.type, "share": share,
                    "untraced_ms": share * untraced_ms, "occurrences": op.occurrences})
    return out


# A worker whose median step is this much slower than the fastest one is called a straggler.
STRAGGLER_RATIO = 1.10


def worker_rows(rec: VariantRecord) -> list[dict[str, Any]]:
    """Each training task of a cluster record: its step-time median, p5/p95, robust spread, its
    ratio to the fastest task's median, and its trace's compute/collective shares when traced."""
    tasks = [t for t in (rec.cluster.tasks or [] if rec.cluster else [])
             if t.trains and t.step_time and t.step_time.median]
    if not tasks:
        return []
    fastest = min(t.step_time.median for t in tasks if t.step_time and t.step_time.median)
    rows = []
    for task in tasks:
        step = task.step_time
        assert step is not None and step.median is not None
        parts = (task.trace_analysis.breakdown_ms if task.trace_analysis else None) or {}
        total = _parts_total(parts)
        rows.append({"task": task.task, "median_ms": step.median * 1e3,
                     "p5_ms": (step.p5 or step.median) * 1e3,
                     "p95_ms": (step.p95 or step.median) * 1e3,
                     "spread_pct": task.throughput.spread_pct if task.throughput else None,
                     "vs_fastest": step.median / fastest,
                     "compute_share": (parts.get("compute") or 0.0) / total if total else None,
                     "collective_share": (parts.get("collective") or 0.0) / total if total else None})
    return rows


def straggler_note(rows: list[dict[str, Any]]) -> str:
    """The slowest worker against the fastest, and, since a synchronous step waits for its
    slowest worker, the worker with the most compute (the others spend that time in collectives)."""
    slowest = max(rows, key=lambda r: r["vs_fastest"])
    verdict = "a straggler" if slowest["vs_fastest"] > STRAGGLER_RATIO else "no straggler"
    note = (f"slowest {slowest['task']}: ×{slowest['vs_fastest']:.3f} the fastest worker's median "
            f"({verdict}; the limit is ×{STRAGGLER_RATIO:.2f})")
    traced = [r for r in rows if r["compute_share"] is not None]
    if len(traced) > 1:
        busiest = max(traced, key=lambda r: r["compute_share"])
        note += (f"; most compute: {busiest['task']} ({busiest['compute_share']:.0%} of its step), "
                 "the others' collective time is largely waiting for it")
    return note


def measurement_costs(rec: VariantRecord) -> dict[str, Any]:
    """What measuring cost a variant: the observer ratio (observed ÷ unobserved windows) and the
    profiler's (traced ÷ untraced steps), each with whether it is flagged."""
    return {"observer": rec.observer_ratio, "observer_flagged": rec.observer_flagged,
            "profiler": rec.profiler_ratio, "profiler_flagged": rec.profiler_flagged}


def format_speeds(rec: VariantRecord) -> str | None:
    """"23,000 ex/s in 3 of 4 iterators, 11,600 in 1" when the variant's fresh input iterators
    ran at two speeds (bench.timing.iterator_speeds), else None."""
    if not rec.bimodal_speeds or rec.measurement is None or rec.measurement.speeds is None:
        return None
    fast, slow = rec.measurement.speeds.modes or []
    total = (fast.iterators or 0) + (slow.iterators or 0)
    return (f"{fast.rate:,.0f} ex/s in {fast.iterators} of {total} iterators, "
            f"{slow.rate:,.0f} in {slow.iterators}")


def describe_epoch_ends(records: Sequence[VariantRecord]) -> str | None:
    """How often a short epoch's end waited, over the run's variants: what a loop with a fresh
    input iterator every epoch pays at some epochs' ends (bench.training.epoch_ends)."""
    ends = [end for r in records if r.ok and r.measurement is not None
            for end in (r.measurement.epoch_ends or [])]
    if not ends:
        return None
    waited = [end for end in ends if end.waited]
    text = f"epoch ends: {len(waited)} of {len(ends)} short epochs waited at their end"
    if waited:
        ratios = sorted((end.end_s or 0.0) / (end.steps_s or 1.0) for end in waited)
        capped = sum(1 for end in waited if not end.finished)
        text += (f" for tf.data's autotune thread, {ratios[0]:.0%}-{ratios[-1]:.0%} of the "
                 f"epoch's own time" + (f" ({capped} at least: still waiting at the cap)"
                                        if capped else ""))
    quick = sorted(end.end_s or 0.0 for end in ends if not end.waited)
    if quick:
        text += f"; the others took {1000 * percentile(quick, 50):.0f} ms"
    if waited:
        text += (". A loop that starts a fresh iterator every epoch (fit over a finite dataset, "
                 "`for batch in dataset`) waits so at some epochs' ends, the longer the epoch the "
                 "longer; one iterator over all epochs (dataset.repeat() and steps_per_epoch) "
                 "never does")
    return text + "."


def warming_up(records: Sequence[VariantRecord]) -> dict[str, int]:
    """Variant id → its timed steps still warming up, for the ok records that were.

    A worker judges its own windows (the record's `steady_state_start`), where a slow spell of
    the machine early in the run reads as a warm-up. The variants of an interleaved batch took
    the same rounds, so the others' windows give the machine's speed in each (the median, over
    them, of each window's log step time less that variant's median), and a variant is judged on
    its windows less that; a record without three such batch-mates keeps its own judgment."""
    import numpy as np

    found = {str(r.variant_id): r.steady_state_start or 0 for r in records if r.ok}
    batches: dict[tuple[Any, ...], list[VariantRecord]] = {}
    for r in records:
        windows = r.timed_windows
        if r.ok and r.interleave and r.interleave.batch and windows and all(windows):
            batches.setdefault((tuple(r.interleave.batch), len(windows)), []).append(r)
    for batch in (b for b in batches.values() if len(b) >= 3):
        logs = np.log([[np.median(w) for w in r.timed_windows] for r in batch])
        centred = logs - np.median(logs, axis=1, keepdims=True)
        for i, rec in enumerate(batch):
            machine = np.median(np.delete(centred, i, axis=0), axis=0)
            found[str(rec.variant_id)] = steady_state_start(rec.timed_windows, machine.tolist())
    return {vid: steps for vid, steps in found.items() if steps}


def model_label(variant: RecordedVariant) -> str:
    """The model as a run tells its variants apart: name, which layers train (a frozen base's
    head, the last N layers) and any extra matmul."""
    model = variant.model
    label = str(model.name) if model is not None and "name" in model.model_fields_set else "?"
    trainable = variant.axis("trainable")
    if trainable != "all":
        label += f" ({'head' if trainable == 'head' else f'last {trainable}'} trainable)"
    if model is not None and model.extra_matmul:
        label += f" +matmul {model.extra_matmul}"
    return label


def api_label(variant: RecordedVariant) -> str:
    """The API column: fit or ctl, with what else tells the path apart (dataset distribution,
    a NumPy feed, tf-keras)."""
    api = str(variant.api)
    if api == "ctl":
        from_fn = variant.distribute_dataset == "distribute_datasets_from_function"
        api = f"ctl ({'dsfn' if from_fn else 'dist'})"
    if variant.axis("feed") == "numpy":
        api += " numpy"
    return api + (" tf-keras" if variant.axis("keras") == "tf_keras" else "")
