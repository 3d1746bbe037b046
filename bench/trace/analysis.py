"""Offline analysis of one profiler trace logdir with xprof's converters: no server, no TensorFlow.

bench captures `<logdir>/plugins/profile/<run>/<host>.xplane.pb` (see bench.training.tracing). This module
turns the newest run into one JSON-serialisable dict: step time, a per-step breakdown (input,
compute, collective, other), xprof's own input-bound verdict, the top ops by self time, peak
memory, and a cross-check against bench's own timed median. `analyze` never raises: a missing
directory, a corrupt file or a failing converter is recorded in the dict ("status": "error" with
one line naming the file, or "warnings" when only an optional part failed).

xprof facts this relies on (xprof 2.24, CPU-only traces):
- overview_page's step table holds per-step rows; xprof drops the first and last traced step.
- On CPU, overview_page reports 0 device collective time and counts the collective ops inside
  host compute, so collective time comes from framework_op_stats (summed self time of the
  Collective*/NCCL/all-reduce ops, over the whole trace window) and is carved out of compute.
- The converters write caches next to their input files, so we hand them symlinks in a scratch
  directory: the logdir stays exactly as bench wrote it.

`python -m bench.trace.analysis analyze LOGDIR [--bench-median-step-s X]` prints the dict as one line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TOP_OPS = 10
# Op types that are collective communication (TF ops on CPU/GPU, NCCL, HLO names under XLA).
COLLECTIVE_TYPE = re.compile(r"collective|nccl|all-?reduce|all-?gather|reduce-?scatter|all-?to-?all",
                             re.IGNORECASE)
AGREEMENT = 1.25  # trace and bench step times within this factor of each other "agree"
MIB = 2 ** 20

_HTML_TAG = re.compile(r"<[^>]+>")


class ToolError(Exception):
    """One xprof conversion (or its output) failed; the message names the tool and the file."""


# --------------------------------------------------------------------------------------------
# Finding and converting the files


def find_xplanes(logdir: Path) -> list[Path]:
    """The newest run's `*.xplane.pb` files: each profiler start/stop writes a new run directory."""
    profile = Path(logdir) / "plugins" / "profile"
    if not profile.is_dir():
        return []
    runs = sorted((d for d in profile.iterdir() if d.is_dir() and any(d.glob("*.xplane.pb"))),
                  key=lambda d: d.name)  # xprof names runs YYYY_MM_DD_HH_MM_SS: name order is time order
    return sorted(runs[-1].glob("*.xplane.pb")) if runs else []


def _locate(logdir: Path) -> list[Path]:
    """find_xplanes, but say precisely what is missing when nothing is found."""
    profile = logdir / "plugins" / "profile"
    if not logdir.exists():
        raise ToolError(f"trace logdir does not exist: {logdir}")
    if not profile.is_dir():
        raise ToolError(f"no plugins/profile/ directory under {logdir} (not a profiler logdir?)")
    files = find_xplanes(logdir)
    if not files:
        raise ToolError(f"no *.xplane.pb file under {profile}")
    return files


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class Converter:
    """Runs xprof tools on symlinks to the trace files; failures become ToolError naming the file.

    The symlinks live in a scratch directory because xprof writes caches (op_stats, SSTABLE
    files) next to its inputs, and the analysed logdir should stay as bench wrote it.
    """

    def __init__(self, originals: list[Path], scratch: Path):
        self.originals = originals
        self.scratch = scratch
        self.staged = [self._stage(src) for src in originals]

    def _stage(self, src: Path) -> str:
        dst = self.scratch / src.name
        try:
            dst.symlink_to(src.resolve())
        except OSError:  # no symlinks here (some filesystems): a copy does the same job
            shutil.copyfile(src, dst)
        return str(dst)

    def _unstage(self, text: str) -> str:
        """xprof's messages name the scratch links; name the user's files instead."""
        for staged, original in zip(self.staged, self.originals, strict=True):
            text = text.replace(staged, str(original))
        return text.replace(str(self.scratch), str(self.originals[0].parent))

    def tool(self, name: str, params: dict[str, Any] | None = None, files: list[int] | None = None
             ) -> Any:
        """One tool's output, parsed from JSON. `files` picks staged files by index (default all)."""
        from xprof.convert import raw_to_tool_data

        paths = [self.staged[i] for i in files] if files is not None else self.staged
        named = ", ".join(self._unstage(p) for p in paths)
        failures: list[str] = []
        try:
            data, _ = raw_to_tool_data.xspace_to_tool_data(
                paths, name, {"use_saved_result": False, **(params or {})}, _capturing(failures))
        except Exception as exc:  # any converter crash is this tool's failure
            raise ToolError(f"{name} conversion raised {type(exc).__name__}: "
                            f"{_one_line(self._unstage(str(exc)))} ({named})") from exc
        if failures:
            raise ToolError(f"{name} conversion failed: {_one_line(self._unstage(failures[0]))}")
        if not data:
            raise ToolError(f"{name} returned no data for {named}")
        try:
            return json.loads(data)
        except ValueError as exc:
            raise ToolError(f"{name} returned output that is not JSON for {named}: {exc}") from exc


