"""Attach the offline trace analysis to a finished variant's record.

The analysis runs `python -m bench.trace.analysis analyze` in a child process with a time limit:
xprof's converter is native code, and a corrupt trace must cost a recorded error, never the run.
With the run's fork server the child is forked (xprof already imported) instead of spawned.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from bench import entrypoints
from bench.launch.local import worker_env
from bench.launch.process import WorkerProcess, last_error_line
from bench.record.measured import StepTime
from bench.record.model import VariantRecord
from bench.record.profiled import TraceAnalysis

if TYPE_CHECKING:
    from bench.launch.forkserver import ForkServer

ANALYSIS_TIMEOUT_S = 180.0


def analyze_in_subprocess(logdir: Path, bench_median_step_s: float | None, logs_dir: Path,
                          name: str, timeout_s: float = ANALYSIS_TIMEOUT_S,
                          forkserver: ForkServer | None = None,
                          python: str | None = None) -> TraceAnalysis:
    """The analysis of `logdir`, or an error saying why there is none; its output and log go to
    `logs_dir` as `<name>.analysis.json` / `.log`. `python`: the variant's environment's
    interpreter (the xprof that reads the trace is the one installed beside the TensorFlow that
    wrote it). An analysis with a field the record does not have is such an error too."""
    out, log = logs_dir / f"{name}.analysis.json", logs_dir / f"{name}.analysis.log"
    out.unlink(missing_ok=True)
    cmd = entrypoints.command(entrypoints.TRACE_ANALYSIS, "analyze", str(logdir), "--out", str(out),
                              python=python)
    if bench_median_step_s:
        cmd += ["--bench-median-step-s", repr(bench_median_step_s)]
    with WorkerProcess(cmd, worker_env({"TF_CPP_MIN_LOG_LEVEL": "3"}), log,
                       forkserver=forkserver) as proc:
        outcome = proc.wait(timeout_s)
    if outcome.timed_out:
        return TraceAnalysis(status="error", error=f"trace analysis of {logdir} timed out after "
                                                   f"{timeout_s:g} s")
    if not out.exists():
        tail = last_error_line(log) or "no output"
        return TraceAnalysis(status="error", error=f"trace analysis of {logdir} exited with code "
                                                   f"{outcome.returncode}: {tail}")
    try:
        result = TraceAnalysis.model_validate_json(out.read_text())
    except ValidationError as exc:  # not JSON, or a field the record does not have
        first = exc.errors()[0]
        loc = ".".join(map(str, first["loc"]))
        why = f"{loc}: {first['msg']}" if loc else first["msg"]
        return TraceAnalysis(status="error",
                             error=f"trace analysis of {logdir} wrote no analysis ({why})")
    out.unlink()
    if result.status == "ok":  # the record holds the result; xprof's chatter is noise
        log.unlink(missing_ok=True)
    return result


def attach_trace_analysis(record: VariantRecord, logs_dir: Path,
                          forkserver: ForkServer | None = None,
                          python: str | None = None) -> VariantRecord:
    """Add `analysis` to the record's trace and to each cluster task that traced; a failed
    analysis leaves its log in `logs_dir`. `forkserver` and `python` are the variant's
    environment's."""
    trace = record.trace
    if not record.ok or trace is None or trace.status != "captured" or trace.dir is None:
        return record
    # A traced "step" is one steps_per_execution block: compare like with like.
    per_trace_step = (record.timing.steps_per_sample if record.timing else None) or 1

    def trace_step_median(step_time: StepTime | None) -> float | None:
        median = step_time.median if step_time else None
        return median * per_trace_step if median else None

    variant = record.variant_id if record.variant_id is not None else "variant"
    trace.analysis = analyze_in_subprocess(Path(trace.dir), trace_step_median(record.step_time),
                                           logs_dir, variant, forkserver=forkserver,
                                           python=python)
    chief_dir = Path(trace.dir)
    for task in (record.cluster.tasks if record.cluster else None) or []:
        task_dir = chief_dir.parent / str(task.task)
        if task.status != "ok" or not task_dir.is_dir():
            continue
        if task_dir == chief_dir:
            task.trace_analysis = trace.analysis
        else:
            task.trace_analysis = analyze_in_subprocess(
                task_dir, trace_step_median(task.step_time), logs_dir, f"{variant}.{task.task}",
                forkserver=forkserver, python=python)
    return record
