"""Numbers from xprof's tool outputs: step times, the per-step breakdown, top ops, peak memory, and
the cross-check against bench's own timing.

xprof facts this relies on (xprof 2.24, CPU-only traces):
- overview_page's step table holds per-step rows; xprof drops the first and last traced step.
- On CPU, overview_page reports 0 device collective time and counts the collective ops inside
  host compute, so collective time comes from framework_op_stats (summed self time of the
  Collective*/NCCL/all-reduce ops, over the whole trace window) and is carved out of compute.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any

from bench.errors import one_line
from bench.trace.xprof_tools import XPLANE_SUFFIX, Converter, ToolError

TOP_OPS = 10
# Op types that are collective communication (TF ops on CPU/GPU, NCCL, HLO names under XLA).
COLLECTIVE_TYPE = re.compile(r"collective|nccl|all-?reduce|all-?gather|reduce-?scatter|all-?to-?all",
                             re.IGNORECASE)
AGREEMENT = 1.25  # trace and bench step times within this factor of each other "agree"
MIB = 2 ** 20

_HTML_TAG = re.compile(r"<[^>]+>")


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


def num(value: Any, digits: int = 3) -> float | None:
    """A rounded finite float, or None: the dict must stay valid JSON (no NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return round(number, digits) if math.isfinite(number) else None


def _float(value: Any) -> float:
    number = num(value, 9)
    return 0.0 if number is None else number


def plain_text(text: Any) -> str:
    """xprof's statements may carry HTML links; keep the words."""
    return one_line(_HTML_TAG.sub("", str(text or "")))


# --------------------------------------------------------------------------------------------
# overview_page: steps, breakdown inputs, input verdict


def step_rows(overview: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per-step rows and the summary properties of overview_page's step-time table."""
    table = _table_with(overview, "stepTimeMs")
    return _records(table), table.get("p", {})


def step_time_stats(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    times = [_float(r.get("stepTimeMs")) for r in rows]
    return {"mean": num(statistics.fmean(times)),
            "median": num(statistics.median(times)),
            "stdev": num(statistics.stdev(times)) if len(times) > 1 else 0.0,  # xprof's: sample stdev
            "min": num(min(times)),
            "max": num(max(times))}


def _mean_of(rows: list[dict[str, Any]], *columns: str) -> float:
    return statistics.fmean(sum(_float(r.get(c)) for c in columns) for r in rows)


def input_bound_pct(rows: list[dict[str, Any]]) -> float | None:
    """Input share of all step time: what xprof's "only X% ... waiting for input" states."""
    total = sum(_float(r.get("stepTimeMs")) for r in rows)
    return num(100.0 * sum(_float(r.get("infeedTimeMs")) for r in rows) / total, 2) if total else None


def step_prefix(rows: list[dict[str, Any]]) -> str | None:
    """The Trace name of the steps ("train" from "train 3"), to find the markers in the trace."""
    name, _, number = str(rows[0].get("stepnum", "")).rpartition(" ")
    return name if name and number.isdigit() else None


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
    return ({"input": num(inp), "compute": num(compute), "collective": num(collective),
             "other": num(other)}, method)


def cross_check(trace_step: dict[str, float | None], bench_median_step_s: float) -> dict[str, Any]:
    """Trace vs bench step time; disagreement is a finding (profiler overhead, other window)."""
    bench_ms = float(bench_median_step_s) * 1000.0
    if not math.isfinite(bench_ms) or bench_ms <= 0:
        raise ValueError(f"bench median step time must be a positive number, got {bench_median_step_s!r}")
    mean = trace_step["mean"] or 0.0
    ratio = mean / bench_ms
    return {"trace_mean_step_ms": trace_step["mean"], "trace_median_step_ms": trace_step["median"],
            "bench_median_step_ms": num(bench_ms), "ratio": num(ratio),
            "agrees": 1 / AGREEMENT <= ratio <= AGREEMENT}


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


def op_rows(op_stats: Any) -> list[dict[str, Any]]:
    """framework_op_stats rows without xprof's synthetic IDLE op."""
    rows = _records(_table_with(op_stats, "total_self_time"))
    return [r for r in rows if r.get("type") != "IDLE" and r.get("operation") != "IDLE"]


# XLA's CPU runtime (JAX, Keras on JAX) records each executed HLO instruction as an event named
# after it ("dot", "ynn_fusion.6", "all-reduce.1") on its execution threads; its own runtime events
# carry "::" or spaces ("ThunkExecutor::Execute", "H2D Dispatch") and are not ops.
XLA_EXECUTION_THREAD = re.compile(r"^tf_XLA(Eigen|PjRtCpuClient)")
HLO_NAME = re.compile(r"^[a-z_][\w\-]*(\.\d+)?$")


def xla_op_rows(conv: Converter) -> list[dict[str, Any]]:
    """Rows as op_rows gives them, from the HLO instructions XLA's CPU runtime executed: where a
    trace has no framework ops (framework_op_stats knows TensorFlow's ops only), its XLA ops."""
    trace = conv.tool("trace_viewer")
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else []
    threads = {(e.get("pid"), e.get("tid")) for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"
               and XLA_EXECUTION_THREAD.match(str((e.get("args") or {}).get("name", "")))}
    totals: dict[str, list[float]] = {}
    for e in events:
        name = str(e.get("name", ""))
        if e.get("ph") == "X" and (e.get("pid"), e.get("tid")) in threads and HLO_NAME.match(name):
            total = totals.setdefault(name, [0.0, 0.0])
            total[0] += _float(e.get("dur"))
            total[1] += 1
    return [{"operation": name, "type": re.sub(r"\.\d+$", "", name), "host_or_device": "Host",
             "total_self_time": us, "occurrences": count}
            for name, (us, count) in totals.items()]


def _is_collective(row: dict[str, Any]) -> bool:
    return bool(COLLECTIVE_TYPE.search(str(row.get("type", ""))))


def collective_ms_total(rows: list[dict[str, Any]]) -> float:
    """Self time of the collective ops over the whole trace window, host and device, in ms."""
    return sum(_float(r.get("total_self_time")) for r in rows if _is_collective(r)) / 1000.0


def busiest_side(rows: list[dict[str, Any]]) -> str:
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
             "self_time_ms_total": num(_float(r.get("total_self_time")) / 1000.0),
             "pct": num(100.0 * _float(r.get("total_self_time")) / total_us, 2) if total_us else None,
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
        host = path.name.removesuffix(XPLANE_SUFFIX)
        for allocator, body in (profile.get("memoryProfilePerAllocator") or {}).items():
            peak = (body.get("profileSummary") or {}).get("peakStats", {}).get("peakBytesInUse")
            if peak is not None:
                peaks[f"{host}:{allocator}"] = round(_float(peak) / MIB, 3)
    return peaks
