"""Offline analysis of one profiler trace logdir with xprof's converters: no server, no TensorFlow.

bench captures `<logdir>/plugins/profile/<run>/<host>.xplane.pb` (see bench.training.tracing). This module
turns the newest run into one JSON-serialisable dict: step time, a per-step breakdown (input,
compute, collective, other), xprof's own input-bound verdict, the top ops by self time, peak
memory, and a cross-check against bench's own timed median. `analyze` never raises: a missing
directory, a corrupt file or a failing converter is recorded in the dict ("status": "error" with
one line naming the file, or "warnings" when only an optional part failed).

The files are found and converted by bench.trace.xprof_tools (which keeps xprof's caches out of
the logdir); the numbers are computed by bench.trace.metrics. This module assembles the dict.

`python -m bench.trace.analysis analyze LOGDIR [--bench-median-step-s X]` prints the dict as one line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.errors import one_line
from bench.trace.metrics import (
    NO_ALLOCATOR_EVENTS,
    busiest_side,
    collective_ms_total,
    count_traced_steps,
    cross_check,
    input_bound_pct,
    num,
    op_rows,
    peak_memory_by_allocator,
    plain_text,
    step_breakdown,
    step_prefix,
    step_rows,
    step_time_stats,
    tf_data_ms_total,
    top_ops,
    xla_op_rows,
)
from bench.trace.xprof_tools import Converter, ToolError, converting, locate_xplanes


def empty_result(logdir: Path) -> dict[str, Any]:
    """Every key, always present, so readers need not test for them."""
    return {"status": "error", "error": None, "warnings": [], "logdir": str(logdir), "run": None,
            "files": [], "steps_analyzed": 0, "traced_steps": None, "step_time_ms": None,
            "breakdown_ms": None, "input_bound_pct": None, "input_conclusion": None,
            "input_recommendation": None, "top_ops_side": None, "top_ops": [],
            "tf_data_self_time_ms_total": None, "peak_memory_mb": None,
            "peak_memory_mb_by_allocator": {}, "peak_memory_unavailable": None, "cross_check": None,
            "method": None}


def _optional(result: dict[str, Any], what: str, fn: Callable[[], Any]) -> Any:
    """Run one optional part; a failure becomes a warning and None, never the whole analysis."""
    try:
        return fn()
    except Exception as exc:  # partial results beat none
        result["warnings"].append(f"{what}: {one_line(exc)}")
        return None


def _traced_steps(result: dict[str, Any], conv: Converter, rows: list[dict[str, Any]]) -> int | None:
    """Steps in the whole trace (op stats' denominator); xprof's rows omit the first and last."""
    prefix = step_prefix(rows)
    counted = _optional(result, "trace_viewer@",
                        lambda: count_traced_steps(conv, prefix) if prefix else None)
    if counted:
        return counted
    result["warnings"].append(f"traced steps not counted from the trace; assuming {len(rows)} analysed + "
                              "the first and last that xprof drops")
    return len(rows) + 2


def _analyze_files(result: dict[str, Any], conv: Converter, bench_median_step_s: float | None) -> None:
    """Fill `result`; only a failing overview (no step data at all) is fatal."""
    rows, summary = step_rows(conv.tool("overview_page"))
    if not rows:
        raise ToolError(f"no steps in the trace {', '.join(map(str, conv.originals))}: were they "
                        "wrapped in tf.profiler.experimental.Trace(name, step_num=i, _r=1)?")
    result["steps_analyzed"] = len(rows)
    result["step_time_ms"] = step_time_stats(rows)
    result["input_bound_pct"] = input_bound_pct(rows)
    result["input_conclusion"] = plain_text(summary.get("input_conclusion")) or None
    result["input_recommendation"] = plain_text(summary.get("summary_nextstep")) or None

    ops = _optional(result, "framework_op_stats", lambda: op_rows(conv.tool("framework_op_stats")))
    op_source = "framework_op_stats"
    if ops == []:  # no TensorFlow ops: an XLA program's (JAX) executed HLO instructions
        ops = _optional(result, "trace_viewer", lambda: xla_op_rows(conv))
        op_source = "trace_viewer's XLA executions (HLO instructions)"
        if not ops:
            result["warnings"].append("framework_op_stats: no ops recorded")
    traced = _traced_steps(result, conv, rows)
    breakdown, method = step_breakdown(rows, summary, collective_ms_total(ops) if ops is not None else None,
                                       traced, hosts=len(conv.originals))
    result["traced_steps"] = traced
    result["breakdown_ms"] = breakdown
    if ops:
        side = busiest_side(ops)
        result["top_ops_side"] = side.lower()
        result["top_ops"] = top_ops(ops, side)
        result["tf_data_self_time_ms_total"] = num(tf_data_ms_total(ops))
        method.append(f"top_ops: {op_source} {result['top_ops_side']} ops by total self time "
                      "over the whole trace window, IDLE and tf.data ops excluded")
    method.append("input_bound_pct: infeed / step time over the analysed steps")

    peaks = _optional(result, "memory_profile", lambda: peak_memory_by_allocator(conv))
    if peaks:
        result["peak_memory_mb_by_allocator"] = peaks
        result["peak_memory_mb"] = max(peaks.values())
        method.append("peak_memory_mb: memory_profile peak bytes in use during the trace, MiB, "
                      "largest allocator")
    elif peaks == {}:
        result["peak_memory_unavailable"] = NO_ALLOCATOR_EVENTS
    if bench_median_step_s is not None:
        result["cross_check"] = _optional(result, "cross_check",
                                          lambda: cross_check(result["step_time_ms"], bench_median_step_s))
    result["method"] = "; ".join(method)


def analyze(logdir: Path, bench_median_step_s: float | None = None) -> dict[str, Any]:
    """Analyse the newest trace under `logdir`. Never raises: failures are in the returned dict."""
    logdir = Path(logdir)
    result = empty_result(logdir)
    try:
        files = locate_xplanes(logdir)
        result["files"] = [str(p) for p in files]
        result["run"] = files[0].parent.name
        with converting(files) as conv:
            _analyze_files(result, conv, bench_median_step_s)
        result["status"] = "ok"
    except ToolError as exc:
        result["error"] = one_line(exc)
    except ImportError as exc:
        result["error"] = f"xprof is not importable ({one_line(exc)}); cannot analyse {logdir}"
    except Exception as exc:  # a crash here is still an answer about this logdir
        # str(exc): the type is named already, so an exception without a message adds nothing
        result["error"] = f"analysis of {logdir} failed: {type(exc).__name__}: {one_line(str(exc))}"
    return result


def main(argv: list[str] | None = None) -> int:
    """CLI: one JSON line on stdout, exit 0 even when the analysis failed (the JSON says so)."""
    parser = argparse.ArgumentParser(prog="python -m bench.trace.analysis",
                                     description="Analyse a profiler trace logdir offline with xprof.")
    commands = parser.add_subparsers(dest="command", required=True)
    cmd = commands.add_parser("analyze", help="analyse the newest run under LOGDIR/plugins/profile/")
    cmd.add_argument("logdir", type=Path)
    cmd.add_argument("--bench-median-step-s", type=float, default=None,
                     help="bench's timed median step time, to cross-check the trace against")
    cmd.add_argument("--out", type=Path, default=None,
                     help="also write the JSON to this file (how bench's runner reads it)")
    args = parser.parse_args(argv)
    # xprof's native code logs every conversion step to stderr; errors end up in the JSON anyway.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    text = json.dumps(analyze(args.logdir, args.bench_median_step_s))
    if args.out:
        args.out.write_text(text)
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
