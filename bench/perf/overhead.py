"""Where a run's wall time went: per-variant phases, fixed cost and the duty cycle.

Pure Python over records (no TensorFlow), so `bench run` prints it at the end and `bench perf`
aggregates it over repeated runs. A variant's *fixed cost* is everything outside its timed and
traced windows (a cluster's restarts, process start, imports, building, warmup, checks,
teardown, trace analysis); the run's *duty cycle* is the time spent inside timed windows over
the run's whole wall time. An interleaved variant's time idle at its gate is no cost of its own:
another variant runs meanwhile.
"""

from __future__ import annotations

import resource
import statistics
from pathlib import Path
from typing import Any

from bench.record.measured import Measurement, ParentTiming, Timing
from bench.record.model import VariantRecord
from bench.record.profiled import Trace

# In the order they happen; "other" is whatever the named phases do not cover.
PHASES = ("restarts", "start", "import", "build", "first_step", "warmup", "timed", "observed",
          "settling", "traced", "profiler", "loop_other", "after_loop", "teardown", "analysis",
          "other")
MEASURED_PHASES = ("timed", "observed", "traced")
# Untimed steps after each gate release ([measure] settle_steps): a cost of the measurement's
# design that grows with the rounds, so not a fixed cost per variant.
PER_WINDOW_PHASES = ("settling",)
# What running the variants costs with no harness at all and TensorFlow already imported: build
# each one, set its loop up (Keras compile and fit's own setup, or distributing the dataset and
# making its iterator: the rest of the loop is that, bench's part of it is microseconds), compile
# its step (the first step), run its warmup, timed, settling and traced steps.
WORKLOAD_PHASES = ("build", "loop_other", "first_step", "warmup", "timed", "observed", "settling",
                   "traced")
# The workload phases interleaved rounds run for several variants at once (one per core): each
# variant's untimed work before its first gate. The rest run one variant at a time.
CONCURRENT_PHASES = ("build", "loop_other", "first_step", "warmup")


def _status_field(pid: int | str, key: str) -> str | None:
    """The first value of `key:` in /proc/PID/status (None if the process or the line is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return line.split()[1]
    except (OSError, IndexError):
        pass
    return None


def peak_rss_mb(pid: int | str = "self") -> float | None:
    """A live process's own peak resident memory, VmHWM from /proc (None if it is gone).

    Not `ru_maxrss`: Linux carries the parent's peak over `exec` into it, so a runner started
    from a 400 MB process (a test session, say) would report 400 MB whatever it used itself.
    """
    if (kib := _status_field(pid, "VmHWM")) is not None:
        return int(kib) / 1024.0
    if pid == "self":  # no /proc: the best this platform offers (KiB on Linux)
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return None


def os_threads(pid: int | str = "self") -> int | None:
    """A live process's OS threads (Threads in /proc/PID/status; None if it is gone): TensorFlow's
    pools, tf.data's, and any a workload starts and never ends."""
    count = _status_field(pid, "Threads")
    return int(count) if count is not None else None


def harness_overhead(harness_s: float, steps: int, median_step_s: float) -> dict[str, float]:
    """bench's own per-step time (hooks, timer, progress) over the warmup and timed steps, and
    its mean per step as a share of the median step: the harness's cost on the figure it reports."""
    per_step = harness_s / steps if steps else 0.0
    return {"harness_s": harness_s,
            "harness_share": per_step / median_step_s if median_step_s > 0 else 0.0}


def _window_s(samples: list[float], per_sample: int) -> float:
    return sum(samples) * per_sample


