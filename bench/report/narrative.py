"""The few sentences at the top of a run's page: what a performance engineer would say first.

Plain strings (the template escapes them); every figure quoted here is also in the table below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.checks.verdicts import ACCURACY, LOSS_PARITY, CheckKind
from bench.compare.noise import describe as describe_noise_floor
from bench.compare.noise import within_noise
from bench.record.model import OBSERVER_FLAG_RATIO, VariantRecord
from bench.record.profiled import Accuracy, LossParity
from bench.report import backends, checkpoints, environments
from bench.report.derived import (
    Pair,
    describe_epoch_ends,
    describe_two_speeds,
    describe_warming_up,
    keras_pairs,
    measurement_costs,
    precision_pairs,
    problems_by_reason,
    run_warming_up,
    straggler_note,
    two_speeds,
    worker_rows,
)
from bench.report.runs import RunView, versus_baseline
from bench.report.targets import describe_ranking, target_rows
from bench.scaling import replicas_of

INPUT_BOUND_PCT = 20.0  # xprof calls a step "highly input-bound" above 20% input time
PARTLY_INPUT_BOUND_PCT = 5.0


def _thr(rec: VariantRecord) -> float:
    return rec.headline or 0.0


def _versus(ratio: float, run: RunView) -> str:
    """×ratio, saying so when the control twins differed as much."""
    text = f"×{ratio:.2f}"
    return text + " (within the noise floor)" if within_noise(ratio, run.noise_floor) else text


def fastest(run: RunView) -> str | None:
    recs = [r for r in run.ok if r.has_throughput and r.counts_as_variant]
    if not recs:
        return None
    best = max(recs, key=_thr)
    text = f"Fastest: {best.variant_id} at {_thr(best):,.0f} examples/s"
    base = run.baselines.get(str(best.variant_id))
    ratio = versus_baseline(best, base)
    if base is not None and ratio is not None:
        text += f", {_versus(ratio, run)} the single-device baseline ({base.variant_id})"
    slowest = min(recs, key=_thr)
    if slowest is not best:
        text += f"; slowest: {slowest.variant_id} at {_thr(slowest):,.0f}"
    return text + "."


def best_scaling(run: RunView) -> str | None:
    scaled = [r for r in run.ok if r.scaling_efficiency is not None and replicas_of(r) > 1]
    if not scaled:
        return None
    best = max(scaled, key=lambda r: r.scaling_efficiency or 0.0)
    text = (f"Best scaling: {best.variant_id}, efficiency {best.scaling_efficiency:.2f} "
            f"on {replicas_of(best)} replicas ({best.scaling_kind} scaling; 1.0 is ideal)")
    if any(r.devices is not None and r.devices.simulated for r in scaled):
        text += (". Replicas here are logical CPU devices sharing the same cores, so about "
                 "1/replicas is the expected efficiency, not a defect")
    return text + "."


def input_bound(run: RunView) -> str | None:
    shares = [(r, r.trace_analysis.input_bound_pct if r.trace_analysis else None)
              for r in run.ok]
    shares = [(r, float(p)) for r, p in shares if p is not None]
    if not shares:
        return None
    bound = [f"{r.variant_id} ({p:.0f}% of the step waiting for input)"
             for r, p in shares if p >= INPUT_BOUND_PCT]
    if bound:
        return "Input-bound: " + "; ".join(bound) + ". Speed up the input pipeline before anything else."
    partly = [f"{r.variant_id} ({p:.0f}%)" for r, p in shares if p >= PARTLY_INPUT_BOUND_PCT]
    if partly:
        return "Partly input-bound (5–20% of the step on input): " + "; ".join(partly) + "."
    top, pct = max(shares, key=lambda s: s[1])
    return f"No variant is input-bound (the largest input share is {pct:.1f}%, {top.variant_id})."


def _pair_ratios(title: str, pairs: list[Pair], run: RunView) -> str | None:
    """"title: other-variant ×ratio; ..." for (reference, other) pairs, or None without pairs."""
    if not pairs:
        return None
    parts = [f"{o.variant_id} {_versus(_thr(o) / _thr(r), run)}" for r, o in pairs]
    return f"{title}: " + "; ".join(parts) + "."


def precision_speedups(run: RunView) -> str | None:
    return _pair_ratios("Mixed precision vs float32", precision_pairs(run.records), run)


def keras_flavours(run: RunView) -> str | None:
    """tf-keras against Keras 3 on the same strategy, API, precision and batch."""
    return _pair_ratios("tf-keras vs Keras 3 (same strategy, API and precision)",
                        keras_pairs(run.records), run)


def utilization(run: RunView) -> str | None:
    used = [(r, r.utilization) for r in run.ok
            if r.utilization is not None and r.utilization.status == "ok"]
    if not used:
        return None
    low = min(used, key=lambda pair: pair[1].mfu or 0.0)
    high = max(used, key=lambda pair: pair[1].mfu or 0.0)
    peaks = sorted({f"{u.peak.dtype if u.peak else None} {(u.peak_flops_per_s or 0) / 1e9:,.0f}"
                    for _, u in used})
    text = (f"MFU (achieved FLOP/s over the measured matmul peak: {'; '.join(peaks)} GFLOP/s): "
            f"{high[1].mfu:.1%} at best ({high[0].variant_id})")
    if low is not high:
        text += f", {low[1].mfu:.1%} at worst ({low[0].variant_id})"
    text += "."
    if above := [(r, u) for r, u in used if u.above_peak]:
        caches = sorted({u.peak.cache for _, u in above if u.peak and u.peak.cache})
        text += (f" Above 100% on {len(above)} ({', '.join(str(r.variant_id) for r, _ in above)}):"
                 " a step cannot outrun the device's peak, so the measured peak read low (it was"
                 " measured during someone else's load, or its matmul ran slower than the step's"
                 " kernels) and these MFUs are not figures; delete "
                 f"{' and '.join(caches) if caches else 'the peak cache (peak.json)'} to measure"
                 " it again on a quiet machine.")
    return text


def _check_line(run: RunView, kind: CheckKind, flagged: str, item: Callable[[Any], str],
                holds: Callable[[list[tuple[str, Any]]], str]) -> str | None:
    """One sentence on a check: every failing variant (`flagged` + `item` of each), or, when
    none fails, what `holds` says of all the judged ones."""
    judged = [(str(r.variant_id), c) for r in run.ok if (c := kind.verdict(r)) is not None]
    if not judged:
        return None
    failing = [(vid, c) for vid, c in judged if c.status == kind.bad]
    if failing:
        return flagged + "; ".join(f"{vid} {item(c)}" for vid, c in failing) + "."
    return holds(judged)


def _parity_holds(judged: list[tuple[str, LossParity]]) -> str:
    worst = max(c.relative_difference or 0.0 for _, c in judged)
    across = sorted({f"{c.baseline} on {c.baseline_backend}" for _, c in judged
                     if c.baseline_backend is not None and c.backend != c.baseline_backend})
    return (f"Loss parity holds: {len(judged)} variant(s) within {judged[0][1].tolerance:.1%} "
            f"of the baseline's loss after {judged[0][1].steps} steps (largest difference "
            f"{worst:.2%})" + (f", across backends against {', '.join(across)}" if across else "")
            + ".")


def _accuracy_holds(judged: list[tuple[str, Accuracy]]) -> str:
    vid, low = min(judged, key=lambda pair: pair[1].accuracy or 0.0)
    return (f"Accuracy bound holds: {len(judged)} variant(s) reach at least {low.min:g} on the "
            f"{low.eval_split} split after {low.steps} steps (lowest {low.accuracy:.3f}, "
            f"{vid}).")


def loss_parity(run: RunView) -> str | None:
    return _check_line(
        run, LOSS_PARITY, "Loss parity diverged from the single-device baseline (a different "
        "model is being trained): ",
        lambda c: f"off by {c.relative_difference:.1%} (tolerance {c.tolerance:.1%})",
        _parity_holds)


def accuracy(run: RunView) -> str | None:
    return _check_line(
        run, ACCURACY, "Accuracy below the bound (the configuration no longer learns the task as "
        "it should): ",
        lambda c: (f"reached {c.accuracy:.3f} < {c.min:g} on the {c.eval_split} split "
                   f"after {c.steps} steps"),
        _accuracy_holds)


def failures(run: RunView) -> list[str]:
    lines = []
    problems = problems_by_reason(run.records)
    for status in ("failed", "skipped"):
        groups = [(reason, ids) for s, reason, ids in problems if s == status]
        if groups:
            lines.append(f"{sum(len(ids) for _, ids in groups)} {status}: " + "; ".join(
                f"{', '.join(ids)} — {reason}" for reason, ids in groups))
    if note := run.interrupted:
        lines.append(f"{_sentence(note)}" + (f"; not run: {', '.join(run.not_run)}"
                                             if run.not_run else ""))
    elif run.not_run:
        lines.append(f"{len(run.not_run)} not run (the run was interrupted or is unfinished): "
                     + ", ".join(run.not_run))
    return lines


def _sentence(text: str | None) -> str | None:
    return text[0].upper() + text[1:] if text else None


def unsettled(run: RunView) -> str | None:
    return _sentence(describe_warming_up(run_warming_up(run)))


def stragglers(run: RunView) -> str | None:
    """Per multi-worker variant: its slowest worker against its fastest."""
    notes = [f"{r.variant_id}: {straggler_note(rows)}" for r in run.ok if (rows := worker_rows(r))]
    return ("Workers: " + "; ".join(notes) + ".") if notes else None


def measurement_cost(run: RunView) -> str | None:
    """The variants whose observation or tracing cost more than its limit."""
    costs = [(r.variant_id, measurement_costs(r)) for r in run.ok]
    observed = [f"{vid} ×{c['observer']:.2f}" for vid, c in costs if c["observer_flagged"]]
    traced = [f"{vid} ×{c['profiler']:.2f}" for vid, c in costs if c["profiler_flagged"]]
    parts = []
    if observed:
        parts.append(f"per-step observation slowed the steps (observed ÷ unobserved windows "
                     f"of the same turns, the whole 95% interval over {OBSERVER_FLAG_RATIO:g}×): "
                     f"{', '.join(observed)}")
    if traced:
        parts.append(f"tracing slowed the traced steps (against untraced ones beside them): "
                     f"{', '.join(traced)}")
    return ("Measuring cost: " + "; ".join(parts) + ".") if parts else None


def speed_modes(run: RunView) -> str | None:
    """The variants whose fresh input iterators ran at two speeds, with each one's share."""
    return _sentence(describe_two_speeds(two_speeds(run.records)))


def epoch_ends(run: RunView) -> str | None:
    """How often ending an input iterator waited (what some epochs' ends cost a user's loop)."""
    return _sentence(describe_epoch_ends(run.ok))


def data_notes(run: RunView) -> list[str]:
    return [f"Data fallback: {reason}." for reason in run.fallback_reasons]


def summarize_run(run: RunView) -> list[str]:
    if not run.records:
        return ["This run has no records yet."]
    lines = [describe_ranking(target_rows(run.records)), describe_noise_floor(run.noise_floor),
             fastest(run), best_scaling(run),
             input_bound(run), precision_speedups(run), keras_flavours(run),
             backends.summary_line(run),
             environments.summary_line(run.records, run.noise_floor),
             utilization(run), stragglers(run), measurement_cost(run), speed_modes(run),
             epoch_ends(run),
             checkpoints.describe(checkpoints.checkpoint_rows(run.ok)), loss_parity(run),
             accuracy(run),
             *failures(run), unsettled(run), *data_notes(run)]
    return [line for line in lines if line]
