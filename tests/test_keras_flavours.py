"""Keras 3 and tf-keras through the real `bench run`: tf-keras variants forked from a fork server
of their own that imported TensorFlow with TF_USE_LEGACY_KERAS=1, fit under MultiWorkerMirrored
and ParameterServer (which Keras 3 cannot), fit from NumPy arrays, and a missing tf-keras
recorded as a skip with its install command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.compare.detector import identity
from bench.record.model import VariantRecord
from tests.browser import IN_CI
from tests.conftest import (
    REPO,
    BenchRun,
    bench_run,
    require_netns,
    run_in_fresh_dir,
    write_scenario,
)
from tests.early import EarlyContext, EarlyRuns, declare

pytestmark = pytest.mark.slow

FLAVOURS = """
[train]
api = "fit"
keras = ["keras3", "tf_keras"]

[measure]
warmup_steps = 4
steps = 8
repeats = 2
trace_steps = 2
control = false
timeout_s = 150

[[strategies]]
name = "default"

[[strategies]]
name = "mirrored"
replicas = 2
feed = "numpy"
keras = "tf_keras"

[[strategies]]
name = "default"
api = "ctl"
keras = "tf_keras"

[[strategies]]
name = "multi_worker_mirrored"
workers = 2
keras = "tf_keras"

[[strategies]]
name = "parameter_server"
workers = 2
keras = "tf_keras"

