"""What the charts and the page's words read out of result records: per-step samples, the spread
of throughput, and float32 / mixed-precision twins.

Plain functions over record dicts, with no plotly, so the narrative can quote the same pairs and
figures the charts draw without loading the plotting code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.axes import axis_value, variant_key
from bench.records import counts_as_variant
from bench.report.runs import RunView
from bench.timing import percentile


def ok_with_throughput(run: RunView) -> list[dict[str, Any]]:
    """Ok records that measured a throughput: the ones a throughput figure can place (the A/A
    control twin is left out: it states the noise floor, it is no variant of its own)."""
    return [r for r in run.ok if (r.get("throughput") or {}).get("median") and counts_as_variant(r)]


def timed_samples(rec: dict[str, Any]) -> list[float]:
    """Per-step times (seconds) of all timed windows, in order."""
    windows = (rec.get("samples") or {}).get("timed") or []
    return [s for window in windows for s in window]


def iqr_whiskers(rec: dict[str, Any]) -> tuple[float, float]:
    """Below/above the median examples/s: the interquartile range of per-step throughput."""
    gb = (rec.get("effective") or rec["variant"])["global_batch"]
    median = rec["throughput"]["median"]
    steps = sorted(timed_samples(rec))
    if not steps:
        return 0.0, 0.0
    return median - gb / percentile(steps, 75), gb / percentile(steps, 25) - median


def axis_pairs(records: Sequence[dict[str, Any]], axis: str, reference: Any
               ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(record with `axis` = reference, record with another value) pairs of ok records that
    differ in nothing but that axis. The run's twin and yardstick are left out: the yardstick
    (the seed MLP, fit, batch 64) can have the very axes of a scenario's baseline."""
    def key(rec: dict[str, Any]) -> tuple[Any, ...]:
        return variant_key(rec["variant"], without=(axis,))

    ok = [r for r in records if r.get("status") == "ok" and counts_as_variant(r)]
    refs = {key(r): r for r in ok if axis_value(r["variant"], axis) == reference}
    return [(refs[key(r)], r) for r in ok
            if axis_value(r["variant"], axis) != reference and key(r) in refs]


