"""Every scenario in scenarios/ runs end to end with `bench run --quick`: what a user gets first."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest
from rich.console import Console

from bench.record.model import load_all
from bench.report.terminal import render_summary
from bench.scenario.loading import load_variants
from tests import conftest
from tests.conftest import REPO, BenchRun, bench_run
from tests.early import EarlyContext, EarlyRuns, declare, declared

pytestmark = pytest.mark.slow

SCENARIOS = sorted((REPO / "scenarios").glob("*.toml"))

# Why a shipped variant is skipped on this CPU-only, TPU-less machine (the start of its reason).
NO_TPU = "no TPU: TPUClusterResolver"
FLOAT16_ON_CPU = "mixed_float16 on CPU has no fast kernels"
MWM_FIT = "Keras fit() under MultiWorkerMirroredStrategy fails in this Keras"
PS_FIT = "Keras 3 fit() has no ParameterServerStrategy support"

# Per scenario, the variants that must be ok (the baseline first) and the variants that must be
# skipped, with why; nothing else may run. The default scenario runs as a user runs it, with the
# run's controls (the baseline's A/A twin and the yardstick), which must be ok too; the others
# run with --no-control, which keeps CI within its time (the controls are tested there and in
# tests/test_rounds.py).
WITH_CONTROLS = "mnist_mirrored"
FEWER_STEPS = ["--steps", "8", "--warmup", "2"]
# Scenarios whose costly paths run elsewhere in CI run a few variants each here (a local path or
# two, one cluster path); every variant of each was run on the machine of each change (the
# closing notes). checkpoint_cost's clusters take minutes: its MLP default fit runs here
# (tests/test_run_checkpoints.py runs the Mirrored and MultiWorkerMirrored paths).
# mixed_precision's CNN runs its float32 and bfloat16 fit, and its float16 is skipped, here; both
# policies run under Mirrored x 2 through fit and the custom loop in tests/test_run_options.py.
# lstm and transformer run their default fit and their Mirrored x 2 custom loop. The sweeps run
# their ends: batch_sweep its smallest batch on one device and its largest on two, input_bound
# its pipeline without parallelism or prefetch and with both (tests/test_data.py checks each of
# the pipeline's knobs; tests/test_scenario.py expands every shipped scenario whole).
# batch_scaling trains each variant to its target twice (tests/test_target.py trains the custom
# loop and Mirrored x 2 to a target): its single-device fit runs here.
ONLY = {"batch_sweep": ["default-r1-fit-float32-gb16", "mirrored-r2-fit-float32-gb512"],
        "batch_scaling": ["default-r1-fit-*"],
        # both backends' paths run in tests/test_backends.py: here JAX's, at the scenario's batch
        "backends": ["default-r1-jax-fit-*", "data_parallel-r2-jax-ctl-*"],
        "checkpoint_cost": ["default-r1-fit-*"],
        "input_bound": ["default-r1-fit-float32-gb64-map1-pf0",
                        "default-r1-fit-float32-gb64-mapauto-pfauto"],
        "lstm": ["default-r1-fit-*", "mirrored-r2-ctl-*"],
        "transformer": ["default-r1-fit-*", "mirrored-r2-ctl-*"],
        "mixed_precision": ["default-r1-fit-*"],
        "parameter_server": ["default-r1-*", "parameter_server-ps2w2-fixed-*"],
        "tutorial_regression": ["default-r1-*", "central_storage-r2-ctl-*",
                                "parameter_server-ps1w2-tf_keras-fit-*"],
        "tutorial_softmax": ["default-r1-fit-*", "mirrored-r2-ctl-*"],
        "tutorial_mlp_clusters": ["central_storage-r2-fit-*", "multi_worker_mirrored-w2x1-ctl-*"],
        # TensorFlow 2.20's environment only: built once per session (tests/test_environments.py
        # runs it beside this interpreter's TensorFlow); Keras 3 and tf-keras 2.20 (installed
        # without dependencies) each forked from a fork server of that environment's own
        "tf_upgrade": ["default-r1-*-tf2.20"]}
# The scenarios of ONLY that keep their own steps: they ask for few already, or save checkpoints.
OWN_STEPS = ("checkpoint_cost", "parameter_server", "tutorial_regression", "tutorial_softmax",
             "tutorial_mlp_clusters", "tf_upgrade")
# Expanded and validated here, not run: a step of ResNet50 at 224 x 224 takes seconds on 2 cores,
# and its graph a minute to build. The catalogue's ResNet50 runs in seed_tutorials (32 x 32
# images, head and last 10 layers trainable); a compiled user model with a sigmoid head and
# binary labels in tests/test_user_workload.py.
EXPANDED_ONLY = ("resnet50", "tutorial_transfer")
# Scenarios whose every run must train: the loss on the probe batch falls.
LOSS_FALLS = ("tutorial_regression", "tutorial_softmax", "tutorial_mlp_clusters",
              "tutorial_transfer", "parameter_server")
OK: dict[str, list[str]] = {
    "batch_scaling": ["default-r1-fit-float32-gb64"],
    "backends": [
        "default-r1-jax-fit-float32-gb64", "data_parallel-r2-jax-ctl-float32-gb128"],
    "batch_sweep": [
        "default-r1-fit-float32-gb16", "mirrored-r2-fit-float32-gb512"],
    "checkpoint_cost": [
        "default-r1-fit-float32-gb64"],
    "clusters": [
        "default-r1-ctl-float32-gb64",
        "default-r1-fit-float32-gb64", "multi_worker_mirrored-w2x1-ctl-float32-gb128",
        "multi_worker_mirrored-w2x2-ctl-float32-gb256", "parameter_server-ps1w2-ctl-float32-gb64"],
    # a worker killed half-way; every variant recovers (tests/test_run_recovery.py checks how)
    "fault_tolerance": [
        "multi_worker_mirrored-w2x1-ctl-float32-gb64",
        "multi_worker_mirrored-w2x1-tf_keras-fit-float32-gb64",
        "parameter_server-ps1w2-ctl-float32-gb32"],
    "input_bound": [
        "default-r1-fit-float32-gb64-map1-pf0", "default-r1-fit-float32-gb64-mapauto-pfauto"],
    "lstm": [
        "default-r1-fit-float32-gb64", "mirrored-r2-ctl-float32-gb128"],
    "mixed_precision": [
        "default-r1-fit-float32-gb64", "default-r1-fit-mixed_bfloat16-gb64"],
    "mnist_mirrored": [
        "default-r1-fit-float32-gb64",
        "default-r1-ctl-float32-gb64", "default-r1-fit-mixed_bfloat16-gb64",
        "default-r1-ctl-mixed_bfloat16-gb64", "mirrored-r1-fit-float32-gb64",
        "mirrored-r1-ctl-float32-gb64", "mirrored-r2-fit-float32-gb128", "mirrored-r2-ctl-float32-gb128",
        "central_storage-r1-fit-float32-gb64", "central_storage-r1-ctl-float32-gb64",
        "central_storage-r2-fit-float32-gb128", "central_storage-r2-ctl-float32-gb128"],
    "parameter_server": [
        "default-r1-tf_keras-ctl-float32-gb256",
        "parameter_server-ps2w2-fixed-tf_keras-ctl-float32-gb256"],
    "multi_worker_ctl": [
        "default-r1-ctl-dsfn-float32-gb64",
        "multi_worker_mirrored-w2x1-ring-ctl-dsfn-float32-gb128",
        "multi_worker_mirrored-w3x1-ring-ctl-dsfn-float32-gb192"],
    "resnet50": [
        "default-r1-fit-float32-gb8", "default-r1-ctl-float32-gb8"],
    # the seeds' tutorials: every path runs here, MWMS and PS fit through tf-keras
    "seed_tutorials": [
        "default-r1-fit-float32-gb16",
        "default-r1-ctl-float32-gb16", "default-r1-fit-mixed_bfloat16-gb16",
        "default-r1-ctl-mixed_bfloat16-gb16", "mirrored-r2-numpy-fit-float32-gb32",
        "multi_worker_mirrored-w2x1-tf_keras-fit-float32-gb32",
        "parameter_server-ps1w2-tf_keras-fit-float32-gb16",
        "default-r1-resnet50-head-fit-float32-gb16", "default-r1-resnet50-ft10-fit-float32-gb16"],
    "strategy_shootout": [
        "default-r1-ctl-float32-gb64",
        "one_device-r1-ctl-float32-gb64", "mirrored-r2-ctl-float32-gb128",
        "central_storage-r2-ctl-float32-gb128", "multi_worker_mirrored-w2x1-ctl-float32-gb128",
        "parameter_server-ps1w2-ctl-float32-gb64"],
    # the tutorials' own builders (tutorials.py), each compiled with its own loss and optimizer
    "tutorial_mlp_clusters": [
        "central_storage-r2-fit-float32-gb128", "multi_worker_mirrored-w2x1-ctl-float32-gb128"],
    "tutorial_regression": [
        "default-r1-fit-float32-gb10",
        "default-r1-ctl-float32-gb10", "central_storage-r2-ctl-float32-gb10",
        "parameter_server-ps1w2-tf_keras-fit-float32-gb10"],
    "tutorial_softmax": [
        "default-r1-fit-float32-gb64", "mirrored-r2-ctl-float32-gb128"],
    "tutorial_transfer": [
        "default-r1-fit-float32-gb16", "default-r1-ctl-float32-gb16",
        "mirrored-r2-fit-float32-gb32", "mirrored-r2-ctl-float32-gb32"],
    "tf_upgrade": [
        "default-r1-fit-float32-gb64-tf2.20", "default-r1-tf_keras-fit-float32-gb64-tf2.20"],
    "transformer": [
        "default-r1-fit-float32-gb32", "mirrored-r2-ctl-float32-gb64"],
}
# What the terminal summary must show to tell variants apart that differ in the model only.
SUMMARY_SHOWS = {"seed_tutorials": ["resnet50 (head trainable)", "resnet50 (last 10 trainable)"]}
SKIPPED: dict[str, dict[str, str]] = {
    "clusters": {
        "tpu-r1-ctl-float32-gb64": NO_TPU, "tpu-r1-fit-float32-gb64": NO_TPU,
        "multi_worker_mirrored-w2x1-fit-float32-gb128": MWM_FIT,
        "multi_worker_mirrored-w2x2-fit-float32-gb256": MWM_FIT,
        "parameter_server-ps1w2-fit-float32-gb64": PS_FIT},
    "mixed_precision": {
        "default-r1-fit-mixed_float16-gb64": FLOAT16_ON_CPU},
    "strategy_shootout": {"tpu-r1-ctl-float32-gb64": NO_TPU},
}


def test_every_shipped_scenario_states_its_outcomes() -> None:
    assert sorted(OK) == [p.stem for p in SCENARIOS]
    assert set(SKIPPED) <= set(OK)


def test_what_runs_here_is_among_each_scenarios_variants() -> None:
    """The subsets run here (ONLY) and the outcomes expected (OK, SKIPPED) name variants the
    scenario's file expands to: a renamed or dropped variant fails here, not as a silent gap."""
    for path in SCENARIOS:
        ids = [v.id for v in load_variants(path)[1]]
        for pattern in ONLY.get(path.stem, []):
            assert fnmatch.filter(ids, pattern), (path.stem, pattern)
        assert set(OK[path.stem]) | set(SKIPPED.get(path.stem, {})) <= set(ids), path.stem


