"""The reference pages are the code's own words: regenerated, they equal the committed pages; the
environment variables and the record's fields they list are exactly what the code uses, and every
field says what it holds. Pure Python, no TensorFlow, about 2 s."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from bench.cli import docs, docs_record, docs_scenario
from bench.record.migration import upgrade
from bench.record.model import VariantRecord
from bench.scenario.loading import load_variants

REPO = Path(__file__).resolve().parent.parent


def test_the_generated_reference_pages_are_current() -> None:
    assert [str(p.relative_to(REPO)) for p in docs.stale(REPO)] == [], (
        "stale reference page(s): run `python -m bench.cli.docs write` and commit the result")


def test_a_stale_page_is_noticed(tmp_path: Path) -> None:
    """The check above would fail on a page that no longer says what the code says."""
    (tmp_path / docs.REFERENCE).mkdir(parents=True)
    (tmp_path / "scenarios").symlink_to(REPO / "scenarios")
    (tmp_path / docs.RECORD_EXAMPLE).write_bytes((REPO / docs.RECORD_EXAMPLE).read_bytes())
    assert len(docs.write(tmp_path)) == len(docs.PAGES) and docs.stale(tmp_path) == []
    page = tmp_path / docs.REFERENCE / "scenario.md"
    page.write_text(page.read_text(encoding="utf-8") + "| `edited` | by hand |\n", encoding="utf-8")
    assert docs.stale(tmp_path) == [page]


def test_every_scenario_field_is_described() -> None:
    missing = [f"{section.header} {name}" for section in docs_scenario.sections()
               for name, info in section.model.model_fields.items() if not info.description]
    assert missing == []


def test_every_section_and_axis_is_on_the_scenario_page() -> None:
    page = (REPO / docs.REFERENCE / "scenario.md").read_text(encoding="utf-8")
    headers = [s.header for s in docs_scenario.sections()]
    assert {"[measure]", "[[strategies]]", "[environment]", "[fault.kill]",
            "[data.features.NAME]", "[check.accuracy]"} <= set(headers)
    for header in headers:
        assert f"## `{header}`" in page
    axes = {(s.path, name) for s in docs_scenario.sections()
            for name, info in s.model.model_fields.items() if docs_scenario.is_axis(info)}
    # the matrix's axes, as bench.scenario.matrix expands them
    assert {("strategies", "replicas"), ("strategies", "workers"), ("train", "precision"),
            ("train", "jit_compile"), ("data", "prefetch"), ("model", "trainable"),
            ("batch", "per_replica"),
            ("environment", "tensorflow")} <= axes
    assert ("data", "shape") not in axes and ("strategies", "partitioner") not in axes
    assert ("train", "metrics") not in axes and ("environment", "packages") not in axes


def _variables_in(folder: Path) -> set[str]:
    """BENCH_* names in the Python source (a JavaScript global of the report is no variable)."""
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        if path == REPO / "bench" / "cli" / "docs.py":  # the descriptions themselves
            continue
        names |= set(re.findall(r"(?<![\w.])BENCH_[A-Z0-9_]+", path.read_text(encoding="utf-8")))
    return names - {"BENCH_PLOTLY_TEMPLATE"}


def test_every_environment_variable_is_documented() -> None:
    assert _variables_in(REPO / "bench") == set(docs.ENVIRONMENT)
    assert _variables_in(REPO / "tests") - set(docs.ENVIRONMENT) == set(docs.TEST_ENVIRONMENT)


def test_the_environment_variables_are_named_in_one_place() -> None:
    """Every BENCH_* variable bench reads or sets is a field of bench.child_env.ChildEnv; no other
    module writes one's name in its code (a docstring may mention it)."""
    named = {}
    for path in (REPO / "bench").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        found = {name for node in ast.walk(tree) if isinstance(node, ast.Constant)
                 and isinstance(node.value, str) and id(node) not in docstrings
                 for name in re.findall(r"BENCH_[A-Z0-9_]+", node.value)}
        if found & set(docs.ENVIRONMENT):
            named[str(path.relative_to(REPO))] = sorted(found & set(docs.ENVIRONMENT))
    assert list(named) == ["bench/child_env.py"], named


def test_every_record_field_is_described() -> None:
    """The example is a real record; every field it has is one of the record's JSON Schema, and
    it has every field a record always has; every field of every section says what it holds."""
    example = json.loads((REPO / docs.RECORD_EXAMPLE).read_text(encoding="utf-8"))
    assert set(example) == set(docs.RECORD_FIELDS)
    assert not set(docs.RECORD_SOMETIMES) & set(example)
    _, variants = load_variants(REPO / "scenarios" / "mnist_mirrored.toml")
    assert set(VariantRecord.begin(variants[0]).to_json()) <= set(example)
    assert set(example["variant"]) == set(variants[0].model_dump(by_alias=True))
    schema = docs_record.json_schema()
    undescribed = [f"{where}.{name}" for where, section in
                   [("record", schema), *schema["$defs"].items()]
                   for name, prop in section["properties"].items() if not prop.get("description")]
    assert undescribed == []
    # read and written back: the same (as migrated, where it is of an older schema)
    assert VariantRecord.load(example).to_json() == upgrade(example, example.get("schema", 1))


@pytest.mark.parametrize("page", ["commands.md", "exit-codes.md"])
def test_every_command_is_on_the_page(page: str) -> None:
    text = (REPO / docs.REFERENCE / page).read_text(encoding="utf-8")
    for name, command in docs.command_tree():
        if page == "commands.md" or not getattr(command, "commands", None):
            assert f"`{name}`" in text, name
