"""The scenario reference page and the shipped-scenarios page, generated from the code.

Every field of every section comes from the pydantic models in `bench.scenario` (its type, default,
allowed values and `Field(description=...)`, read from the models' JSON Schema) and whether a list
of it makes a matrix axis (read from the field's type: the `Axis`, `PipelineAxis` and environment
specifier types are the ones that accept a list of values to sweep). Nothing here is written by
hand per field, so the page cannot drift from what `bench validate` accepts.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from bench.axes import VARIANT_AXES
from bench.scenario import environment, fields
from bench.scenario.loading import section_model
from bench.scenario.quick import quick_summary
from bench.scenario.schema import Scenario

# The validators of the field types that take one value or a list of values to sweep.
AXIS_VALIDATORS = (fields._as_list, fields._not_empty, environment._specifier_list)
# Scenario fields whose variant axis has another name (VARIANT_AXES names the rest).
AXIS_NAMES = {"per_replica": "per_replica_batch", "global": "global_batch",
              "tensorflow": "environment", "keras@environment": "environment",
              "tf_keras": "environment", "jax": "environment"}


class Section(typing.NamedTuple):
    """One table of a scenario file: `[measure]`, `[[strategies]]`, `[data.features.NAME]`."""

    path: str  # "measure", "strategies", "data.features.NAME"
    model: type[BaseModel]
    array: bool = False  # written [[path]]

    @property
    def header(self) -> str:
        return f"[[{self.path}]]" if self.array else f"[{self.path}]"

    @property
    def anchor(self) -> str:
        return self.path.replace(".NAME", "").replace(".", "-")


def sections() -> list[Section]:
    """Every table a scenario may hold, in the order the schema declares them, depth first."""
    found: list[Section] = []
    seen: set[type[BaseModel]] = {Scenario}

    def visit(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            key = info.alias or name
            target, array, mapping = section_model(info.annotation)
            if target is None or target in seen:
                continue
            seen.add(target)
            path = f"{prefix}{key}" + (".NAME" if mapping else "")
            found.append(Section(path, target, array))
            visit(target, path + ".")

    visit(Scenario, "")
    return found


def is_axis(info: FieldInfo) -> bool:
    """Whether the field takes a list of values to sweep (a matrix axis)."""

    def validators(annotation: Any, metadata: list[Any]) -> list[Any]:
        found = [getattr(m, "func", None) for m in metadata]
        for arg in typing.get_args(annotation):
            extra = list(getattr(arg, "__metadata__", ()))
            found += validators(arg, extra)
        return found

    return any(v in AXIS_VALIDATORS for v in validators(info.annotation, info.metadata))


def axis_name(section: Section, key: str) -> str:
    """The variant axis a field's list makes (a key of bench.axes.VARIANT_AXES)."""
    name = AXIS_NAMES.get(f"{key}@{section.path}", AXIS_NAMES.get(key, key))
    if name not in VARIANT_AXES:
        raise KeyError(f"{section.header} {key}: a matrix axis the variant has no axis for; name it "
                       "in bench.cli.docs_scenario.AXIS_NAMES")
    return name


def _defs() -> dict[str, Any]:
    return Scenario.model_json_schema(by_alias=True)["$defs"]


def _section_anchor_of(ref: str) -> str:
    name = ref.rsplit("/", 1)[-1]
    for section in sections():
        if section.model.__name__ == name:
            return f"[`{section.header}`](#{section.anchor})"
    return "a table { name = ..., arguments... }" if name == "_KerasObject" else name


def type_text(schema: dict[str, Any]) -> str:
    """A JSON Schema fragment as words: `integer`, `list of string`, `[measure.checkpoint]`."""
    if "$ref" in schema:
        return _section_anchor_of(schema["$ref"])
    if "anyOf" in schema:
        parts = [type_text(s) for s in schema["anyOf"] if s.get("type") != "null"]
        return " or ".join(dict.fromkeys(parts))
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type")
    if kind == "array":
        return f"list of {type_text(schema.get('items', {}))}"
    if kind == "object":
        return f"table of NAME = {type_text(schema.get('additionalProperties', {}))}"
    if "enum" in schema:
        return "string"
    return {"integer": "integer", "number": "number", "boolean": "boolean", "string": "string"}.get(
        kind or "", "any")


def allowed_text(schema: dict[str, Any]) -> str:
    """The values a fragment allows beyond its type: enums, bounds, lengths, patterns."""
    if "anyOf" in schema:
        parts = [allowed_text(s) for s in schema["anyOf"] if s.get("type") != "null"]
        return "; ".join(dict.fromkeys(p for p in parts if p))
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    bounds = [f"{op} {schema[key]}" for key, op in (("minimum", "≥"), ("exclusiveMinimum", ">"),
                                                     ("maximum", "≤"), ("exclusiveMaximum", "<"))
              if key in schema]
    if schema.get("type") == "array":
        items = allowed_text(schema.get("items", {}))
        if schema.get("minItems") == schema.get("maxItems") and "minItems" in schema:
            bounds.append(f"{schema['minItems']} values")
        elif schema.get("minItems"):
            bounds.append("not empty")
        return "; ".join(p for p in ([f"each {items}"] if items else []) + bounds)
    if schema.get("minLength"):
        bounds.append("not empty")
    if "pattern" in schema:
        bounds.append(f"matches `{schema['pattern']}`")
    return ", ".join(bounds)