def run_args(stem: str) -> list[str]:
    """How the test runs a shipped scenario: --quick; all but the default scenario (run as users
    run it, with its controls) without controls, the variants of ONLY, and with FEWER_STEPS
    unless they keep their own (OWN_STEPS)."""
    if stem == WITH_CONTROLS:
        return ["--quick"]
    only = [arg for pattern in ONLY.get(stem, []) for arg in ("--only", pattern)]
    return ["--quick", "--no-control", *only, *([] if stem in OWN_STEPS else FEWER_STEPS)]


# These scenarios' runs start with the session, in the background one after another (longest
# first; tests/early.py), and whatever has not started when this module comes runs here, two at a
# time: much of a run is single-threaded (interpreter and cluster start-up, graph building, the
# gate's hand-overs), so runs share this 2-core machine's cores well. fault_tolerance's run is the
# recovery tests' and clusters' run the cluster tests' (session fixtures). Figures are not checked
# here, only that every path runs and what it records.
LONGEST_FIRST = ["seed_tutorials", "mnist_mirrored", "tutorial_softmax", "batch_sweep",
                 "transformer", "parameter_server", "lstm", "tutorial_regression",
                 "strategy_shootout", "input_bound", "mixed_precision", "tf_upgrade",
                 "multi_worker_ctl", "tutorial_mlp_clusters", "checkpoint_cost"]
