"""Comparisons relative to the yardstick measured in the same rounds: a machine-wide slow spell
cancels, a slower model does not (bench.compare.yardstick through compare_records)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.compare.detector import compare_records
from bench.compare.yardstick import relative_to_yardstick
from bench.record.cluster import Interleave
from bench.record.model import VariantRecord, load_all
from bench.runner import RunOptions, prepare

REPO = Path(__file__).resolve().parent.parent
ROUNDS, STEPS = 6, 50


def record(vid: str, role: str | None, step_s: float, rng: np.random.Generator,
           batch: list[str], machine: list[float]) -> dict[str, Any]:
    """An ok interleaved record whose window k ran at `machine[k]` times the machine's speed."""
    windows = [list(step_s * m * rng.lognormal(0.0, 0.03, STEPS)) for m in machine]
    return {"variant_id": vid, "status": "ok", "interleave": {"batch": batch},
            "variant": {"scenario_name": "s", "strategy": "default", "replicas": 1, "api": "fit",
                        "precision": "float32", "batch_rule": "weak", "per_replica_batch": 64,
                        "global_batch": 64, "model": {"name": vid}, "control": role,
                        "min_effect": 0.05},
            "samples": {"timed": windows}, "devices": {"kind": "cpu"}}


def run(seed: int, machine: list[float], model_s: float = 0.005,
        stick_s: float = 0.004) -> list[VariantRecord]:
    rng = np.random.default_rng(seed)
    batch = ["yardstick", "mlp"]
    return load_all([record("yardstick", "yardstick", stick_s, rng, batch, machine),
                     record("mlp", None, model_s, rng, batch, machine)])


def verdict(base: list[VariantRecord], cand: list[VariantRecord], **kw: Any) -> Any:
    (v,) = compare_records(base, cand, **kw).verdicts
    return v


def test_a_machine_wide_slow_spell_cancels() -> None:
    base = run(1, [1.0] * ROUNDS)
    slow = run(2, [1.3, 1.35, 1.3, 1.25, 1.3, 1.3])  # the whole candidate run in a slow spell
    assert verdict(base, slow, use_yardstick=False).status == "regression"  # in seconds
    relative = compare_records(base, slow)
    assert relative.relative and relative.verdicts[0].status == "unchanged"
    assert relative.to_dict()["relative_to_yardstick"] is True


def test_a_slower_model_still_shows() -> None:
    base = run(1, [1.0] * ROUNDS)
    slower = run(3, [1.2] * ROUNDS, model_s=0.0055)  # 10% slower model, in a slow spell too
    v = verdict(base, slower)
    assert v.status == "regression" and v.ratio == pytest.approx(1.1, rel=0.03)


def test_without_a_shared_yardstick_the_comparison_stays_in_seconds() -> None:
    base, cand = run(1, [1.0] * ROUNDS), run(2, [1.0] * ROUNDS)
    no_stick = [r for r in cand if r.variant_id != "yardstick"]
    assert relative_to_yardstick(base, no_stick, None)[3] is False
    other_batch = [r.model_copy(update={"interleave": Interleave(batch=["mlp"])})
                   if r.variant_id == "mlp" else r for r in cand]
    assert relative_to_yardstick(base, other_batch, None)[3] is False
    _, rel, _, used = relative_to_yardstick(base, cand, [base])
    assert used
    stick_medians = [np.median(w) for w in cand[0].timed_windows]
    assert rel[1].timed_windows[0][0] == pytest.approx(
        cand[1].timed_windows[0][0] / stick_medians[0])
    assert cand[1].timed_windows[0][0] < 0.1  # the input records were not changed


def test_every_interleaved_run_carries_the_yardstick_beside_its_controls() -> None:
    _, variants = prepare(REPO / "scenarios" / "mnist_mirrored.toml", RunOptions())
    assert [v.control for v in variants[:3]] == ["baseline", "twin", "yardstick"]
    stick = variants[2]
    assert (stick.id, stick.model.name, stick.model.extra_matmul, stick.data.name) == \
        ("yardstick", "mlp", 0, "synthetic")
    assert stick.measure.repeats == variants[0].measure.repeats
    assert [v.index for v in variants] == list(range(len(variants)))
    _, plain = prepare(REPO / "scenarios" / "mnist_mirrored.toml",
                       RunOptions(interleave=False))
    assert [v.control for v in plain[:3]] == ["baseline", "twin", None]


def test_a_run_without_a_default_strategy_twins_its_first_variant(tmp_path: Path) -> None:
    """Every run states its own noise floor: without a default/one_device variant the control
    twin doubles the scenario's first variant, and the yardstick still runs beside them."""
    from tests.conftest import write_scenario

    path = write_scenario(tmp_path, '[[strategies]]\nname = "mirrored"\nreplicas = 2\n')
    _, variants = prepare(path, RunOptions())
    assert [v.control for v in variants] == ["baseline", "twin", "yardstick", None]
    assert variants[1].id == f"{variants[0].id}-control" and variants[0].strategy == "mirrored"
    clusters = write_scenario(tmp_path, '[[strategies]]\nname = "multi_worker_mirrored"\n'
                              'workers = 2\napi = "ctl"\n', name="clusters")
    _, variants = prepare(clusters, RunOptions())
    assert [(v.control, v.is_cluster) for v in variants] == [("baseline", True), ("twin", True)]


def test_the_yardstick_saves_no_checkpoints_where_the_variants_do() -> None:
    _, variants = prepare(REPO / "scenarios" / "checkpoint_cost.toml", RunOptions())
    stick = next(v for v in variants if v.control == "yardstick")
    assert stick.measure.checkpoint is None  # the same workload in every run of every scenario
    assert all(v.measure.checkpoint is not None for v in variants if v.control != "yardstick")