def _capturing(failures: list[str]) -> Callable[..., tuple[Any, bool]] | None:
    """xprof's converter call, keeping the error text it returns on failure (xprof drops it).

    None (xprof's default call, no message) if this xprof lays its internals out differently.
    """
    try:
        from xprof.convert import _pywrap_profiler_plugin as plugin
    except ImportError:
        return None

    def call(paths: Any, tool: str, options: Any) -> tuple[Any, bool]:
        data, ok = plugin.xspace_to_tools_data(paths, tool, options)
        if not ok:
            failures.append(data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data))
        return data, ok

    return call


@contextmanager
def _converter(files: list[Path]) -> Iterator[Converter]:
    with tempfile.TemporaryDirectory(prefix="bench-xprof-") as scratch:
        yield Converter(files, Path(scratch))


# --------------------------------------------------------------------------------------------
# Reading xprof's tables (Google DataTable JSON: {"cols": [{"id"}], "rows": [{"c": [{"v"}]}], "p": {}})


def _table_with(tables: Any, column: str) -> dict[str, Any]:
    """The first table having `column`: found by column id, not position, to survive layout changes."""
    for table in tables if isinstance(tables, list) else []:
        if isinstance(table, dict) and any(c.get("id") == column for c in table.get("cols", [])):
            return table
    raise ToolError(f"no table with a '{column}' column in xprof's output")


def _records(table: dict[str, Any]) -> list[dict[str, Any]]:
    ids = [c.get("id") for c in table.get("cols", [])]
    return [{k: (cell or {}).get("v") for k, cell in zip(ids, row.get("c", []), strict=False)}
            for row in table.get("rows", [])]


def _num(value: Any, digits: int = 3) -> float | None:
    """A rounded finite float, or None: the dict must stay valid JSON (no NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return round(number, digits) if math.isfinite(number) else None


def _float(value: Any) -> float:
    number = _num(value, 9)
    return 0.0 if number is None else number


def _plain(text: Any) -> str:
    """xprof's statements may carry HTML links; keep the words."""
    return _one_line(_HTML_TAG.sub("", str(text or "")))


# --------------------------------------------------------------------------------------------
# overview_page: steps, breakdown inputs, input verdict