SHARED = {"fault_tolerance": "fault_tolerance_run", "clusters": "clusters_run"}
RUN_HERE = sorted({p.stem for p in SCENARIOS} - set(SHARED) - set(EXPANDED_ONLY),
                  key=lambda s: LONGEST_FIRST.index(s) if s in LONGEST_FIRST else -1)
IN_TF220 = ("tf_upgrade",)  # runs in the session's TensorFlow 2.20 environment


def start_run(stem: str, context: EarlyContext) -> BenchRun:
    if stem in IN_TF220:  # built once per session (conftest's tf220_build), not beside it
        context.wait_for_tf220()
    return bench_run(REPO / "scenarios" / f"{stem}.toml",
                     context.tmp_path_factory.mktemp(stem) / "results", *run_args(stem),
                     timeout=1200)


@pytest.fixture(scope="module")
def shipped_runs(early_runs: EarlyRuns) -> Iterator[dict[str, Future[BenchRun]]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {stem: early_runs.take(stem, partial(start_run, stem), pool) for stem in RUN_HERE}


# the shared runs too, which these tests take by their fixtures' names (SHARED)
SHARED_RUNS = [run for fixture in SHARED.values() for run in declared(getattr(conftest, fixture))]
declare(shipped_runs, [*SHARED_RUNS, *((stem, partial(start_run, stem)) for stem in RUN_HERE)])


@pytest.mark.timeout(2400)  # the first test waits for the runs started before its own
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenario_runs_quick(scenario: Path, shipped_runs: dict[str, Future[BenchRun]],
                                     request: pytest.FixtureRequest) -> None:
    controls_on = scenario.stem == WITH_CONTROLS
    if scenario.stem in EXPANDED_ONLY:
        assert [v.id for v in load_variants(scenario)[1]] == OK[scenario.stem]
        return
    if scenario.stem in SHARED:
        run = request.getfixturevalue(SHARED[scenario.stem])
    else:
        run = shipped_runs[scenario.stem].result()
    out = run.proc.stdout + run.proc.stderr
    assert run.proc.returncode == 0, out[-3000:]
    assert "Traceback" not in out
    ok, skipped = list(OK[scenario.stem]), SKIPPED.get(scenario.stem, {})
    if controls_on:
        ok += [f"{ok[0]}-control", "yardstick"]
    records = run.by_id()
    outcomes = {vid: (rec["status"], rec["reason"]) for vid, rec in records.items()}
    assert {vid: rec["status"] for vid, rec in records.items()} == {
        **dict.fromkeys(ok, "ok"), **dict.fromkeys(skipped, "skipped")}, outcomes
    for vid, why in skipped.items():
        assert records[vid]["reason"].startswith(why), outcomes[vid]
    for vid in ok:
        rec = records[vid]
        assert rec["throughput"]["median"] == pytest.approx(
            rec["effective"]["global_batch"] / rec["step_time"]["median"]), vid
        assert rec["keras"]["flavour"] == ("tf_keras" if "-tf_keras-" in vid else "keras3"), vid
        if rec["variant"]["measure"]["checkpoint"]:  # saved, and the restore gave back the weights
            assert rec["checkpoint"]["save_count"] == rec["checkpoint"]["expected_saves"] > 0, vid
            assert rec["checkpoint"]["restore"]["weights_match"] is True, vid
    if scenario.stem == "seed_tutorials":  # freezing: the head alone trains, then 10 layers more
        head, tuned = (records[f"default-r1-resnet50-{t}-fit-float32-gb16"]["model_params"]
                       for t in ("head", "ft10"))
        assert head["total"] == tuned["total"]
        assert head["trainable"] < tuned["trainable"] < tuned["total"]
    if scenario.stem in LOSS_FALLS:
        for vid in ok:
            loss = records[vid]["loss"]
            assert loss["final"] < loss["initial"], (vid, loss)
    if scenario.stem == "parameter_server":  # the fixed partitioner halves every table
        tables = records["parameter_server-ps2w2-fixed-tf_keras-ctl-float32-gb256"]["variables"][
            "tables"]
        user = next(t for t in tables if t["name"].startswith("user_embedding"))
        assert user["rows"] == 1_000_000 and user["bytes"] == 128_000_000
        assert user["bytes_by_place"] == {"ps:0": 64_000_000, "ps:1": 64_000_000}
    if scenario.stem in SUMMARY_SHOWS:  # rendered wide here: a pipe's 80 columns wrap cells
        console = Console(width=300, record=True)
        render_summary(console, load_all(run.records))
        summary = console.export_text()
        for label in SUMMARY_SHOWS[scenario.stem]:
            assert label in summary, label
    # the baseline (listed first), its A/A twin and the yardstick: the only control variants
    controls = {vid: rec["variant"]["control"] for vid, rec in records.items() if rec["variant"]["control"]}
    assert controls == ({ok[0]: "baseline", f"{ok[0]}-control": "twin", "yardstick": "yardstick"}
                        if controls_on else {}), controls
    if controls_on:
        assert "noise floor:" in run.proc.stdout
    assert (run.run_dir.parent.parent / "reports" / run.run_dir.name / "index.html").exists()