[[strategies]]
name = "parameter_server"
ps = 2
workers = 1
partitioner = "fixed"
keras = "tf_keras"
"""


def _tf_keras_installed() -> bool:
    out = subprocess.run([sys.executable, "-c", "import importlib.util as u; "
                          "print(u.find_spec('tf_keras') is not None)"],
                         capture_output=True, text=True)
    return out.stdout.strip() == "True"


def start_flavours(context: EarlyContext) -> BenchRun:
    return run_in_fresh_dir(context.tmp_path_factory, "flavours", FLAVOURS)


@pytest.fixture(scope="module")
def flavours_run(early_runs: EarlyRuns) -> BenchRun:
    if not _tf_keras_installed():
        message = ("tf-keras is not installed (pip install --no-deps -c constraints.txt "
                   "tf-keras)")
        if IN_CI:
            pytest.fail(f"CI=true but {message}", pytrace=False)
        pytest.skip(message)
    require_netns()
    return early_runs.result("flavours", start_flavours)


declare(flavours_run, [("flavours", start_flavours)])


def test_every_tf_keras_cell_runs_with_tf_keras(flavours_run: BenchRun) -> None:
    run = flavours_run
    assert run.proc.returncode == 0, run.proc.stdout + run.proc.stderr
    by_id = run.by_id()
    expected = ["default-r1-fit-float32-gb16", "default-r1-tf_keras-fit-float32-gb16",
                "mirrored-r2-numpy-tf_keras-fit-float32-gb32",
                "default-r1-tf_keras-ctl-float32-gb16",
                "multi_worker_mirrored-w2x1-tf_keras-fit-float32-gb32",
                "parameter_server-ps1w2-tf_keras-fit-float32-gb16",
                "parameter_server-ps2w1-fixed-tf_keras-fit-float32-gb16"]
    assert sorted(by_id) == sorted(expected)
    for vid, rec in by_id.items():
        assert rec["status"] == "ok", (vid, rec.get("reason"))
        flavour = "tf_keras" if "tf_keras" in vid else "keras3"
        assert rec["keras"]["flavour"] == flavour
        assert rec["keras"]["version"].startswith("2." if flavour == "tf_keras" else "3.")
        assert rec["variant"]["train"]["keras"] == flavour
        assert rec["throughput"]["headline"] > 0
    # tf-keras needs TF_USE_LEGACY_KERAS before TensorFlow is imported: its variants fork from a
    # server of their own that imported it so (the version checks above: tf-keras, not Keras 3),
    # and start as pristine as the Keras 3 ones; a cluster's tasks fork too
    for vid, rec in by_id.items():
        assert rec["launch"]["start_method"] == "forkserver", vid
        assert rec["start_state"]["tf_context_initialized"] is False, vid
        assert rec["start_state"]["precision_policy"] == "float32", vid
        # no Keras but its own loaded: a cluster's chief too, forked from its supervisor's server
        assert rec["start_state"]["keras_modules"] == [
            "tf_keras" if "tf_keras" in vid else "keras"], vid
    assert flavours_run.run_dir is not None
    assert (flavours_run.run_dir / "logs" / "forkserver.tf_keras.log").exists()
    for vid in ("multi_worker_mirrored-w2x1-tf_keras-fit-float32-gb32",
                "parameter_server-ps1w2-tf_keras-fit-float32-gb16"):
        assert {t["start_method"] for t in by_id[vid]["cluster"]["tasks"]} == {"forkserver"}, vid
    # MWMS fit ran on both workers; PS fit timed whole blocks, and its headline agrees with them
    mwms = by_id["multi_worker_mirrored-w2x1-tf_keras-fit-float32-gb32"]
    assert mwms["effective"]["replicas"] == 2
    ps = by_id["parameter_server-ps1w2-tf_keras-fit-float32-gb16"]
    assert ps["timing"]["steps_per_sample"] == 4
    assert any("parameter server fit" in note for note in ps["notes"])
    assert 0.5 < ps["throughput"]["headline"] / ps["throughput"]["median"] < 1.5
    # tf-keras variables can be sharded across the parameter servers (Keras 3's cannot)
    sharded = by_id["parameter_server-ps2w1-fixed-tf_keras-fit-float32-gb16"]["strategy_info"]
    assert sharded["variable_partitioner"] == "FixedShardsPartitioner"
    # the NumPy feed: Keras built the pipeline from the arrays
    assert by_id["mirrored-r2-numpy-tf_keras-fit-float32-gb32"]["variant"]["data"]["feed"] == \
        "numpy"


def test_the_flavours_stay_apart_in_compare_and_meet_in_the_report(
        flavours_run: BenchRun) -> None:
    by_id = flavours_run.by_id()
    k3, tfk = by_id["default-r1-fit-float32-gb16"], by_id["default-r1-tf_keras-fit-float32-gb16"]
    assert identity(VariantRecord.load(k3)) != identity(VariantRecord.load(tfk))
    out = flavours_run.proc.stdout
    assert "Keras 3 vs tf-keras" in out
    reports = flavours_run.run_dir.parent.parent / "reports"  # type: ignore[union-attr]
    page = next(reports.glob("*/run-*.html")).read_text()
    assert "tf-keras vs Keras 3" in page and "default-r1-tf_keras-fit-float32-gb16 ×" in page


def test_a_missing_tf_keras_is_a_skip_with_the_install_command(tmp_path: Path) -> None:
    """tf-keras hidden from the worker by an import hook (as if not installed)."""
    hook = tmp_path / "hide"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'tf_keras':\n"
        "            raise ModuleNotFoundError(\"No module named 'tf_keras'\", name=name)\n"
        "sys.meta_path.insert(0, _Hide())\n")
    scenario = write_scenario(tmp_path, "[train]\napi = 'fit'\nkeras = 'tf_keras'\n"
                              "[measure]\ncontrol = false\n[[strategies]]\nname = 'default'\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(hook), os.environ.get("PYTHONPATH", ""), str(REPO)])}
    results = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "bench", "run", str(scenario), "--results-dir",
                           str(results), "--no-report"], capture_output=True, text=True,
                          env=env, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (record,) = [json.loads(line) for line in
                 next(results.iterdir()).joinpath("records.jsonl").read_text().splitlines()]
    assert record["status"] == "skipped"
    assert "pip install --no-deps \"tf-keras~=" in record["reason"]


def test_a_bad_flavour_is_one_line(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, "[train]\nkeras = 'keras2'\n[[strategies]]\n"
                              "name = 'default'\n")
    proc = bench_run(scenario, tmp_path / "results").proc
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith(f"error: {scenario}: train.keras:")
    assert len(proc.stderr.strip().splitlines()) == 1
