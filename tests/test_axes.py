"""Variant identity is defined once (bench.axes) and every comparison keys records by it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.axes import NESTED_AXES, VARIANT_AXES, axis_value, variant_axes, variant_key
from bench.compare.detector import identity
from bench.record.model import VariantRecord, load_all
from bench.record.variant import RecordedVariant
from bench.report.derived import precision_pairs
from bench.scaling import group_key
from bench.scenario.loading import load_variants

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "mnist_mirrored.toml"


def a_variant() -> dict[str, Any]:
    _, variants = load_variants(SCENARIO)
    return variants[0].model_dump(mode="json")


def changed(variant: dict[str, Any], axis: str) -> dict[str, Any]:
    """The same variant with one axis set to a value no real variant has."""
    if axis == "model":
        return {**variant, "model": {**variant["model"], "name": "another"}}
    if axis in NESTED_AXES:
        section, field = NESTED_AXES[axis]
        value = "other" if axis == "environment" else 99  # an environment's label is text
        return {**variant, section: {**(variant[section] or {}), field: value}}  # env.: None
    # a value of the axis's own type (a record is read typed), that no real variant has
    return {**variant, axis: 99 if isinstance(variant.get(axis), int) else "other"}


def test_variant_axes_are_the_schema_axes() -> None:
    _, variants = load_variants(SCENARIO)
    assert list(variants[0].axes()) == list(VARIANT_AXES)
    assert variants[0].axes()["model"] == "mlp"


@pytest.mark.parametrize("axis", list(VARIANT_AXES))
def test_every_axis_tells_records_apart_in_compare(axis: str) -> None:
    v = a_variant()
    assert identity(VariantRecord.load({"variant": v})) != identity(
        VariantRecord.load({"variant": changed(v, axis)}))


@pytest.mark.parametrize("axis", list(VARIANT_AXES))
def test_scaling_groups_vary_only_in_the_replica_shape(axis: str) -> None:
    v = a_variant()  # weak scaling: the global batch grows with the replicas
    same_group = axis in ("replicas", "workers", "devices_per_worker", "global_batch")
    assert (group_key(RecordedVariant.model_validate(v))
            == group_key(RecordedVariant.model_validate(changed(v, axis)))) is same_group


def test_precision_pairs_differ_in_the_policy_only() -> None:
    v = a_variant()
    f32, bf16, other = load_all([
        {"status": "ok", "variant": {**v, "precision": "float32"}},
        {"status": "ok", "variant": {**v, "precision": "mixed_bfloat16"}},
        {"status": "ok", "variant": changed({**v, "precision": "mixed_bfloat16"}, "api")}])
    assert precision_pairs([f32, bf16, other]) == [(f32, bf16)]


def test_old_records_read_with_the_defaults_and_unknown_axes_are_refused() -> None:
    old = {"strategy": "mirrored", "replicas": 2, "model": {"name": "mlp"}}
    assert axis_value(old, "workers") == 1 and axis_value(old, "prefetch") == "autotune"
    assert variant_key(old)[-2:] == ("autotune", "autotune")
    with pytest.raises(KeyError, match="not a variant axis: replica"):
        variant_axes(old, without=("replica",))


def test_the_runs_twin_and_yardstick_are_never_paired() -> None:
    v = a_variant()  # default-r1-fit-float32-gb64: the yardstick's very axes
    base, stick, twin, bf16 = load_all([
        {"status": "ok", "variant": {**v, "control": "baseline"}},
        {"status": "ok", "variant": {**v, "control": "yardstick"}},
        {"status": "ok", "variant": {**v, "control": "twin"}},
        {"status": "ok", "variant": {**v, "precision": "mixed_bfloat16"}}])
    assert precision_pairs([base, twin, stick, bf16]) == [(base, bf16)]
