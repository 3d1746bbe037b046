"""The shape of a variant record, shared by workers (ok/skipped/failed) and the parent (crash, timeout).

Keeping one constructor means a record written by a dying worker's parent has the same keys as
one written by a healthy worker, so report and compare never special-case them.
"""

from __future__ import annotations

import re
import traceback
from datetime import UTC, datetime
from typing import Any

from bench.scenario.schema import Variant

STATUSES = ("ok", "skipped", "failed")


def base_record(variant: Variant, status: str = "failed") -> dict[str, Any]:
    return {
        "schema": 1,
        "variant_id": variant.id,
        "index": variant.index,
        "status": status,
        "reason": None,
        "error": None,
        "variant": variant.model_dump(mode="json", by_alias=True),
        "finished_at": None,
    }


def finish(record: dict[str, Any], status: str, reason: str | None = None,
           error: dict[str, Any] | None = None) -> dict[str, Any]:
    assert status in STATUSES
    record.update(status=status, reason=reason, error=error,
                  finished_at=datetime.now(UTC).isoformat(timespec="seconds"))
    return record


_GENERIC_LINES = ("Graph execution error:", "Detected at node", "File \"", "Stack trace",
                  "in user code:", "return ", "raise ",
                  "[[", "Traceback", "Function call stack", "Detected unsupported operations")


_NESTED_ERROR = re.compile(r"^\s*[A-Za-z_][\w.]*(?:Error|Exception): (.+)$", re.MULTILINE)


def informative_line(text: str) -> str:
    """The line of an error text that says what happened.

    TensorFlow's errors open with boilerplate ("Graph execution error:", a node's stack trace);
    the cause ("...stopped sending heartbeats: /job:worker/replica:0/task:1") comes later. A line
    ending in ':' is joined with the next, which usually names the task or op it introduces.
    """
    nested = _NESTED_ERROR.findall(text)  # autograph re-raises with the real error at the end
    if nested:
        return nested[-1].strip()[:500]
    lines = [ln.strip() for ln in text.splitlines()]
    for i, line in enumerate(lines):
        if not line or line.startswith(_GENERIC_LINES) or line.startswith(("<", "@")):
            continue
        if line.endswith(":") and i + 1 < len(lines) and lines[i + 1]:
            line = f"{line} {lines[i + 1]}"
        return line[:500]
    return (lines[0] if lines else "")[:500]


def error_from_exception(exc: BaseException, **extra: Any) -> dict[str, Any]:
    """Keep the one-line cause for tables and the full traceback for whoever digs deeper."""
    return {
        "type": type(exc).__name__,
        "message": informative_line(str(exc)),
        "traceback": "".join(traceback.format_exception(exc))[-8000:],
        **extra,
    }


def extra_failed(exc: Exception) -> dict[str, Any]:
    """An extra figure or check that could not be computed: reported, never the variant's fate."""
    return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}


def failed(variant: Variant, reason: str, **error: Any) -> dict[str, Any]:
    return finish(base_record(variant), "failed", reason=reason, error=error or None)


def control_role(record: dict[str, Any]) -> str | None:
    """"baseline" and "twin" (the A/A control), "yardstick" (the fixed calibration workload),
    or None for an ordinary variant."""
    return (record.get("variant") or {}).get("control")


def is_twin(record: dict[str, Any]) -> bool:
    return control_role(record) == "twin"


def counts_as_variant(record: dict[str, Any]) -> bool:
    """The control twin and the yardstick are kept in the run but are never variants of
    comparisons, scaling, charts or the gate: they measure the machine, not the code."""
    return control_role(record) not in ("twin", "yardstick")


# Per-step observation, or the profiler, is flagged as costing the steps when the interval of
# its ratio (observed ÷ unobserved, traced ÷ untraced, side by side) lies wholly above this: by
# the worker in the record, and by the report's measurement-cost chart.
OBSERVER_FLAG_RATIO = 1.02


def headline(record: dict[str, Any]) -> float:
    """examples/s over the timed windows' wall clock (older records: the median-step rate)."""
    throughput = record["throughput"]
    return float(throughput.get("headline") or throughput["median"])


def scenario_data_sources(records: list[dict[str, Any]]) -> list[str]:
    """The data the scenario's variants read; the yardstick reads its own fixed data."""
    return sorted({str(r["data_source"]) for r in records
                   if r.get("data_source") and control_role(r) != "yardstick"})
