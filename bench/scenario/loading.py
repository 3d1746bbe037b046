"""Loading scenario files: TOML in, a validated Scenario (or its Variants) out.

Every failure is one ScenarioError line naming the file and the field: pydantic's first error,
translated, with a did-you-mean for unknown keys; then the cross-field rules.
"""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from bench.errors import ScenarioError
from bench.scenario.environment import EnvironmentConfig
from bench.scenario.fault import FaultConfig, FaultKill
from bench.scenario.matrix import expand
from bench.scenario.rules import (
    check_data_fields,
    check_fault,
    check_feed,
    check_imports,
    check_learning_rate,
    check_pairing,
)
from bench.scenario.schema import (
    BatchConfig,
    CheckConfig,
    CheckpointConfig,
    ClusterConfig,
    CompareConfig,
    DataConfig,
    MeasureConfig,
    ModelConfig,
    Scenario,
    ScenarioMeta,
    StrategyConfig,
    TrainConfig,
    Variant,
)


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


_MODELS_BY_SECTION: dict[str, type[BaseModel]] = {
    "": Scenario, "scenario": ScenarioMeta, "model": ModelConfig, "data": DataConfig,
    "batch": BatchConfig, "train": TrainConfig, "measure": MeasureConfig,
    "cluster": ClusterConfig, "compare": CompareConfig, "strategies": StrategyConfig,
    "check": CheckConfig, "checkpoint": CheckpointConfig, "fault": FaultConfig, "kill": FaultKill,
    "environment": EnvironmentConfig,
}


def _allowed_keys(section: str) -> list[str]:
    model = _MODELS_BY_SECTION.get(section.rsplit(".", 1)[-1].split("[")[0], Scenario)
    return sorted((f.alias or name) for name, f in model.model_fields.items())


def _describe(error: dict[str, Any]) -> tuple[str, str]:
    loc = tuple(error["loc"])
    field = _field_path(loc)
    if error["type"] == "extra_forbidden":
        parent = field.rsplit(".", 1)[0] if "." in field else ""
        key = str(loc[-1])
        allowed = _allowed_keys(parent)
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
    try:
        scenario = Scenario.model_validate(data)
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
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; every failure is a one-line ScenarioError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(str(path), None, "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(path), None, f"cannot read: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(str(path), None, f"invalid TOML: {exc}") from None
    return parse_scenario(data, str(path))


def load_variants(path: str | Path) -> tuple[Scenario, list[Variant]]:
    scenario = load_scenario(path)
    return scenario, expand(scenario, str(path))
