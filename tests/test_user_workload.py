"""A user's own workload: their model (compiled or not), loss, optimizer, metrics and tf.data
pipeline, from a module beside the scenario file; and every way it can be wrong, told in one line.
"""

from __future__ import annotations

import re
import shutil
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from bench.data.synthetic import synthetic_split
from bench.errors import ScenarioError
from bench.scenario.loading import load_variants, parse_scenario
from bench.scenario.schema import DataConfig
from tests.conftest import REPO, BenchRun, bench, bench_run, merge, to_toml
from tests.early import EarlyContext, early_fixture

FIXTURES = Path(__file__).parent / "fixtures" / "workloads"

# A user's project: the scenario and their module side by side.
USER_SCENARIO = """
[scenario]
name = "mine"
[model]
name = "user_workloads:logistic"
[data]
name = "user_workloads:features_and_labels"
shuffle_buffer = 16
[batch]
rule = "weak"
per_replica = 8
[measure]
warmup_steps = 2
steps = 4
repeats = 2
trace_steps = 0
timeout_s = 120
[[strategies]]
name = "default"
"""


def project(tmp_path: Path, body: str = "") -> Path:
    """USER_SCENARIO deep-merged with `body` (whose [[strategies]] replace the default one),
    written into a folder of its own beside the user's modules."""
    folder = tmp_path / "project"
    folder.mkdir(exist_ok=True)
    for module in FIXTURES.glob("*.py"):
        shutil.copy(module, folder)
    doc = merge(tomllib.loads(USER_SCENARIO), tomllib.loads(body))
    path = folder / "mine.toml"
    path.write_text(to_toml(doc))
    return path


# ---------------------------------------------------------------------------------------------
# what the parent can tell before anything runs: one line naming the file and the field, exit 2