def default_text(info: FieldInfo, schema: dict[str, Any]) -> str:
    if info.is_required():
        return "required"
    if "default" not in schema or schema["default"] is None:
        return "not set"
    value = schema["default"]
    if isinstance(value, dict):
        return "its table's defaults"
    return f"`{_toml(value)}`"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value) if isinstance(value, str) else str(value)


def cell(text: str) -> str:
    """Text as one Markdown table cell: one line, pipes escaped, `<` kept from HTML outside code."""
    parts = " ".join(text.split()).replace("\\|", "|").replace("|", "\\|").split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;") for i, p in enumerate(parts))


def element(schema: dict[str, Any]) -> dict[str, Any]:
    """An axis field's schema for one of its values (an axis also takes a list of them)."""
    members = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    singles = [s for s in members if s.get("type") != "array"]
    if not singles:  # Axis: a list after validation, whatever was written
        return members[0].get("items", {})
    return {"anyOf": singles} if len(singles) > 1 else singles[0]


def scenario_page() -> str:
    """docs/reference/scenario.md."""
    defs = _defs()
    out = [
        "# Scenario file",
        "",
        GENERATED_NOTE,
        "",
        "A scenario is a TOML file of the tables below. Unknown keys are errors, reported in one line "
        "that names the file and the field (`bench validate` checks a file without running it).",
        "",
        "**Matrix axes.** A field marked *axis* takes one value or a list of values; every list "
        "multiplies the variants (the matrix is the cross product of all axes, strategy entries "
        "included), and the *axis* column names the variant axis the field sets (a key of "
        "`bench.axes.VARIANT_AXES`, under which records are compared). A variant id names every "
        "value that is not the default.",
        "",
        "| table | required | what it holds |",
        "| --- | --- | --- |",
    ]
    for info in Scenario.model_fields.values():
        target, _, _ = section_model(info.annotation)
        section = next(s for s in sections() if s.model is target and "." not in s.path)
        out.append(f"| [`{section.header}`](#{section.anchor}) | "
                   f"{'yes' if info.is_required() else 'no'} | {cell(info.description or '')} |")
    for section in sections():
        schema = defs[section.model.__name__]
        out += ["", f"## `{section.header}` {{ #{section.anchor} }}", ""]
        if section.model.__doc__ and section.model.__doc__ != BaseModel.__doc__:
            out += [" ".join(section.model.__doc__.split()), ""]
        out += ["| field | type | default | allowed values | axis | description |",
                "| --- | --- | --- | --- | --- | --- |"]
        for name, info in section.model.model_fields.items():
            key = info.alias or name
            prop = schema["properties"][key]
            axis = f"`{axis_name(section, key)}`" if is_axis(info) else ""
            value = element(prop) if axis else prop
            anchor = f"{section.anchor}-{key}"
            out.append(f"| `{key}`{{ #{anchor} }} | {cell(type_text(value))} | "
                       f"{cell(default_text(info, prop))} | {cell(allowed_text(value))} | {axis} | "
                       f"{cell(info.description or '')} |")
    return "\n".join(out) + "\n"


def shipped_scenarios_page(root: Path) -> str:
    """docs/reference/shipped-scenarios.md: each file of scenarios/ by its opening comment."""
    out = ["# Shipped scenarios", "", GENERATED_NOTE, "",
           "Each file in `scenarios/` opens with a comment saying what question it answers; this "
           "page is those comments. Every one validates in CI (`tests/test_shipped_scenarios.py`), "
           "and runs there with `bench run --quick` (the costliest ones, a few of their variants; "
           "`resnet50` and `tutorial_transfer`, whose ResNet50 steps at 224 x 224 take seconds, "
           "are only validated). `--quick` "
           f"is a smoke test: {quick_summary()}. The "
           "default scenario is `scenarios/mnist_mirrored.toml`.", ""]
    for path in sorted((root / "scenarios").glob("*.toml")):
        comment = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.startswith("#"):
                break
            comment.append(line[1:].strip())
        paragraphs = "\n".join(comment).split("\n\n")
        out += [f"## `{path.name}` {{ #{path.stem.replace('_', '-')} }}", ""]
        out += [" ".join(p.split()) + "\n" for p in paragraphs if p.strip()]
    return "\n".join(out).rstrip("\n") + "\n"


GENERATED_NOTE = ("<!-- Generated by `python -m bench.cli.docs write` from the code; edit the code, "
                  "not this page (tests/test_docs_reference.py fails when it is stale). -->")