def variant_phases(record: VariantRecord) -> dict[str, float]:
    """Seconds per phase of one variant, from its record; phases it never reached are 0."""
    timing = record.timing or Timing()
    worker = timing.phases or {}
    parent = timing.parent or ParentTiming()
    k = timing.steps_per_sample or 1
    trace = record.trace or Trace()
    measurement = record.measurement or Measurement()
    waits = measurement.gate_wait_by_segment or {}
    warmup = record.warmup_steps
    phases = dict.fromkeys(PHASES, 0.0)
    phases.update({
        # a cluster's attempts before the one that wrote the record (bench.launch.supervisor)
        "restarts": (record.cluster.restart_s or 0.0) if record.cluster else 0.0,
        "start": worker.get("start", 0.0),
        "import": worker.get("import", 0.0),
        "build": worker.get("build", 0.0),
        "first_step": warmup[0] * k if warmup else 0.0,
        "warmup": _window_s(warmup[1:], k),
        "timed": record.unobserved_window_s,  # the headline's windows
        "observed": record.observed_window_s,
        "settling": measurement.settling_s or 0.0,
        "traced": _window_s(record.traced_steps, k) + (measurement.trace_base_s or 0.0),
        "profiler": (trace.start_s or 0.0) + (trace.stop_s or 0.0),
        "after_loop": sum(worker.get(p, 0.0) for p in ("peak", "final_loss", "checkpoint",
                                                       "epoch_ends", "utilization", "checks")),
        "analysis": parent.analysis_s or 0.0,
    })
    in_loop = sum(phases[p] for p in ("first_step", "warmup", "timed", "observed", "settling",
                                      "traced", "profiler"))
    # the loop's own idle time at its gates (before each window and the trace) is no cost
    idle = sum(waits.get(segment, 0.0) for segment in ("window", "trace"))
    phases["loop_other"] = max(0.0, worker.get("loop", in_loop) - in_loop - idle)
    process_s = record.wall_s or 0.0
    worker_s = timing.worker_s
    if worker_s is not None and process_s:
        phases["teardown"] = max(0.0, process_s - worker_s - phases["restarts"])
    total = parent.total_s or process_s
    phases["other"] = max(0.0, total - sum(phases.values()))
    return phases


def fixed_cost_s(phases: dict[str, float]) -> float:
    return sum(v for k, v in phases.items() if k not in (*MEASURED_PHASES, *PER_WINDOW_PHASES))


def duty_cycle_ceiling(totals: dict[str, float], untimed_width: int = 1) -> float:
    """The duty cycle a harness that cost nothing would reach on these variants: the scenario's
    own warmup, compilation and build bound it, whatever the harness does. `untimed_width`
    variants do their untimed work at once (interleaved rounds), so it costs the wall clock
    that share of its sum."""
    concurrent = sum(totals[p] for p in CONCURRENT_PHASES)
    alone = sum(totals[p] for p in WORKLOAD_PHASES if p not in CONCURRENT_PHASES)
    workload = alone + concurrent / max(1, untimed_width)
    return (totals["timed"] + totals["observed"]) / workload if workload > 0 else 0.0


def run_breakdown(records: list[VariantRecord], wall_s: float,
                  extra: dict[str, Any] | None = None, untimed_width: int = 1) -> dict[str, Any]:
    """The run's totals: per-phase sums, fixed cost per variant, duty cycle (`untimed_width`:
    how many variants did their untimed work at once)."""
    per_variant = {str(r.variant_id): variant_phases(r) for r in records}
    totals = {p: sum(v[p] for v in per_variant.values()) for p in PHASES}
    fixed = [fixed_cost_s(v) for v in per_variant.values()]
    shares = [r.timing.harness_share for r in records
              if r.timing is not None and r.timing.harness_share is not None]
    windows = totals["timed"] + totals["observed"]
    return {
        "wall_s": wall_s,
        "timed_s": windows,
        "duty_cycle": windows / wall_s if wall_s > 0 else 0.0,
        "duty_cycle_ceiling": duty_cycle_ceiling(totals, untimed_width),
        "fixed_cost_median_s": statistics.median(fixed) if fixed else None,
        "phases_s": totals,
        "outside_variants_s": max(0.0, wall_s - sum(sum(v.values()) for v in per_variant.values())),
        "variants": per_variant,
        "harness_share_max": max(shares) if shares else None,
        **(extra or {}),
    }


def describe(breakdown: dict[str, Any]) -> str:
    """One line for the end of `bench run`."""
    fixed = breakdown["fixed_cost_median_s"]
    settling = breakdown["phases_s"].get("settling", 0.0)
    line = (f"time: {breakdown['wall_s']:.1f} s wall, {breakdown['timed_s']:.1f} s in timed "
            f"windows{f' and {settling:.1f} s settling before them' if settling else ''} "
            f"(duty cycle {breakdown['duty_cycle']:.0%}, at most "
            f"{breakdown['duty_cycle_ceiling']:.0%} for this scenario)")
    if fixed is not None:
        line += f"; fixed cost per variant {fixed:.1f} s median"
    if (share := breakdown.get("harness_share_max")) is not None:
        line += f"; bench's own per-step code ≤ {share:.2%} of the median step"
    if rss := breakdown.get("runner_peak_rss_mb"):
        line += f"; runner peak RSS {rss:.0f} MB"
    return line
