"""Precision policies, batch rules, real data and steps_per_execution through real workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.data.arrays import DEBIAN_FASHION_MNIST_DIR
from tests.browser import IN_CI
from tests.conftest import BenchRun, bench_run, run_in_fresh_dir, write_scenario
from tests.early import EarlyContext, early_fixture

pytestmark = pytest.mark.slow

PRECISION = """
[train]
api = ["fit", "ctl"]
precision = ["mixed_bfloat16", "mixed_float16"]
float16_on_cpu = "run"

[measure]
warmup_steps = 1
steps = 3
repeats = 1
timeout_s = 300
control = false   # just the four policies: no yardstick

[[strategies]]
name = "mirrored"
replicas = 2
"""


def start_precision(context: EarlyContext) -> BenchRun:
    return run_in_fresh_dir(context.tmp_path_factory, "precision", PRECISION)


precision_run = early_fixture("precision", start_precision)


def test_mixed_policies_run_and_are_recorded(precision_run: BenchRun) -> None:
    assert precision_run.proc.returncode == 0, precision_run.proc.stdout
    assert len(precision_run.records) == 4
    for rec in precision_run.records:
        assert rec["status"] == "ok", rec["reason"]
        assert rec["precision_policy"] == rec["variant"]["precision"]
        assert rec["loss"]["final"] < rec["loss"]["initial"], rec["variant_id"]


def test_float16_is_skipped_on_cpu_by_default(tmp_path: Path) -> None:
    body = '[train]\napi = "ctl"\nprecision = ["float32", "mixed_float16"]\n' \
           '[[strategies]]\nname = "default"\n'
    run = bench_run(write_scenario(tmp_path, body, name="fp16skip"), tmp_path / "results",
                    "--steps", "4", "--repeats", "1")
    assert run.proc.returncode == 0  # a skip is not a failure
    status = {r["variant"]["precision"]: (r["status"], r["reason"]) for r in run.records}
    assert status["float32"][0] == "ok"
    assert status["mixed_float16"][0] == "skipped"
    assert "float16_on_cpu" in status["mixed_float16"][1]


STRONG = """
[batch]
rule = "strong"
global = 64
learning_rate = 0.01
lr_scaling = "linear"
lr_reference_batch = 32

[train]
api = "ctl"
steps_per_execution = 2

[measure]
warmup_steps = 2
steps = 8
repeats = 1

[[strategies]]
name = "mirrored"
replicas = [1, 2]
cross_device_ops = "reduction_to_one_device"
"""


def test_strong_scaling_and_steps_per_execution(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, STRONG, name="strong", replace=("batch",))
    run = bench_run(path, tmp_path / "results")
    assert run.proc.returncode == 0, run.proc.stdout + run.proc.stderr
    # the scenario's own variants: not its A/A twin or the yardstick, which every run adds
    by_replicas = {r["variant"]["replicas"]: r for r in run.records
                   if r["variant"]["control"] not in ("twin", "yardstick")}
    assert sorted(by_replicas) == [1, 2]
    for replicas, rec in by_replicas.items():
        assert rec["status"] == "ok", rec["reason"]
        assert rec["variant"]["global_batch"] == 64
        assert rec["variant"]["per_replica_batch"] == 64 // replicas
        assert rec["variant"]["learning_rate"] == pytest.approx(0.02)  # 0.01 * 64/32
        assert rec["timing"]["steps_per_sample"] == 2
        # unobserved: 8 steps or more (bench lengthens them to last min_window_s), in blocks
        # of 2; observed: 8 steps, a sample per block
        window = rec["measurement"]["window_steps"]
        assert window >= 8 and window % 2 == 0
        assert rec["measurement"]["observed_window_steps"] == 8
        assert rec["measurement"]["settle_steps"] % 2 == 0
        assert len(rec["samples"]["timed"][0]) == 8 // 2
        assert rec["strategy_info"]["cross_device_ops"] == "ReductionToOneDevice"
    assert "(strong)" in run.proc.stdout


@pytest.mark.skipif(not DEBIAN_FASHION_MNIST_DIR.exists() and not IN_CI,
                    reason="Debian package dataset-fashion-mnist not installed")
def test_real_fashion_mnist_from_idx_files(tmp_path: Path) -> None:
    assert DEBIAN_FASHION_MNIST_DIR.exists(), f"CI=true but {DEBIAN_FASHION_MNIST_DIR} is missing"
    body = f"""
[data]
name = "fashion_mnist"
path = "{DEBIAN_FASHION_MNIST_DIR}"
shuffle_buffer = 1000

[batch]
rule = "weak"
per_replica = 64

[train]
api = "fit"

[measure]
warmup_steps = 2
steps = 20
repeats = 1

[[strategies]]
name = "mirrored"
replicas = 2
"""
    path = tmp_path / "fmnist.toml"
    path.write_text('[scenario]\nname = "fmnist"\n[model]\nname = "cnn"\n' + body)
    run = bench_run(path, tmp_path / "results", "--no-control")
    assert run.proc.returncode == 0, run.proc.stdout + run.proc.stderr
    (rec,) = run.records
    assert rec["status"] == "ok", rec["reason"]
    assert rec["data_source"].startswith(f"idx:{DEBIAN_FASHION_MNIST_DIR}")
    assert "60000" in rec["data_source"]
    assert rec["data_fallback_reason"] is None
    assert f"data: idx:{DEBIAN_FASHION_MNIST_DIR}" in run.proc.stdout
    assert rec["loss"]["final"] < rec["loss"]["initial"]
