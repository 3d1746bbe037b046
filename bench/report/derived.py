"""What the charts, tables and the page's words derive from records beyond the record's own
properties: pairs of variants that differ in one axis, the step breakdown and top ops as shares
of the step, each worker of a cluster, what measuring cost, the two speeds, epoch ends, the
variants still warming up, and labels.

Plain functions over records (bench.record.model), with no plotly, so the narrative can quote the
same pairs and figures the charts draw without loading the plotting code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.record.model import TRACE_INFLATION_LIMIT, VariantRecord
from bench.record.variant import RecordedVariant
from bench.report.runs import RunView
from bench.timing import iterator_speeds, percentile, steady_state_start, turn_iterator

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


def window_whiskers(rec: VariantRecord) -> tuple[float, float]:
    """Below/above the headline: the interquartile range of the examples/s of its own windows
    (the unobserved ones), each side 0 where the headline lies beyond that quartile (the
    headline, examples ÷ the windows' summed wall clock, leans to the slow windows)."""
    headline, rates = rec.headline or 0.0, sorted(rec.window_rates)
    if not rates:
        return 0.0, 0.0
    return max(0.0, headline - percentile(rates, 25)), max(0.0, percentile(rates, 75) - headline)


def problems_by_reason(records: Sequence[VariantRecord]
                       ) -> list[tuple[str, str, list[str]]]:
    """(status, reason, the variants' ids) of the failed and skipped records, one entry per
    reason, failures first: twelve variants that failed alike are one failure."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for status in ("failed", "skipped"):
        for rec in records:
            if rec.status == status:
                grouped.setdefault((status, rec.reason or "no reason recorded"), []).append(
                    str(rec.variant_id))
    return [(status, reason, ids) for (status, reason), ids in grouped.items()]


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
        low, high = f"{ratios[0]:.0%}", f"{ratios[-1]:.0%}"
        text += (f" for tf.data's autotune thread, {low if low == high else f'{low}-{high}'} of "
                 "the epoch's own time" + (f" ({capped} at least: still waiting at the cap)"
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


def _observed_steps(rec: VariantRecord) -> list[float] | None:
    """Each observed window's median step: the per-step samples' windows."""
    windows = rec.timed_windows
    return [percentile(sorted(w), 50) for w in windows] if windows and all(windows) else None


def _unobserved_windows(rec: VariantRecord) -> list[float] | None:
    """Each unobserved window's clock: the headline's windows."""
    return list(rec.measurement.window_s) if rec.measurement and rec.measurement.window_s else None


def _machine_speeds(records: Sequence[VariantRecord],
                    series: Callable[[VariantRecord], list[float] | None]
                    ) -> dict[str, list[float]]:
    """Per ok record of an interleaved batch of three or more whose `series` (a time per round)
    took the same rounds: the machine's speed in each round (log), from its batch-mates: the
    median, over them, of each round's log time less that variant's median. A slow spell of the
    machine slows every variant of a round; what one variant does alone stays out of it. Not the
    yardstick's rounds alone (bench.compare.yardstick), which would carry one process's own
    noise into every variant's judgment."""
    import numpy as np

    batches: dict[tuple[Any, ...], list[tuple[VariantRecord, list[float]]]] = {}
    for r in records:
        if r.ok and r.interleave and r.interleave.batch and (times := series(r)):
            batches.setdefault((tuple(r.interleave.batch), len(times)), []).append((r, times))
    speeds: dict[str, list[float]] = {}
    for batch in (b for b in batches.values() if len(b) >= 3):
        logs = np.log([times for _, times in batch])
        centred = logs - np.median(logs, axis=1, keepdims=True)
        for i, (rec, _) in enumerate(batch):
            speeds[str(rec.variant_id)] = np.median(np.delete(centred, i, axis=0), axis=0).tolist()
    return speeds


def warming_up(records: Sequence[VariantRecord]) -> dict[str, int]:
    """Variant id → its timed steps still warming up, for the ok records that were.

    A worker judges its own windows (the record's `steady_state_start`), where a slow spell of
    the machine early in the run reads as a warm-up; a variant of a batch is judged on its
    observed windows less the machine's speed in each round (`_machine_speeds`, from the
    batch-mates' observed windows), and a record without three such batch-mates keeps its own
    judgment."""
    machine = _machine_speeds(records, _observed_steps)
    found = {}
    for r in (r for r in records if r.ok):
        vid = str(r.variant_id)
        steps = (steady_state_start(r.timed_windows, machine[vid]) if vid in machine
                 else r.steady_state_start or 0)
        if steps:
            found[vid] = steps
    return found


def two_speeds(records: Sequence[VariantRecord]) -> dict[str, str]:
    """Variant id → "23,000 ex/s in 3 of 4 iterators, 11,600 in 1" for the ok records whose
    fresh input iterators ran at two speeds (bench.timing.iterator_speeds).

    An iterator's turns are consecutive rounds, so a slow spell of the machine reads as a slow
    iterator on the variant's own windows (the record's modes). A variant of a batch is judged
    on its unobserved windows each brought to the machine's median speed over the run (less its
    round's, `_machine_speeds`, from the batch-mates' unobserved windows), and its rates read at
    that speed; a record without three such batch-mates keeps its own modes."""
    machine = _machine_speeds(records, _unobserved_windows)
    found = {}
    for r in (r for r in records if r.ok and r.measurement is not None):
        m, vid = r.measurement, str(r.variant_id)
        iterators = int((r.variant.measure or {}).get("iterators") or 1)
        window_s = m.window_s or []
        if vid in machine and len(window_s) == len(machine[vid]) and m.window_steps:
            turns = len(window_s)
            speeds = iterator_speeds(
                [s / math.exp(x) for s, x in zip(window_s, machine[vid], strict=True)],
                [turn_iterator(t, iterators, turns) for t in range(turns)],
                (r.global_batch or 0) * m.window_steps)
            modes = [(d["rate"], d["iterators"]) for d in speeds["modes"]]
        else:
            modes = [(mode.rate or 0.0, mode.iterators or 0)
                     for mode in (m.speeds.modes or [])] if m.speeds else []
        if len(modes) == 2:
            (fast, fast_n), (slow, slow_n) = modes
            found[vid] = (f"{fast:,.0f} ex/s in {fast_n} of {fast_n + slow_n} iterators, "
                          f"{slow:,.0f} in {slow_n}")
    return found


def run_warming_up(run: RunView) -> dict[str, int]:
    """`warming_up` of a run's records, once per view: its summary and its timeline read it."""
    return run.memo("warming_up", lambda: warming_up(run.records))


def describe_warming_up(warming: Mapping[str, int]) -> str | None:
    """The variants still warming up in their timed windows (`warming_up`), as one sentence the
    terminal and the report both print."""
    if not warming:
        return None
    return ("still warming up inside the timed windows, slower in their first windows than in "
            "their later ones beyond the rounds' noise (raise [measure] warmup_steps): "
            + "; ".join(f"{vid} (its first {steps} timed steps)" for vid, steps in warming.items())
            + ".")


def describe_two_speeds(speeds: Mapping[str, str]) -> str | None:
    """The variants whose fresh input iterators ran at two speeds (`two_speeds`), as one sentence
    the terminal and the report both print."""
    if not speeds:
        return None
    return ("two speeds (fresh input iterators, as a user's epochs, ran in two modes; the "
            "headline is over all of them): "
            + "; ".join(f"{vid}: {modes}" for vid, modes in speeds.items()) + ".")


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


def batch_rule_label(variant: RecordedVariant) -> str:
    """The batch rule as a run tells its variants apart: the rule, then any learning-rate
    scaling and its warmup ("weak, lr linear, warmup 30,720 ex")."""
    label = str(variant.batch_rule or "?")
    if (scaling := variant.axis("lr_scaling")) != "none":
        label += f", lr {scaling}"
    if warmup := variant.axis("lr_warmup_examples"):
        label += f", warmup {warmup:,} ex"
    return label


def api_label(variant: RecordedVariant) -> str:
    """The API column: fit or ctl, with what else tells the path apart (dataset distribution,
    a NumPy feed, tf-keras, a Keras backend other than TensorFlow)."""
    api = str(variant.api)
    if api == "ctl" and variant.axis("backend") == "tensorflow":  # JAX: no tf.distribute
        from_fn = variant.distribute_dataset == "distribute_datasets_from_function"
        api = f"ctl ({'dsfn' if from_fn else 'dist'})"
    if variant.axis("feed") == "numpy":
        api += " numpy"
    if (backend := variant.axis("backend")) != "tensorflow":
        api += f" {backend}"
    return api + (" tf-keras" if variant.axis("keras") == "tf_keras" else "")