BAD = {
    "missing_module": ('[model]\nname = "nosuch:build"',
                       "model.name: no module 'nosuch' to import (beside the scenario ("),
    "missing_function": ('[model]\nname = "user_workloads:logistc"',
                         "user_workloads.py defines no 'logistc'; did you mean 'logistic'?"),
    "missing_data_function": ('[data]\nname = "user_workloads:features"',
                              "data.name: "),
    "unknown_loss": ('[train]\nloss = "binary_crosentropy"',
                     "train.loss: unknown loss 'binary_crosentropy'; did you mean "
                     "'binary_crossentropy'?"),
    "unknown_optimizer": ('[train]\noptimizer = "adamww"',
                          "train.optimizer: unknown optimizer 'adamww'; did you mean 'adamw'?"),
    "unknown_metric": ('[train]\nmetrics = ["acuracy"]',
                       "train.metrics: unknown metric 'acuracy'; did you mean 'accuracy'?"),
    "loss_argument": ('[train]\nloss = { name = "binary_crossentropy", from_logit = true }',
                      "train.loss: loss 'binary_crossentropy' (BinaryCrossentropy) has no "
                      "argument 'from_logit'; did you mean 'from_logits'?"),
    "labels_for_loss": ('[data]\nname = "synthetic"\nlabels = "regression"\n[model]\nname = '
                        '"mlp"\n[train]\nloss = "sparse_categorical_crossentropy"',
                        "train.loss: 'sparse_categorical_crossentropy' trains on labels "
                        "\"sparse\", and data.labels is \"regression\""),
    "learning_rate_twice": ('[batch]\nlearning_rate = 0.01\n[train]\noptimizer = { name = "sgd", '
                            'learning_rate = 0.2 }',
                            "train.optimizer: learning_rate is given here and in "
                            "batch.learning_rate"),
    "labels_on_users_data": ('[data]\nlabels = "one_hot"',
                             "data.labels: 'user_workloads:features_and_labels' is your own "
                             "dataset function"),
    "recommender_without_ids": ('[model]\nname = "recommender"\n[data]\nname = "synthetic"\n'
                                'features = { dense = { shape = [4] } }',
                                "model.name: 'recommender' embeds id columns; data.features has "
                                "none"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_workloads_are_refused_in_one_line(tmp_path: Path, case: str) -> None:
    body, expected = BAD[case]
    path = project(tmp_path, body)
    commands = [("validate",)] + ([("run", "--results-dir", str(tmp_path / "results"))]
                                  if case in ("missing_module", "unknown_loss") else [])
    for command in commands:
        proc = bench(*command[:1], str(path), *command[1:])
        assert proc.returncode == 2, proc.stdout + proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {path}: "), proc.stderr
        assert expected in lines[0], lines[0]
        assert "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()  # nothing half-written


def test_the_parent_never_imports_a_users_module(tmp_path: Path) -> None:
    path = project(tmp_path, '[model]\nname = "marks_import:build"')
    marker = tmp_path / "imported"
    (path.parent / "marks_import.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n\n\n"
        "def build():\n    raise RuntimeError('never called by the parent')\n")
    proc = bench("validate", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()


def test_losses_and_optimizers_are_axes_whose_ids_say_so(tmp_path: Path) -> None:
    path = project(tmp_path, '[model]\nname = "mlp"\n[data]\nname = "synthetic"\nlabels = '
                   '"regression"\n[train]\napi = "fit"\nloss = ["mse", { name = "huber", delta '
                   '= 0.5 }]\noptimizer = ["adam", { name = "sgd", momentum = 0.9 }]')
    _, variants = load_variants(path)
    ids = sorted(v.id for v in variants)
    assert ids == sorted(f"default-r1-{loss}-{opt}-fit-float32-gb8"
                         for loss in ("mse", "huber-d0.5") for opt in ("adam", "sgd-m0.9"))
    huber = next(v for v in variants if "huber" in v.id and "sgd" in v.id)
    assert (huber.train.loss.name, huber.train.loss.args) == ("huber", {"delta": 0.5})
    assert huber.axes()["loss"] == "huber-d0.5" and huber.axes()["optimizer"] == "sgd-m0.9"


@pytest.mark.parametrize(("body", "rate", "given"), [
    ("", 0.001, False),
    ("[batch]\nlearning_rate = 0.01", 0.01, True),
    ('[train]\noptimizer = { name = "sgd", learning_rate = 0.2 }', 0.2, True),
    ('[batch]\nlr_scaling = "linear"\nlr_reference_batch = 8\n[train]\noptimizer = { name = '
     '"sgd", learning_rate = 0.2 }', 0.4, True),
])
def test_the_learning_rate_comes_from_one_place_and_the_batch_rule_scales_it(
        tmp_path: Path, body: str, rate: float, given: bool) -> None:
    path = project(tmp_path, '[[strategies]]\nname = "mirrored"\nreplicas = 2\n' + body)
    _, variants = load_variants(path)
    mirrored = next(v for v in variants if v.strategy == "mirrored")
    assert mirrored.learning_rate == pytest.approx(rate)
    assert mirrored.learning_rate_given is given
    assert mirrored.scenario_dir == str(path.parent.resolve())


def test_synthetic_labels_and_features_of_every_kind() -> None:
    base = {"name": "synthetic", "num_examples": 400, "shape": [6]}
    one_hot = synthetic_split(DataConfig(**base, labels="one_hot"), (6,), 5, "train")
    assert one_hot.y.dtype == np.int32 and one_hot.outputs == 5  # rows made in the pipeline
    binary = synthetic_split(DataConfig(**base, labels="binary"), (6,), 10, "train")
    assert binary.y.shape == (400, 1) and set(np.unique(binary.y)) == {0.0, 1.0}
    assert binary.outputs == 1
    regression = synthetic_split(DataConfig(**base, labels="regression", label_shape=[3]), (6,),
                                 10, "train")
    assert regression.y.shape == (400, 3) and regression.outputs == 3
    # targets are a linear map of the features: least squares explains nearly all of them
    fit, residual, *_ = np.linalg.lstsq(regression.x, regression.y, rcond=None)
    assert residual.sum() < 0.05 * ((regression.y - regression.y.mean(0)) ** 2).sum()
    columns = DataConfig(name="synthetic", num_examples=400, labels="binary", features={
        "item": {"vocab": 1000}, "tags": {"vocab": 50, "shape": [3]}, "dense": {"shape": [4]}})
    named = synthetic_split(columns, (), 10, "train")
    assert named.shape == {"item": (), "tags": (3,), "dense": (4,)}
    assert named.x["item"].dtype == np.int64 and 0 <= named.x["item"].min()
    assert named.x["item"].max() < 1000 and named.x["tags"].max() < 50
    assert 0.3 < named.y.mean() < 0.7
    held_out = synthetic_split(columns, (), 10, "test")
    assert len(held_out.y) == 80 and not np.array_equal(held_out.x["dense"][:80],
                                                        named.x["dense"][:80])


def test_named_features_need_a_model_that_takes_them() -> None:
    doc = {"scenario": {"name": "x"}, "batch": {"per_replica": 8},
           "data": {"name": "synthetic", "features": {"item": {"vocab": 10}}},
           "strategies": [{"name": "default"}]}
    with pytest.raises(ScenarioError, match=re.escape(
            "model.name: 'mlp' takes one input tensor; data.features gives named columns")):
        parse_scenario(doc, "s.toml")
    parse_scenario({**doc, "model": {"name": "recommender"}}, "s.toml")


# ---------------------------------------------------------------------------------------------
# what only the worker can tell: the variant fails with one line naming the function


@pytest.fixture(scope="module")
def tf_path() -> Iterator[None]:
    sys.path.insert(0, str(FIXTURES))
    yield
    sys.path.remove(str(FIXTURES))


@pytest.mark.slow
@pytest.mark.parametrize(("function", "message"), [
    ("not_a_dataset", "data.name 'user_workloads:not_a_dataset' returned list, not a "
                      "tf.data.Dataset"),
    ("batched", "data.name 'user_workloads:batched' returns batched examples (a .batch() is in "
                "its pipeline)"),
    ("unlabelled", "data.name 'user_workloads:unlabelled' yields single tensors of shape [4]: "
                   "bench needs (features, labels) pairs"),
    ("needs_path", "data.name 'user_workloads:needs_path': parameter 'path' is not one bench "
                   "passes"),
])
def test_a_dataset_function_that_cannot_feed_fails_in_one_line(tf_path: None, function: str,
                                                                message: str) -> None:
    from bench.data.user_source import load
    from bench.errors import WorkloadError

    with pytest.raises(WorkloadError) as caught:
        load(DataConfig(name=f"user_workloads:{function}"))
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


@pytest.mark.slow
def test_a_dataset_function_reads_its_share_or_bench_shards_it(tf_path: None) -> None:
    import tensorflow as tf

    from bench.data.user_source import load

    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)
    for function, takes in (("sharded_by_context", True), ("features_and_labels", False)):
        cfg = DataConfig(name=f"user_workloads:{function}")
        data = load(cfg)
        assert data.takes_context is takes and data.shape == (4,) and data.outputs == 1
        assert data.label_kind == "float"
        share = list(data.examples(cfg, context).as_numpy_iterator())
        everything = list(data.examples(cfg).as_numpy_iterator())
        assert len(everything) == 64 and len(share) == 32
        np.testing.assert_array_equal(share[0][0], everything[1][0])  # every 2nd, from the 2nd


WORKER_SIDE = {  # model -> the start of its variant's one-line reason
    "not_a_model": "model 'user_workloads:not_a_model' returned dict, not a Keras model",
    "three_outputs": "model 'user_workloads:three_outputs' (outputs (None, 3)) does not fit the "
                     "labels (shape [8, 1], float32) under loss 'binary_crossentropy'",
    "raises": "model 'user_workloads:raises' raised RuntimeError: the builder's own bug",
}


def start_user_run(context: EarlyContext) -> BenchRun:
    """One `bench run` of a user's project, started from another folder: the compiled logistic
    model through fit and the custom loop under the default strategy and Mirrored x2 (with loss
    parity; fit fed the dataset's examples as NumPy arrays too), fit under CentralStorage x2 (whose
    metrics Keras miscounts), a builder without parameters, and builders that go wrong each their
    own way."""
    tmp = context.tmp_path_factory.mktemp("user_run")
    entries = "".join(f'[[strategies]]\nname = "default"\napi = "fit"\nmodel = {{ name = '
                      f'"user_workloads:{model}" }}\n' for model in [*WORKER_SIDE, "no_parameters"])
    entries += ('[[strategies]]\nname = "default"\napi = "fit"\nmodel = { name = '
                '"broken_import:build" }\n')
    path = project(tmp, '[data]\nname = "user_workloads:sharded_by_context"\n[train]\n'
                   'api = ["fit", "ctl"]\nloss = { name = "binary_crossentropy", from_logits = '
                   'true }\n[check]\nloss_parity = { steps = 5, batch = 16 }\n[[strategies]]\n'
                   'name = "default"\n[[strategies]]\nname = "mirrored"\nreplicas = 2\n'
                   'api = "ctl"\n[[strategies]]\nname = "mirrored"\nreplicas = 2\napi = "fit"\n'
                   'feed = "numpy"\n[[strategies]]\nname = "central_storage"\nreplicas = 2\n'
                   'api = "fit"\n' + entries)
    return bench_run(path, tmp / "results", "--no-control", cwd=tmp)


user_run = early_fixture("user_run", start_user_run)


@pytest.mark.slow
def test_a_users_compiled_model_trains_with_its_own_optimizer_and_metrics(
        user_run: BenchRun) -> None:
    out = user_run.proc.stdout + user_run.proc.stderr
    assert user_run.proc.returncode == 1, out[-3000:]  # some variants failed; the run went on
    assert "Traceback" not in out
    records = user_run.by_id()
    good = ["default-r1-fit-float32-gb8", "default-r1-ctl-float32-gb8",
            "mirrored-r2-ctl-float32-gb16", "mirrored-r2-numpy-fit-float32-gb16"]
    for vid in good:
        rec = records[vid]
        assert rec["status"] == "ok", (vid, rec.get("reason"))
        workload = rec["workload"]
        assert workload["compiled_by_builder"] is True
        assert workload["loss"] == {"name": "binary_crossentropy", "args": {"from_logits": True},
                                    "from": "train.loss"}  # [train] wins over the compiled loss
        assert workload["optimizer"]["class"] == "SGD"
        assert workload["optimizer"]["learning_rate"] == pytest.approx(0.5)  # the compiled one
        assert workload["metrics"] == ["accuracy"]
        assert rec["metric_results"]["accuracy"] > 0.6, vid  # updated by fit and the custom loop
        assert rec["loss"]["final"] < rec["loss"]["initial"]
    assert records["mirrored-r2-ctl-float32-gb16"]["checks"]["loss_parity"]["status"] == "ok"
    assert records["default-r1-no_parameters-fit-float32-gb8"]["status"] == "ok"


@pytest.mark.slow
def test_metrics_a_strategy_miscounts_are_not_kept_and_the_record_says_why(
        user_run: BenchRun) -> None:
    """Under CentralStorage with two replicas Keras 3's metrics double their counts at every
    step (read as a wrong accuracy, then nan): the record keeps no value, and says why."""
    rec = user_run.by_id()["central_storage-r2-fit-float32-gb16"]
    assert rec["status"] == "ok", rec.get("reason")
    assert rec["metric_results"] == {"accuracy": None}
    (note,) = [n for n in rec["notes"] if n.startswith("metrics not kept")]
    assert "under CentralStorageStrategy with 2 replicas" in note and "nan" in note
    mirrored = user_run.by_id()["mirrored-r2-ctl-float32-gb16"]  # counted right: kept
    assert mirrored["metric_results"]["accuracy"] > 0.6
    assert not any(n.startswith("metrics not kept") for n in mirrored.get("notes") or [])


@pytest.mark.slow
def test_a_users_broken_code_fails_its_variant_in_one_line(user_run: BenchRun) -> None:
    records = user_run.by_id()
    reasons = {**{f"default-r1-{model}-fit-float32-gb8": why for model, why in WORKER_SIDE.items()},
               "default-r1-build-fit-float32-gb8": "model 'broken_import:build': importing "
               "broken_import raised ModuleNotFoundError: No module named "
               "'a_package_that_is_not_installed'"}
    for vid, why in reasons.items():
        rec = records[vid]
        assert rec["status"] == "failed", vid
        assert rec["reason"].startswith(why) and "\n" not in rec["reason"], rec["reason"]
        assert why[:60] in user_run.proc.stdout  # told on the terminal too


@pytest.mark.slow
def test_the_worked_example_runs_from_anywhere(tmp_path: Path) -> None:
    """examples/own_model as the README runs it, copied out of the repository and run from
    another folder: the folder is all a user needs."""
    example = tmp_path / "elsewhere" / "own_model"
    shutil.copytree(REPO / "examples" / "own_model", example)
    run = bench_run(example / "scenario.toml", tmp_path / "results", "--quick", "--no-control",
                    "--only", "default-r1-fit-*", "--only", "mirrored-r2-ctl-*", cwd=tmp_path)
    assert run.proc.returncode == 0, (run.proc.stdout + run.proc.stderr)[-3000:]
    for rec in run.records:
        assert rec["status"] == "ok", rec.get("reason")
        assert rec["workload"]["optimizer"]["class"] == "AdamW"
        assert set(rec["metric_results"]) == {"accuracy", "auc"}
        assert rec["loss"]["final"] < rec["loss"]["initial"]


@pytest.mark.slow
def test_the_worked_example_runs_on_jax_unchanged(tmp_path: Path) -> None:
    """examples/own_model/backends.toml: the same workload.py (tf.keras layers, its tf.data CSV
    pipeline, dict features) on Keras' JAX backend, on one device and over DataParallel's two,
    through both APIs, training with its own optimizer and metrics."""
    example = tmp_path / "own_model"
    shutil.copytree(REPO / "examples" / "own_model", example)
    run = bench_run(example / "backends.toml", tmp_path / "results", "--quick", "--no-control",
                    "--only", "default-r1-jax-ctl-*", "--only", "data_parallel-r2-jax-fit-*",
                    cwd=tmp_path)
    assert run.proc.returncode == 0, (run.proc.stdout + run.proc.stderr)[-3000:]
    assert sorted(rec["variant"]["id"] for rec in run.records) == [
        "data_parallel-r2-jax-fit-float32-gb128", "default-r1-jax-ctl-float32-gb64"]
    for rec in run.records:
        assert rec["status"] == "ok", rec.get("reason")
        assert rec["env"]["keras_backend"] == "jax"
        assert rec["workload"]["optimizer"]["class"] == "AdamW"
        # the custom loop updates the compiled metrics as fit does
        assert set(rec["metric_results"]) == {"accuracy", "auc"}
        assert 0 < rec["metric_results"]["auc"] <= 1
        assert rec["loss"]["final"] < rec["loss"]["initial"]
