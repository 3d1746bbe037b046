"""Loss parity: every strategy trains the same model as the single-device baseline, or is flagged."""

from __future__ import annotations

import pytest

from bench.record.model import VariantRecord
from tests.conftest import BenchRun, run_in_fresh_dir
from tests.early import EarlyContext, early_fixture

pytestmark = pytest.mark.slow

BODY = """
# (top-level keys must come before the first table)
strategies = [{ name = "mirrored", replicas = [1, 2] }, { name = "central_storage", replicas = 2 },
              { name = "default" }]   # the baseline last in the file: bench runs it first

[train]
api = ["fit", "ctl"]

[check]
loss_parity = { steps = 5, batch = 32, tolerance = 0.01 }
"""


def start_healthy(context: EarlyContext) -> BenchRun:
    return run_in_fresh_dir(context.tmp_path_factory, "parity", BODY, "mlp", "--no-control")


def start_broken(context: EarlyContext) -> BenchRun:
    return run_in_fresh_dir(context.tmp_path_factory, "parity_broken", BODY,
                            "tests.fixtures.faulty:logits_doubled_under_two_replicas",
                            "--no-control")


healthy = early_fixture("parity", start_healthy)
broken = early_fixture("parity_broken", start_broken)


def parity_of(run: BenchRun) -> dict[str, dict]:
    """Each variant's parity check (the control twin and the yardstick measure the machine)."""
    return {r["variant_id"]: r["checks"]["loss_parity"] for r in run.records
            if VariantRecord.load(r).counts_as_variant}


def test_default_mirrored_and_central_storage_train_the_same_model(healthy: BenchRun) -> None:
    assert healthy.proc.returncode == 0, healthy.proc.stdout[-2000:]
    parity = parity_of(healthy)
    # The baselines run first, whatever the file order, so every variant has one to meet.
    assert [r["variant"]["strategy"] for r in healthy.records][:2] == ["default", "default"]
    assert parity["default-r1-fit-float32-gb16"]["status"] == "baseline"
    others = {k: v for k, v in parity.items() if not k.startswith("default")}
    assert len(others) == 6
    for vid, check in others.items():
        assert check["status"] == "ok", (vid, check)
        assert check["baseline"] == "default-r1-fit-float32-gb16"
        assert check["relative_difference"] <= 0.01
    # fit and the custom loop trained the same model too (same seed, batches and steps)
    default_ctl = parity["default-r1-ctl-float32-gb16"]
    assert default_ctl["relative_difference"] <= 0.01
    assert "loss parity ok" in healthy.proc.stdout


def test_a_strategy_that_trains_a_different_model_is_flagged(broken: BenchRun) -> None:
    parity = parity_of(broken)
    diverged = sorted(k for k, v in parity.items() if v["status"] == "diverged")
    assert diverged == ["central_storage-r2-ctl-float32-gb32", "central_storage-r2-fit-float32-gb32",
                        "mirrored-r2-ctl-float32-gb32", "mirrored-r2-fit-float32-gb32"]
    assert all(parity[k]["relative_difference"] > 0.01 for k in diverged)
    assert parity["mirrored-r1-fit-float32-gb16"]["status"] == "ok"
    assert "loss parity: DIVERGED" in broken.proc.stdout
    page = next((broken.run_dir.parent.parent / "reports" / broken.run_dir.name).glob("run-*.html"))
    assert "Loss parity diverged" in page.read_text()
