"""The record's sections a loop's result makes: its timing, steps, headline, windows, observer
and samples. Every backend's loop runs on the same Schedule, LoopClock and Gate, so the same
code writes what they measured: the measurement design does not fork per backend."""

from __future__ import annotations

from typing import Any

from bench.perf import overhead
from bench.record import measured
from bench.timing import Stats, Throughput, iterator_speeds, steady_state_start
from bench.training import observer
from bench.training.gate import Gate
from bench.training.loop_clock import LoopResult
from bench.training.schedule import Schedule


def first_pass(schedule: Schedule, global_batch: int,
               cached_examples: int | None) -> measured.FirstPass | None:
    """Where the headline's steps fell against a cached pipeline's first pass, for a loop on
    one iterator (fresh iterators pass over the set afresh); None otherwise."""
    if not cached_examples or schedule.iterators != 1:
        return None
    steps = -(-cached_examples // global_batch)
    return measured.FirstPass(train_examples=cached_examples, pass_steps=steps,
                              timed_steps_inside=schedule.timed_steps_before(steps),
                              timed_steps=schedule.timed_steps)


def loop_sections(result: LoopResult, schedule: Schedule, gate: Gate, rates: Throughput,
                  step_stats: Stats, *, global_batch: int, steps_per_call: int,
                  repeats: int, startup_s: float,
                  phases_s: dict[str, float], epoch_ends: Any = None,
                  coordinated: bool = False, cached_examples: int | None = None
                  ) -> dict[str, Any]:
    """The sections of `result` run on `schedule` (as sized), with its headline `rates` and
    its observed steps' `step_stats` (which the caller's MFU reads too); a coordinated loop
    (the ParameterServer's) has no per-step observer to judge. `cached_examples`: the size of
    the training set a cached pipeline passes over (None: not cached, or unknown)."""
    k, steps = steps_per_call, schedule.window_steps
    warmup = (result.samples.get("warmup") or [[]])[0]
    windows = result.samples.get("observed") or []
    unobserved_s = result.clocks.get("unobserved") or []
    observed_s = result.clocks.get("observed") or []
    return {
        "timing": measured.Timing(
            import_s=phases_s["import"], build_s=phases_s["build"], startup_s=startup_s,
            first_step_s=warmup[0] if warmup else None, warmup_s=k * sum(warmup),
            warmup_steps=schedule.warmup_steps, timed_steps=schedule.timed_steps,
            steps_per_sample=k, repeats=repeats, phases=phases_s,
            **overhead.harness_overhead(result.harness_s, schedule.untraced_steps,
                                        step_stats.median)),
        "step_time": measured.StepTime(**step_stats.to_dict()),
        "throughput": measured.Throughput(**rates.to_dict()),
        "measurement": measured.Measurement(
            interleaved=gate.interleaved, settle_steps=schedule.settle_steps,
            settling_s=result.settling_s, window_steps=steps,
            observed_window_steps=schedule.observed_window_steps,
            gate_wait_s=gate.waited_s, gate_wait_by_segment=gate.waited_by_segment,
            window_s=unobserved_s, observed_window_s=observed_s,
            trace_base_s=sum(result.clocks.get("trace_base") or []), order=result.order,
            speeds=measured.Speeds(**iterator_speeds(
                unobserved_s, [schedule.iterator_of(t) for t in range(len(unobserved_s))],
                global_batch * steps)),
            window_started_at=result.window_started_at, epoch_ends=epoch_ends,
            first_pass=first_pass(schedule, global_batch, cached_examples)),
        "observer": (measured.Observer(**observer.summary(
            [w / steps for w in unobserved_s],
            [w / schedule.observed_window_steps for w in observed_s]))
                     if not coordinated else
                     measured.Observer(status="skipped", reason="the coordinator syncs once per "
                                                                "block of steps in both windows")),
        "steady_state_start": steady_state_start(windows),
        "samples": measured.Samples(warmup=warmup, timed=windows,
                                    traced=(result.samples.get("traced") or [[]])[0],
                                    trace_base=(result.samples.get("trace_base") or [[]])[0]),
    }
