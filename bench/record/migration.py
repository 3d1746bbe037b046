"""Reading old records as the current schema: one step per schema, applied as a record loads.

Schema 1 is what bench wrote before the record was typed (no `schema` field; a nightly store
holds months of them). It has the fields of schema 2, except those its bench did not measure
yet; `to_schema_2` adds them, derived as that bench meant them, so that every reader reads
schema 2 alone. It only adds: every field the record holds keeps its value (as asv's
`Results.update_to_2` does for its result files).
"""

from __future__ import annotations

from typing import Any

from bench.record.profiled import TRACE_INFLATION_LIMIT


def to_schema_2(old: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 record as schema 2 (a new dict; `old` is left as it was). A field of the wrong
    type is left as it is, for the record's validation to name. What it adds:

    - `throughput.headline`: before it, the typical-step rate (`median`) was the throughput; it
      stands in.
    - `measurement.window_s` and `observed_window_s`: before the observed windows the per-step
      windows were the headline's, timed by their own clock where `window_s` holds none (each
      window's samples times the steps behind each sample); no window was observed apart.
    - `trace.overhead_flagged`: before the interval of its ratio, tracing was flagged by the
      ratio alone, over 1.5 (TRACE_INFLATION_LIMIT).
    """
    new = {**old, "schema": 2}
    throughput = _section(old, "throughput")
    if throughput.get("headline") is None and _is_number(throughput.get("median")):
        new["throughput"] = {**throughput, "headline": throughput["median"]}
    measurement = _section(old, "measurement")
    if "observed_window_s" not in measurement and (
            windows := _own_clocks(_section(old, "samples").get("timed"),
                                   _section(old, "timing").get("steps_per_sample") or 1)):
        new["measurement"] = {"window_s": windows, **measurement, "observed_window_s": []}
    trace = _section(old, "trace")
    if "overhead_flagged" not in trace and _is_number(ratio := trace.get("overhead_ratio")):
        new["trace"] = {**trace, "overhead_flagged": ratio > TRACE_INFLATION_LIMIT}
    return new


def _section(record: dict[str, Any], name: str) -> dict[str, Any]:
    value = record.get(name)
    return value if isinstance(value, dict) else {}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _own_clocks(windows: Any, steps_per_sample: Any) -> list[float] | None:
    """Each window's samples times the steps behind each sample; None without windows of
    numbers."""
    if not isinstance(windows, list) or not windows or not _is_number(steps_per_sample) or not all(
            isinstance(w, list) and all(map(_is_number, w)) for w in windows):
        return None
    return [steps_per_sample * sum(w) for w in windows]


# Each schema's step to the next: a record of schema N loads through UPGRADES[N], then N + 1's.
UPGRADES = {1: to_schema_2}


def upgrade(data: dict[str, Any], schema: int) -> dict[str, Any]:
    """`data`, a record of `schema`, as the current schema."""
    while schema in UPGRADES:
        data, schema = UPGRADES[schema](data), schema + 1
    return data