def precision_pairs(records: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(float32 record, mixed-precision record) pairs that differ in nothing but the policy."""
    return axis_pairs(records, "precision", "float32")


def keras_pairs(records: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(Keras 3 record, tf-keras record) pairs: the same strategy, API and all, either Keras."""
    return axis_pairs(records, "keras", "keras3")


# Tracing that slowed the traced steps by more than this is named beside the breakdown.
TRACE_INFLATION_LIMIT = 1.5
BREAKDOWN_PARTS = ("input", "compute", "collective", "other")


def step_breakdown(rec: dict[str, Any]) -> dict[str, Any] | None:
    """Where a step's time goes, as shares of the traced step, and those shares applied to the
    untraced median step (the profiler slows the traced steps, so its own milliseconds would
    overstate the step); with how much tracing slowed the steps. None without an analysis."""
    trace = rec.get("trace") or {}
    analysis = trace.get("analysis") or {}
    parts = analysis.get("breakdown_ms") or {}
    total = sum(v for v in (parts.get(k) for k in BREAKDOWN_PARTS) if v)
    if analysis.get("status") != "ok" or not total:
        return None
    shares = {k: (parts.get(k) or 0.0) / total for k in BREAKDOWN_PARTS}
    untraced_ms = ((rec.get("step_time") or {}).get("median") or 0.0) * 1e3
    ratio = trace.get("overhead_ratio")
    return {"shares": shares, "untraced_step_ms": untraced_ms,
            "scaled_ms": {k: share * untraced_ms for k, share in shares.items()},
            "traced_step_ms": total, "profiler_ratio": ratio,
            "inflated": bool(ratio and ratio > TRACE_INFLATION_LIMIT)}


def op_shares(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """The trace's top ops as shares of the step: each op's self time over the traced steps'
    wall time (bench's own clock around them), and that share applied to the untraced median
    step, as the breakdown does. Host ops on parallel threads overlap, so shares can add up to
    more than 100%. Empty without an analysis or traced step times."""
    analysis = (rec.get("trace") or {}).get("analysis") or {}
    traced_ms = sum((rec.get("samples") or {}).get("traced") or []) * 1e3
    if analysis.get("status") != "ok" or not traced_ms:
        return []
    untraced_ms = ((rec.get("step_time") or {}).get("median") or 0.0) * 1e3
    out = []
    for op in analysis.get("top_ops") or []:
        share = float(op.get("self_time_ms_total") or 0.0) / traced_ms
        out.append({"name": op.get("name"), "type": op.get("type"), "share": share,
                    "untraced_ms": share * untraced_ms, "occurrences": op.get("occurrences")})
    return out


# A worker whose median step is this much slower than the fastest one is called a straggler.
STRAGGLER_RATIO = 1.10


def worker_rows(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """Each training task of a cluster record: its step-time median, p5/p95, robust spread, its
    ratio to the fastest task's median, and its trace's compute/collective shares when traced."""
    tasks = [t for t in (rec.get("cluster") or {}).get("tasks") or []
             if t.get("trains") and (t.get("step_time") or {}).get("median")]
    if not tasks:
        return []
    fastest = min(t["step_time"]["median"] for t in tasks)
    rows = []
    for task in tasks:
        step = task["step_time"]
        parts = ((task.get("trace_analysis") or {}).get("breakdown_ms") or {})
        total = sum(v for v in (parts.get(k) for k in BREAKDOWN_PARTS) if v)
        rows.append({"task": task.get("task"), "median_ms": step["median"] * 1e3,
                     "p5_ms": (step.get("p5") or step["median"]) * 1e3,
                     "p95_ms": (step.get("p95") or step["median"]) * 1e3,
                     "spread_pct": (task.get("throughput") or {}).get("spread_pct"),
                     "vs_fastest": step["median"] / fastest,
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


def measurement_costs(rec: dict[str, Any]) -> dict[str, Any]:
    """What measuring cost a variant: the observer ratio (observed ÷ unobserved windows) and the
    profiler's (traced ÷ untraced steps), each with whether it is flagged: its interval lies
    above the limit (records from before the intervals: its ratio does)."""
    observer = rec.get("observer") or {}
    trace = rec.get("trace") or {}
    profiler = trace.get("overhead_ratio")
    flagged = trace.get("overhead_flagged", bool(profiler and profiler > TRACE_INFLATION_LIMIT))
    return {"observer": observer.get("ratio"), "observer_flagged": bool(observer.get("flagged")),
            "profiler": profiler, "profiler_flagged": bool(flagged)}


def format_speeds(rec: dict[str, Any]) -> str | None:
    """"23,000 ex/s in 3 of 4 iterators, 11,600 in 1" when the variant's fresh input iterators
    ran at two speeds (bench.timing.iterator_speeds), else None."""
    speeds = (rec.get("measurement") or {}).get("speeds") or {}
    if not speeds.get("bimodal"):
        return None
    fast, slow = speeds["modes"]
    total = fast["iterators"] + slow["iterators"]
    return (f"{fast['rate']:,.0f} ex/s in {fast['iterators']} of {total} iterators, "
            f"{slow['rate']:,.0f} in {slow['iterators']}")


def model_label(variant: dict[str, Any]) -> str:
    """The model as a run tells its variants apart: name, which layers train (a frozen base's
    head, the last N layers) and any extra matmul."""
    model = variant.get("model") or {}
    label = str(model.get("name", "?"))
    trainable = model.get("trainable", "all")
    if trainable != "all":
        label += f" ({'head' if trainable == 'head' else f'last {trainable}'} trainable)"
    if model.get("extra_matmul"):
        label += f" +matmul {model['extra_matmul']}"
    return label


def api_label(variant: dict[str, Any]) -> str:
    """The API column: fit or ctl, with what else tells the path apart (dataset distribution,
    a NumPy feed, tf-keras)."""
    api = variant["api"]
    if api == "ctl":
        from_fn = variant["distribute_dataset"] == "distribute_datasets_from_function"
        api = f"ctl ({'dsfn' if from_fn else 'dist'})"
    if axis_value(variant, "feed") == "numpy":
        api += " numpy"
    return api + (" tf-keras" if axis_value(variant, "keras") == "tf_keras" else "")
