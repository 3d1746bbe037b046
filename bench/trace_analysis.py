"""Attach the offline trace analysis to a finished variant's record.

The analysis runs `python -m bench.profiling analyze` in a child process with a time limit:
xprof's converter is native code, and a corrupt trace must cost a recorded error, never the run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ANALYSIS_TIMEOUT_S = 180.0


def analyze_in_subprocess(logdir: Path, bench_median_step_s: float | None,
                          timeout_s: float = ANALYSIS_TIMEOUT_S) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.profiling", "analyze", str(logdir)]
    if bench_median_step_s:
        cmd += ["--bench-median-step-s", repr(bench_median_step_s)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"trace analysis of {logdir} timed out after "
                                            f"{timeout_s:g} s"}
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": "error", "error": f"trace analysis of {logdir} exited with code "
                                            f"{out.returncode}: {tail}"}
    try:
        return json.loads(lines[-1])
    except ValueError:
        return {"status": "error", "error": f"trace analysis of {logdir} printed no JSON"}


def attach_trace_analysis(record: dict[str, Any]) -> dict[str, Any]:
    """Add `analysis` to the record's trace and to each cluster task that traced."""
    trace = record.get("trace")
    if record.get("status") != "ok" or not trace or trace.get("status") != "captured":
        return record
    # A traced "step" is one steps_per_execution block: compare like with like.
    per_trace_step = (record.get("timing") or {}).get("steps_per_sample") or 1
    median = (record.get("step_time") or {}).get("median")
    median = median * per_trace_step if median else None
    trace["analysis"] = analyze_in_subprocess(Path(trace["dir"]), median)
    cluster = record.get("cluster") or {}
    chief_dir = Path(trace["dir"])
    for task in cluster.get("tasks", []):
        task_dir = chief_dir.parent / task["task"]
        if task.get("status") != "ok" or not task_dir.is_dir():
            continue
        if task_dir == chief_dir:
            task["trace_analysis"] = trace["analysis"]
        else:
            task_median = (task.get("step_time") or {}).get("median")
            task_median = task_median * per_trace_step if task_median else None
            task["trace_analysis"] = analyze_in_subprocess(task_dir, task_median)
    return record