def _step_rows(overview: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per-step rows and the summary properties of overview_page's step-time table."""
    table = _table_with(overview, "stepTimeMs")
    return _records(table), table.get("p", {})


def _step_time_stats(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    times = [_float(r.get("stepTimeMs")) for r in rows]
    return {"mean": _num(statistics.fmean(times)),
            "median": _num(statistics.median(times)),
            "stdev": _num(statistics.stdev(times)) if len(times) > 1 else 0.0,  # xprof's: sample stdev
            "min": _num(min(times)),
            "max": _num(max(times))}


def _mean_of(rows: list[dict[str, Any]], *columns: str) -> float:
    return statistics.fmean(sum(_float(r.get(c)) for c in columns) for r in rows)


def _input_bound_pct(rows: list[dict[str, Any]]) -> float | None:
    """Input share of all step time: what xprof's "only X% ... waiting for input" states."""
    total = sum(_float(r.get("stepTimeMs")) for r in rows)
    return _num(100.0 * sum(_float(r.get("infeedTimeMs")) for r in rows) / total, 2) if total else None


def _step_prefix(rows: list[dict[str, Any]]) -> str | None:
    """The Trace name of the steps ("train" from "train 3"), to find the markers in the trace."""
    name, _, number = str(rows[0].get("stepnum", "")).rpartition(" ")
    return name if name and number.isdigit() else None


# --------------------------------------------------------------------------------------------
# trace_viewer@: how many steps the whole trace holds (op stats cover all of them)


def count_traced_steps(conv: Converter, prefix: str) -> int:
    """Distinct "<prefix> N" step markers in the trace, first and last included."""
    trace = conv.tool("trace_viewer@", {"trace_viewer_options": {"search_prefix": prefix}})
    marker = re.compile(rf"{re.escape(prefix)} (\d+)")
    numbers = {m.group(1) for event in trace.get("traceEvents", [])
               if (m := marker.fullmatch(str(event.get("name", ""))))}
    if not numbers:
        raise ToolError(f"trace_viewer@ shows no '{prefix} N' step markers")
    return len(numbers)


# --------------------------------------------------------------------------------------------
# framework_op_stats: collectives and top ops


def _op_rows(op_stats: Any) -> list[dict[str, Any]]:
    """framework_op_stats rows without xprof's synthetic IDLE op."""
    rows = _records(_table_with(op_stats, "total_self_time"))
    return [r for r in rows if r.get("type") != "IDLE" and r.get("operation") != "IDLE"]


def _is_collective(row: dict[str, Any]) -> bool:
    return bool(COLLECTIVE_TYPE.search(str(row.get("type", ""))))


def collective_ms_total(rows: list[dict[str, Any]]) -> float:
    """Self time of the collective ops over the whole trace window, host and device, in ms."""
    return sum(_float(r.get("total_self_time")) for r in rows if _is_collective(r)) / 1000.0


def _busiest_side(rows: list[dict[str, Any]]) -> str:
    """Device ops where the device did work (GPU/TPU), else host ops (CPU-only: all ops are host)."""
    device = sum(_float(r.get("total_self_time")) for r in rows if r.get("host_or_device") == "Device")
    return "Device" if device > 0 else "Host"


def _is_tf_data(row: dict[str, Any]) -> bool:
    return row.get("type") == "Dataset"


def tf_data_ms_total(rows: list[dict[str, Any]]) -> float:
    """Self time of tf.data iterator ops: background threads, overlapping the steps."""
    return sum(_float(r.get("total_self_time")) for r in rows if _is_tf_data(r)) / 1000.0


def top_ops(rows: list[dict[str, Any]], side: str, limit: int = TOP_OPS) -> list[dict[str, Any]]:
    """The ops with the most self time on `side`; pct of that side's total self time.

    tf.data ops are left out: on CPU they run on prefetch threads alongside the steps and would
    top the list without being on the step's path (input_bound_pct says whether input matters).
    """
    ops = sorted((r for r in rows if r.get("host_or_device") == side and not _is_tf_data(r)),
                 key=lambda r: _float(r.get("total_self_time")), reverse=True)
    total_us = sum(_float(r.get("total_self_time")) for r in ops)
    return [{"name": str(r.get("operation")), "type": str(r.get("type")),
             "self_time_ms_total": _num(_float(r.get("total_self_time")) / 1000.0),
             "pct": _num(100.0 * _float(r.get("total_self_time")) / total_us, 2) if total_us else None,
             "occurrences": int(_float(r.get("occurrences")))}
            for r in ops[:limit]]


# --------------------------------------------------------------------------------------------
# memory_profile: peak bytes in use during the trace, per allocator


NO_ALLOCATOR_EVENTS = (
    "the trace holds no allocator events: TensorFlow's default CPU allocator records none (oneDNN's "
    "allocator, on by default on CPUs with AVX-512 or TF_ENABLE_ONEDNN_OPTS=1, and GPU allocators do)")


def peak_memory_by_allocator(conv: Converter) -> dict[str, float]:
    """Peak MiB in use during the trace window per `<host>:<allocator>` (xprof: one host per call).

    Empty when no allocator recorded events: on a CPU without oneDNN (AMD without AVX-512, say)
    TensorFlow's plain CPU allocator emits none, so there is nothing to take a peak of.
    """
    peaks: dict[str, float] = {}
    for index, path in enumerate(conv.originals):
        profile = conv.tool("memory_profile", files=[index])
        host = path.name.removesuffix(".xplane.pb")
        for allocator, body in (profile.get("memoryProfilePerAllocator") or {}).items():
            peak = (body.get("profileSummary") or {}).get("peakStats", {}).get("peakBytesInUse")
            if peak is not None:
                peaks[f"{host}:{allocator}"] = round(_float(peak) / MIB, 3)
    return peaks


# --------------------------------------------------------------------------------------------
# Putting it together


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
        result["warnings"].append(f"{what}: {_one_line(exc)}")
        return None


def step_breakdown(rows: list[dict[str, Any]], summary: dict[str, Any], collective_total_ms: float | None,
               traced_steps: int | None, hosts: int = 1) -> tuple[dict[str, float | None], list[str]]:
    """Average ms per step (and host): input, compute, collective, other (the rest, floored at 0).

    Also returns where each number came from. xprof merges hosts' steps but sums their op stats,
    hence the division of the op-stats collective time by `hosts`.
    """
    step = _mean_of(rows, "stepTimeMs")
    inp = _mean_of(rows, "infeedTimeMs")
    compute = _mean_of(rows, "hostComputeTimeMs", "deviceComputeTimeMs")
    device_collective = _mean_of(rows, "deviceCollectivesTimeMs")
    method = ["step, input (infeed), compute (host+device compute): overview_page per-step rows"]
    if device_collective > 0:
        collective: float | None = device_collective
        method.append("collective: overview_page device collectives")
    elif collective_total_ms is not None and traced_steps:
        collective = collective_total_ms / traced_steps / hosts
        compute = max(0.0, compute - collective)  # xprof counted these ops as compute
        per_host = f" / {hosts} hosts" if hosts > 1 else ""
        method.append(f"collective: framework_op_stats self time of collective ops / {traced_steps} traced "
                      f"steps{per_host} (summed over replica threads), taken out of compute")
    else:
        collective = None
        method.append("collective: unknown (see warnings)")
    other = max(0.0, step - inp - compute - (collective or 0.0))
    method.append("other: step - input - compute - collective, floored at 0 (idle, host overhead, "
                  "kernel launch, compile, outfeed)")
    hardware = summary.get("hardware_type")
    if hardware:
        method.append(f"hardware: {hardware}")
    return ({"input": _num(inp), "compute": _num(compute), "collective": _num(collective),
             "other": _num(other)}, method)


def cross_check(trace_step: dict[str, float | None], bench_median_step_s: float) -> dict[str, Any]:
    """Trace vs bench step time; disagreement is a finding (profiler overhead, other window)."""
    bench_ms = float(bench_median_step_s) * 1000.0
    if not math.isfinite(bench_ms) or bench_ms <= 0:
        raise ValueError(f"bench median step time must be a positive number, got {bench_median_step_s!r}")
    mean = trace_step["mean"] or 0.0
    ratio = mean / bench_ms
    return {"trace_mean_step_ms": trace_step["mean"], "trace_median_step_ms": trace_step["median"],
            "bench_median_step_ms": _num(bench_ms), "ratio": _num(ratio),
            "agrees": 1 / AGREEMENT <= ratio <= AGREEMENT}


def _traced_steps(result: dict[str, Any], conv: Converter, rows: list[dict[str, Any]]) -> int | None:
    """Steps in the whole trace (op stats' denominator); xprof's rows omit the first and last."""
    prefix = _step_prefix(rows)
    counted = _optional(result, "trace_viewer@",
                        lambda: count_traced_steps(conv, prefix) if prefix else None)
    if counted:
        return counted
    result["warnings"].append(f"traced steps not counted from the trace; assuming {len(rows)} analysed + "
                              "the first and last that xprof drops")
    return len(rows) + 2


def _analyze_files(result: dict[str, Any], conv: Converter, bench_median_step_s: float | None) -> None:
    """Fill `result`; only a failing overview (no step data at all) is fatal."""
    rows, summary = _step_rows(conv.tool("overview_page"))
    if not rows:
        raise ToolError(f"no steps in the trace {', '.join(map(str, conv.originals))}: were they "
                        "wrapped in tf.profiler.experimental.Trace(name, step_num=i, _r=1)?")
    result["steps_analyzed"] = len(rows)
    result["step_time_ms"] = _step_time_stats(rows)
    result["input_bound_pct"] = _input_bound_pct(rows)
    result["input_conclusion"] = _plain(summary.get("input_conclusion")) or None
    result["input_recommendation"] = _plain(summary.get("summary_nextstep")) or None

    ops = _optional(result, "framework_op_stats", lambda: _op_rows(conv.tool("framework_op_stats")))
    if ops == []:
        result["warnings"].append("framework_op_stats: no ops recorded")
    traced = _traced_steps(result, conv, rows)
    breakdown, method = step_breakdown(rows, summary, collective_ms_total(ops) if ops is not None else None,
                                   traced, hosts=len(conv.originals))
    result["traced_steps"] = traced
    result["breakdown_ms"] = breakdown
    if ops:
        side = _busiest_side(ops)
        result["top_ops_side"] = side.lower()
        result["top_ops"] = top_ops(ops, side)
        result["tf_data_self_time_ms_total"] = _num(tf_data_ms_total(ops))
        method.append(f"top_ops: framework_op_stats {result['top_ops_side']} ops by total self time "
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
        files = _locate(logdir)
        result["files"] = [str(p) for p in files]
        result["run"] = files[0].parent.name
        with _converter(files) as conv:
            _analyze_files(result, conv, bench_median_step_s)
        result["status"] = "ok"
    except ToolError as exc:
        result["error"] = _one_line(exc)
    except ImportError as exc:
        result["error"] = f"xprof is not importable ({_one_line(exc)}); cannot analyse {logdir}"
    except Exception as exc:  # a crash here is still an answer about this logdir
        result["error"] = f"analysis of {logdir} failed: {type(exc).__name__}: {_one_line(exc)}"
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
