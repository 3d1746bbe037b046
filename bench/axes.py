"""What tells a variant record from its siblings, beyond strategy, replicas, API and precision.

Pure and light (no pydantic): `bench compare`, scaling efficiency and the report key records by
it, and `bench compare` must start instantly.
"""

from __future__ import annotations

from typing import Any

# Input-pipeline settings that a scenario may sweep as matrix axes.
DATA_AXES = ("map_parallelism", "prefetch")


def pipeline_axes(variant: dict[str, Any]) -> tuple[Any, ...]:
    """A variant record's input-pipeline axis values: part of what tells it from its siblings
    (records from before these axes existed hold the defaults)."""
    data = variant.get("data") or {}
    return tuple(data.get(field, "autotune") for field in DATA_AXES)
