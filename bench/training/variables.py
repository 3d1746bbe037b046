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
_PART = re.compile(r"/part_\d+")


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


def _table(variable: Any) -> str:
    """A variable's name without the shard suffix tf-keras gives a partitioned table's parts
    ("user_embedding/embeddings/part_1:0" is a part of "user_embedding/embeddings")."""
    name = getattr(variable, "path", None) or variable.name
    return _PART.sub("", name).removesuffix(":0")


def describe(model: Any) -> dict[str, Any]:
    """The model's weights by place: total bytes each task or device holds, and each table of
    TABLE_MIN_BYTES or more with its pieces (shards or copies) and where they are."""
    per_place: dict[str, int] = defaultdict(int)
    tables: dict[str, dict[str, Any]] = {}
    for variable in model.weights:
        parts = _parts(variable)
        name = _table(variable)
        table = tables.setdefault(name, {"name": name, "rows": 0, "bytes": 0, "pieces": 0,
                                         "bytes_by_place": defaultdict(int)})
        table["rows"] += int(variable.shape[0]) if len(variable.shape) else 1
        table["bytes"] += _bytes(variable)  # a sharded variable's shape is the whole table
        for part in parts:
            size = _bytes(part)
            place = _place(getattr(part, "device", ""))
            per_place[place] += size
            table["bytes_by_place"][place] += size
            table["pieces"] += 1
    large = [{**t, "bytes_by_place": dict(t["bytes_by_place"])} for t in tables.values()
             if t["bytes"] >= TABLE_MIN_BYTES]
    return {"bytes_by_place": dict(per_place), "tables": large}
