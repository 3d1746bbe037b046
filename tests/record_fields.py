"""The field names of a record's JSON that its typed model (bench.record.model.VariantRecord and
its sections) does not declare: what tests/docs_samples.py holds the record example to."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel


def _nested(annotation: Any) -> tuple[str | None, type[BaseModel] | None]:
    """Whether a field holds a model ("one"), a list of them or a dict of them, and which."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "one", annotation
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _nested(args[0])
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            if (found := _nested(arg))[0] is not None:
                return found
    if origin is list and args and _nested(args[0])[0] == "one":
        return "list", _nested(args[0])[1]
    if origin is dict and len(args) == 2 and _nested(args[1])[0] == "one":
        return "dict", _nested(args[1])[1]
    return None, None


def unknown_fields(data: dict[str, Any], model: type[BaseModel] | None = None,
                   where: str = "") -> list[str]:
    """Every key of `data`, at any depth, that its model declares no field for ("a.b.c")."""
    if model is None:
        from bench.record.model import VariantRecord

        model = VariantRecord
    fields = {info.alias or name: info for name, info in model.model_fields.items()}
    out = []
    for key, value in data.items():
        info = fields.get(key)
        if info is None:
            out.append(f"{where}{key}")
            continue
        kind, inner = _nested(info.annotation)
        if not where and key == "variant":  # the scenario's Variant, which the record types loosely
            from bench.scenario.schema import Variant

            kind, inner = "one", Variant
        if inner is None:
            continue
        if kind == "one" and isinstance(value, dict):
            out += unknown_fields(value, inner, f"{where}{key}.")
        elif kind == "list" and isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    out += unknown_fields(item, inner, f"{where}{key}[].")
        elif kind == "dict" and isinstance(value, dict):
            for name, item in value.items():
                if isinstance(item, dict):
                    out += unknown_fields(item, inner, f"{where}{key}.{name}.")
    return sorted(set(out))


def field_paths(data: dict[str, Any], depth: int = 2, where: str = "") -> set[str]:
    """The field names of a record's JSON to `depth` ("measurement", "measurement.window_s"):
    what two records of the same kind of variant, written by the same code, share."""
    out = set()
    for key, value in data.items():
        out.add(f"{where}{key}")
        if depth > 1 and isinstance(value, dict):
            out |= field_paths(value, depth - 1, f"{where}{key}.")
    return out
