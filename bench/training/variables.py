"""Where a model's weights live: its large tables and the bytes each task or device holds.

ParameterServerStrategy exists for tables too large to mirror: its partitioner shards a variable
over the ps tasks (a `ShardedVariable` of shards), MirroredStrategy copies every variable to every
replica (a `MirroredVariable` of per-device values). Both are read here from the variables' own
devices, so a record says how each table was really placed, not how it was asked to be.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Any

TABLE_MIN_BYTES = 1 << 20  # a variable this large is listed on its own (embedding tables)
_TASK = re.compile(r"/job:(\w+)(?:/replica:\d+)?/task:(\d+)")
_DEVICE = re.compile(r"device:(\w+:\d+)")


def _place(device: str) -> str:
    """"ps:1" for a cluster task's device, "CPU:0" for a local device, "default" otherwise."""
    if (match := _TASK.search(device or "")) and match.group(1) != "localhost":
        return f"{match.group(1)}:{match.group(2)}"
    if match := _DEVICE.search(device or ""):
        return match.group(1)
    return "default"


def _parts(variable: Any) -> list[Any]:
    """The pieces a variable is stored as: a ShardedVariable's shards, a distributed variable's
    per-device values, or the variable itself (a Keras 3 variable wraps its tf.Variable)."""
    inner = getattr(variable, "_value", None)
    variable = inner if inner is not None and hasattr(inner, "device") else variable
    for attr in ("variables", "values", "_values"):
        pieces = getattr(variable, attr, None)
        if isinstance(pieces, list | tuple) and pieces and pieces[0] is not variable:
            return [p for piece in pieces for p in _parts(piece)]
    return [variable]


def _bytes(variable: Any) -> int:
    dtype = getattr(variable, "dtype", "float32")
    size = getattr(dtype, "size", None) or {"float16": 2, "bfloat16": 2, "float64": 8,
                                            "int64": 8}.get(str(dtype), 4)
    return math.prod(int(d) for d in variable.shape) * int(size)


def describe(model: Any) -> dict[str, Any]:
    """The model's weights by place: total bytes each task or device holds, and each table of
    TABLE_MIN_BYTES or more with its shards."""
    per_place: dict[str, int] = defaultdict(int)
    tables = []
    for variable in model.weights:
        parts = _parts(variable)
        placed: dict[str, int] = defaultdict(int)
        for part in parts:
            placed[_place(getattr(part, "device", ""))] += _bytes(part)
        for place, size in placed.items():
            per_place[place] += size
        logical = _bytes(variable)  # the whole table: a sharded variable's shape is its total
        if logical >= TABLE_MIN_BYTES:
            tables.append({"name": getattr(variable, "path", None) or variable.name,
                           "shape": [int(d) for d in variable.shape], "bytes": logical,
                           "pieces": len(parts), "bytes_by_place": dict(placed)})
    return {"bytes_by_place": dict(per_place), "tables": tables}

