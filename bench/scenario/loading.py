"""Loading scenario files: TOML in, a validated Scenario (or its Variants) out.

Every failure is one ScenarioError line naming the file and the field: the document's bounds
(bench.scenario.document), then pydantic's first error, translated, with a did-you-mean for
unknown keys among that table's own fields; then the cross-field rules and the matrix's size
(bench.scenario.size), counted before anything is expanded.

A file is validated in pydantic's strict mode: TOML has types, and a value of the wrong one is
a mistake to name, not to convert (`per_replica = true` is no batch of 1, `steps = "100"` no
number). An integer stands for a float (`timeout_s = 300`), as in strict mode.
"""

from __future__ import annotations

import difflib
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from bench.errors import BenchError, ScenarioError
from bench.scenario.document import check_document, read_document
from bench.scenario.matrix import expand
from bench.scenario.rules import (
    check_data_fields,
    check_fault,
    check_feed,
    check_imports,
    check_learning_rate,
    check_pairing,
)
from bench.scenario.schema import MeasureConfig, Scenario, Variant
from bench.scenario.size import check_scenario_size
from bench.scenario.target_rules import check_target


def _field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).startswith(("function-", "literal[", "int", "list[", "bool")):
            continue  # pydantic's internal validator tags, meaningless to a user
        else:
            out += f".{part}" if out else str(part)
    return out


def section_model(annotation: Any) -> tuple[type[BaseModel] | None, bool, bool]:
    """(the section model a field holds, whether it is a list of tables, whether a NAME -> table
    map): the tables of a scenario, read from the schema's types."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return (annotation, False, False) if annotation.__module__.startswith("bench.scenario") \
            and not annotation.__name__.startswith("_") else (None, False, False)
    if origin is typing.Annotated:
        return section_model(args[0])
    if origin is list and args:
        model, _, _ = section_model(args[0])
        return model, model is not None, False
    if origin is dict and len(args) == 2:
        model, _, _ = section_model(args[1])
        return model, False, model is not None
    for arg in args:  # X | None
        model, array, mapping = section_model(arg)
        if model is not None:
            return model, array, mapping
    return None, False, False


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """The fields of the table an error's location ends in, followed through the schema (list
    indices, map names and pydantic's validator tags are no fields and are passed over)."""
    model: type[BaseModel] = Scenario
    for part in loc:
        fields = {(info.alias or name): info for name, info in model.model_fields.items()}
        if isinstance(part, str) and part in fields:
            model = section_model(fields[part].annotation)[0] or model
    return sorted((f.alias or name) for name, f in model.model_fields.items())


def _describe(error: dict[str, Any]) -> tuple[str, str]:
    loc = tuple(error["loc"])
    field = _field_path(loc)
    if error["type"] == "extra_forbidden":
        key = str(loc[-1])
        allowed = _allowed_keys(loc[:-1])
        hint = difflib.get_close_matches(key, allowed, n=1)
        suggestion = f"; did you mean '{hint[0]}'?" if hint else f" (allowed: {', '.join(allowed)})"
        return field, f"unknown key{suggestion}"
    if error["type"] == "missing":
        return field, "required key is missing"
    message = str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    if error["type"] not in ("value_error", "model_type") and not isinstance(value, dict):
        message += f" (got {value!r})"
    return field, message


def parse_scenario(data: dict[str, Any], source: str = "<scenario>") -> Scenario:
    """Validate a decoded TOML document; raise ScenarioError naming the first bad field."""
    check_document(data, source)
    try:
        scenario = Scenario.model_validate(data, strict=True)
    except ValidationError as exc:
        # a misspelt key first: it is also why a required one is missing
        errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        field, message = _describe(errors[0])
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        raise ScenarioError(source, field or None, message) from None
    check_data_fields(scenario, source)
    check_pairing(scenario, source)
    check_feed(scenario, source)
    check_fault(scenario, source)
    check_learning_rate(scenario, source)
    check_imports(scenario, source)
    check_target(scenario, source)
    check_scenario_size(scenario, source)
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; every failure is a one-line ScenarioError."""
    path = Path(path)
    return parse_scenario(read_document(path), str(path))


def with_overrides(measure: MeasureConfig, update: dict[str, Any],
                   options: dict[str, str]) -> MeasureConfig:
    """`measure` with the command line's `update`, held to the file's bounds; a BenchError
    naming the option (`options`: field -> option) otherwise."""
    try:
        return measure.model_validate({**measure.model_dump(), **update})
    except ValidationError as exc:
        error = exc.errors()[0]
        option = options.get(str(error["loc"][0]), str(error["loc"][0]))
        raise BenchError(f"{option}: {error['msg']} (got {error.get('input')!r})") from None


def load_variants(path: str | Path) -> tuple[Scenario, list[Variant]]:
    scenario = load_scenario(path)
    return scenario, expand(scenario, str(path))
