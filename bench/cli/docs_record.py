"""The record's reference: its JSON Schema (`record.schema.json`) and the page made from it.

Both come from `bench.record.model.VariantRecord` (every field's `Field(description=...)`), so
the page cannot drift from what bench writes and reads; the `variant` section is the scenario's
`Variant`, described on the scenario page. A real record (`record-example.json`) closes the page.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

from bench.cli import docs_scenario
from bench.cli.docs_scenario import GENERATED_NOTE, cell
from bench.record import migration
from bench.record.model import SCHEMA, VariantRecord
from bench.scenario.schema import Variant

REFERENCE = Path("docs/reference")
RECORD_EXAMPLE = REFERENCE / "record-example.json"
RECORD_SCHEMA = "record.schema.json"
_VARIANT_DEF = "RecordedVariant"  # described from the scenario's own Variant instead


def json_schema() -> dict[str, Any]:
    """The record's JSON Schema, as written to disk (serialization: what a record file holds)."""
    schema = VariantRecord.model_json_schema(by_alias=True, mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "record.schema.json", **schema, "title": f"bench variant record, schema {SCHEMA}"}


def schema_file(root: Path) -> str:
    """docs/reference/record.schema.json."""
    return json.dumps(json_schema(), indent=1, ensure_ascii=False) + "\n"


def fields(sometimes: bool) -> dict[str, str]:
    """The record's top-level fields (name → description): those every record has, or (with
    `sometimes`) those only cluster and `[fault]` variants write."""
    props = json_schema()["properties"]
    return {name: prop.get("description", "") for name, prop in props.items()
            if bool(prop.get("sometimes")) is sometimes}


def _anchor(name: str) -> str:
    return name.lower()


def _type(schema: dict[str, Any]) -> str:
    """A JSON Schema fragment as words, a section linking to its table on this page."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name == _VARIANT_DEF:
            return "[variant](#variant)"
        return f"[{name}](#{_anchor(name)})"
    if "anyOf" in schema:
        parts = [_type(s) for s in schema["anyOf"] if s.get("type") != "null"]
        return " or ".join(dict.fromkeys(parts))
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if kind == "object":
        values = schema.get("additionalProperties")
        return f"object of NAME = {_type(values)}" if isinstance(values, dict) else "object"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    return {"integer": "integer", "number": "number", "boolean": "boolean",
            "string": "string"}.get(kind or "", "any")


def _table(schema: dict[str, Any]) -> list[str]:
    out = ["| field | type | what it holds |", "| --- | --- | --- |"]
    out += [f"| `{name}` | {cell(_type(prop))} | {cell(prop.get('description', ''))} |"
            for name, prop in schema.get("properties", {}).items()]
    return out


def record_page(root: Path) -> str:
    """docs/reference/record.md."""
    schema = json_schema()
    example = json.loads((root / RECORD_EXAMPLE).read_text(encoding="utf-8"))
    top = {name: prop for name, prop in schema["properties"].items()}
    always = {name: prop for name, prop in top.items() if not prop.get("sometimes")}
    out = ["# Record", "", GENERATED_NOTE, "",
           "One JSON object per variant, one line each in a run's `records.jsonl`, appended as each "
           "variant finishes (see [the run directory](run-directory.md)). Every launcher writes "
           "it the same way (`bench.record.model.VariantRecord`), and a worker that dies is "
           f"recorded by its parent with the same fields. This is schema {SCHEMA} (older records "
           "are read too: [schema versions](#schema-versions)). Its JSON Schema is "
           f"[`{RECORD_SCHEMA}`]({RECORD_SCHEMA}). A field a record does not have is absent, not "
           "null. bench writes only the fields below (a writer that sets any other fails where "
           "it sets it); a reader keeps every field a record holds, also those this page does "
           "not list (a newer bench's), and writes them back as they were.", "",
           *_table({"properties": always}), "",
           "Only some variants write these:", "", *_table({"properties": {
               name: prop for name, prop in top.items() if prop.get("sometimes")}}), ""]
    for name, section in sorted(schema["$defs"].items()):
        if name == _VARIANT_DEF:
            continue
        out += [f"## `{name}` {{ #{_anchor(name)} }}", ""]
        if section.get("description"):
            out += [" ".join(section["description"].split()), ""]
        out += [*_table(section), ""]
    out += _variant_section()
    out += ["", *_schema_versions()]
    out += ["", "## Example { #example }", "",
            f"A real record: variant `{example.get('variant_id')}` of the run shown on "
            "[Reading the results](../getting-started/reading-results.md#terminal) "
            "(`docs/reference/record-example.json`, written with the docs' other samples by "
            "`python -m tests.docs_samples`).", "",
            "```json", json.dumps(example, indent=1), "```"]
    return "\n".join(out) + "\n"


def _schema_versions() -> list[str]:
    """How records of older schemas are read: the migration's own description."""
    steps = inspect.getdoc(migration.to_schema_2) or ""
    changes = steps.split("\n\n", 1)[1] if "\n\n" in steps else ""  # its list of fields
    return ["## Schema versions { #schema-versions }", "",
            "The record's `schema` says which format it is in; this bench writes schema "
            f"{SCHEMA} and reads schema {', '.join(map(str, migration.UPGRADES))} too, migrating "
            "each as it loads (`bench.record.migration`), so that every reader reads schema "
            f"{SCHEMA} alone. Reading a record of schema {SCHEMA} and writing it again gives "
            "back the same JSON; a migrated record keeps every field it held, with the same "
            "value, and gains the fields its schema lacked.", "",
            "Schema 1 is what bench wrote before the record was typed (no `schema` field); its "
            "earlier records lack fields that schema 2 always has. Migrated, a record gains "
            "those it lacks:", "",
            changes]


def _variant_section() -> list[str]:
    out = ["## `variant` { #variant }", "",
           "The variant a matrix point becomes (`bench.scenario.schema.Variant`); its `model`, "
           "`data`, `train`, `measure`, `check` and `fault` are the scenario's tables with the "
           "point's values (see [the scenario file](scenario.md)).", "",
           "| field | type | default |", "| --- | --- | --- |"]
    schema = Variant.model_json_schema()
    for name, info in Variant.model_fields.items():
        prop = schema["properties"][name]
        kind = docs_scenario.type_text(prop).replace("](#", "](scenario.md#")  # its tables' page
        out.append(f"| `{name}` | {cell(kind)} | "
                   f"{cell(docs_scenario.default_text(info, prop))} |")
    return out
