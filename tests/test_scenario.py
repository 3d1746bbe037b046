"""Scenario validation, matrix expansion, batch rules and the one-line errors of `bench validate`."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bench.errors import ScenarioError
from bench.runner import RunOptions, apply_overrides
from bench.scenario.loading import load_scenario, load_variants, parse_scenario
from bench.scenario.matrix import expand
from tests.conftest import REPO, bench

BASE = {
    "scenario": {"name": "s"},
    "batch": {"rule": "weak", "per_replica": 32},
    "strategies": [{"name": "default"}],
}


def scenario(**sections: object) -> dict:
    return {**BASE, **sections}


def variants_of(doc: dict) -> list:
    return expand(parse_scenario(doc))


def test_defaults_expand_to_fit_and_ctl() -> None:
    ids = [v.id for v in variants_of(BASE)]
    assert ids == ["default-r1-fit-float32-gb32", "default-r1-ctl-float32-gb32"]


def test_list_valued_fields_expand_to_the_cross_product() -> None:
    doc = scenario(
        strategies=[{"name": "default"}, {"name": "mirrored", "replicas": [1, 2, 4]}],
        train={"api": ["fit", "ctl"], "precision": ["float32", "mixed_bfloat16"]},
    )
    variants = variants_of(doc)
    assert len(variants) == (1 + 3) * 2 * 2
    assert len({v.id for v in variants}) == len(variants)
    assert [v.index for v in variants] == list(range(len(variants)))
    mirrored4 = [v for v in variants if v.strategy == "mirrored" and v.replicas == 4]
    assert {(v.api, v.precision) for v in mirrored4} == {
        ("fit", "float32"), ("fit", "mixed_bfloat16"), ("ctl", "float32"), ("ctl", "mixed_bfloat16")}


def test_a_strategy_entry_can_add_precisions_without_doubling_the_matrix() -> None:
    doc = scenario(strategies=[{"name": "default"},
                               {"name": "default", "precision": ["mixed_bfloat16"]},
                               {"name": "mirrored", "replicas": 2}],
                   train={"api": "fit", "precision": "float32"})
    assert [v.id for v in variants_of(doc)] == [
        "default-r1-fit-float32-gb32", "default-r1-fit-mixed_bfloat16-gb32",
        "mirrored-r2-fit-float32-gb64"]


def test_a_precision_declared_twice_for_one_strategy_is_an_error() -> None:
    doc = scenario(strategies=[{"name": "default"}, {"name": "default", "precision": "float32"}],
                   train={"api": "fit"})
    with pytest.raises(ScenarioError, match=r"strategies\[1\].*declared twice"):
        variants_of(doc)


def test_distribute_dataset_axis_applies_to_the_custom_loop_only() -> None:
    doc = scenario(train={"api": ["fit", "ctl"], "distribute_dataset": [
        "experimental_distribute_dataset", "distribute_datasets_from_function"]})
    variants = variants_of(doc)
    assert [(v.api, v.distribute_dataset) for v in variants] == [
        ("fit", None), ("ctl", "experimental_distribute_dataset"),
        ("ctl", "distribute_datasets_from_function")]
    assert variants[2].id.endswith("dsfn-float32-gb32") or "dsfn" in variants[2].id


def test_weak_scaling_keeps_per_replica_batch() -> None:
    doc = scenario(strategies=[{"name": "mirrored", "replicas": [1, 2, 4]}], train={"api": "fit"})
    assert [(v.per_replica_batch, v.global_batch) for v in variants_of(doc)] == [
        (32, 32), (32, 64), (32, 128)]


def test_strong_scaling_splits_the_global_batch() -> None:
    doc = scenario(batch={"rule": "strong", "global": 128},
                   strategies=[{"name": "mirrored", "replicas": [1, 2, 4]}], train={"api": "fit"})
    assert [(v.per_replica_batch, v.global_batch) for v in variants_of(doc)] == [
        (128, 128), (64, 128), (32, 128)]


def test_strong_scaling_rejects_an_uneven_split() -> None:
    doc = scenario(batch={"rule": "strong", "global": 100},
                   strategies=[{"name": "mirrored", "replicas": [1, 3]}])
    with pytest.raises(ScenarioError, match=r"batch\.global: 100 does not split evenly over 3"):
        variants_of(doc)


@pytest.mark.parametrize(("rule", "expected"), [
    ("none", [0.1, 0.1]), ("linear", [0.1, 0.2]), ("sqrt", [0.1, 0.1 * math.sqrt(2)])])
def test_learning_rate_scaling_follows_the_global_batch(rule: str, expected: list[float]) -> None:
    doc = scenario(batch={"rule": "weak", "per_replica": 32, "learning_rate": 0.1,
                          "lr_scaling": rule},
                   strategies=[{"name": "mirrored", "replicas": [1, 2]}], train={"api": "fit"})
    assert [v.learning_rate for v in variants_of(doc)] == pytest.approx(expected)


def test_batch_size_sweep_is_an_axis() -> None:
    doc = scenario(batch={"rule": "weak", "per_replica": [16, 64]}, train={"api": "fit"})
    assert [v.global_batch for v in variants_of(doc)] == [16, 64]


def test_duplicate_variants_are_rejected() -> None:
    doc = scenario(strategies=[{"name": "default"}, {"name": "default"}])
    with pytest.raises(ScenarioError, match=r"strategies\[1\]: variant .* declared twice"):
        variants_of(doc)


@pytest.mark.parametrize(("doc", "field", "message"), [
    (scenario(strategies=[{"name": "mirrored", "replica": 2}]), "strategies[0].replica",
     "did you mean 'replicas'"),
    (scenario(strategies=[{"name": "mirrored", "replicas": 0}]), "strategies[0].replicas[0]",
     "greater than or equal to 1"),
    (scenario(strategies=[{"name": "mirored"}]), "strategies[0].name", "'mirrored'"),
    (scenario(measure={"steps": "many"}), "measure.steps", "valid integer"),
    (scenario(train={"api": "keras"}), "train.api[0]", "'fit' or 'ctl'"),
    (scenario(model={"name": "gpt5"}), "model", "unknown model 'gpt5'"),
    (scenario(strategies=[{"name": "default", "replicas": 2}]), "strategies[0]",
     "runs exactly 1 replica"),
    (scenario(strategies=[{"name": "central_storage", "cross_device_ops": "nccl"}]),
     "strategies[0]", "applies to strategy 'mirrored' only"),
    ({**BASE, "batch": {"rule": "strong", "per_replica": 8}}, "batch", "strong scaling sets"),
    ({"scenario": {"name": "s"}, "strategies": [{"name": "default"}]}, "batch",
     "required key is missing"),
    ({**BASE, "extra": 1}, "extra", "unknown key"),
    (scenario(train={"api": "fit"}, data={"feed": "numpy", "resize": [14, 14]}), "data.resize",
     "host-side preprocessing runs in bench's tf.data pipeline"),
    (scenario(strategies=[{"name": "parameter_server", "workers": 2, "feed": "numpy",
                           "api": "fit"}]), "strategies[0].feed", "per-worker dataset"),
    (scenario(model={"trainable": "head"}), "model.trainable", "'mlp' has none"),
    (scenario(data={"shape": [32, 32, 3]}, strategies=[
        {"name": "default", "model": {"name": "applications.MobileNetV2", "trainable": 156}}]),
     "strategies[0].model.trainable", "156 is more layers than MobileNetV2's base has (155)"),
    (scenario(strategies=[{"name": "default", "model": {"name": "resnet50"}}]),
     "strategies[0].model.name", "needs images [H, W >= 32, 3]"),
    (scenario(train={"jit_compile": ["maybe"]}), "train.jit_compile", "valid boolean"),
    (scenario(measure={"checkpoint": {"every": 0}}), "measure.checkpoint.every",
     "greater than or equal to 1"),
    (scenario(measure={"checkpoint": {"every": 5, "keep": "two"}}), "measure.checkpoint.keep",
     "valid integer"),
    (scenario(measure={"checkpoint": {"every": 5, "kept": 2}}), "measure.checkpoint.kept",
     "did you mean 'keep'"),
    (scenario(measure={"checkpoint": {"keep": 2}}), "measure.checkpoint.every",
     "required key is missing"),
    (scenario(measure={"checkpoint": 10}), "measure.checkpoint", "valid dictionary"),
])
def test_errors_name_the_field(doc: dict, field: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc, "f.toml")
    text = str(info.value)
    assert text.startswith(f"f.toml: {field}: "), text
    assert message in text
    assert "\n" not in text


def test_keras_spe_jit_and_trainable_are_axes_with_ids_that_name_them() -> None:
    doc = scenario(data={"shape": [32, 32, 3]},
                   train={"api": "fit", "keras": ["keras3", "tf_keras"],
                          "steps_per_execution": [1, 2], "jit_compile": [False, True]},
                   measure={"steps": 4, "warmup_steps": 2})
    variants = variants_of(doc)
    assert len(variants) == 8
    ids = {v.id for v in variants}
    assert {"default-r1-fit-float32-gb32", "default-r1-tf_keras-spe2-xla-fit-float32-gb32"} <= ids
    tfk = next(v for v in variants if v.id == "default-r1-tf_keras-spe2-xla-fit-float32-gb32")
    assert (tfk.train.keras, tfk.train.steps_per_execution, tfk.train.jit_compile) == (
        "tf_keras", 2, True)
    assert tfk.axes()["keras"] == "tf_keras"
    frozen = variants_of(scenario(data={"shape": [32, 32, 3]}, train={"api": "fit"}, strategies=[
        {"name": "default"},
        {"name": "mirrored", "replicas": 2, "api": "fit", "feed": "numpy", "keras": "tf_keras"},
        {"name": "default", "model": {"name": "resnet50", "trainable": ["head", 10, "all"]}}]))
    assert [v.id for v in frozen] == [
        "default-r1-fit-float32-gb32", "mirrored-r2-numpy-tf_keras-fit-float32-gb64",
        "default-r1-resnet50-head-fit-float32-gb32", "default-r1-resnet50-ft10-fit-float32-gb32",
        "default-r1-resnet50-fit-float32-gb32"]
    assert [v.model.trainable for v in frozen[2:]] == ["head", 10, "all"]
    assert frozen[1].data.feed == "numpy" and frozen[0].data.feed == "dataset"


def test_steps_must_be_a_multiple_of_steps_per_execution() -> None:
    doc = scenario(train={"steps_per_execution": 4}, measure={"steps": 10, "warmup_steps": 8})
    with pytest.raises(ScenarioError, match=r"measure\.steps: 10 is not a multiple"):
        variants_of(doc)


def test_shipped_default_scenario_expands_to_the_promised_matrix() -> None:
    _, variants = load_variants(Path(__file__).parent.parent / "scenarios/mnist_mirrored.toml")
    pairs = {(v.strategy, v.replicas, v.api) for v in variants}
    for api in ("fit", "ctl"):
        assert {("default", 1, api), ("mirrored", 1, api), ("mirrored", 2, api)} <= pairs
        assert any(s == "central_storage" and a == api for s, _, a in pairs)


def test_digest_changes_with_content(tmp_path: Path) -> None:
    a = parse_scenario(BASE)
    b = parse_scenario(scenario(measure={"steps": 7}))
    assert a.digest() != b.digest()
    assert a.digest() == parse_scenario(dict(BASE)).digest()


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[scenario\nname = 1")
    with pytest.raises(ScenarioError, match=r"bad.toml: invalid TOML"):
        load_scenario(bad)
    with pytest.raises(ScenarioError, match=r"nope.toml: file not found"):
        load_scenario(tmp_path / "nope.toml")


MALFORMED = {
    "bad_toml": ("[scenario\nname='x'", "invalid TOML"),
    "unknown_key": ("[scenario]\nname='x'\n[batch]\nper_replica=8\n[[strategies]]\nname='default'\n"
                    "colour='red'\n", "strategies[0].colour: unknown key"),
    "wrong_type": ("[scenario]\nname='x'\n[batch]\nper_replica='eight'\n[[strategies]]\n"
                   "name='default'\n", "batch.per_replica[0]:"),
    "zero_replicas": ("[scenario]\nname='x'\n[batch]\nper_replica=8\n[[strategies]]\n"
                      "name='mirrored'\nreplicas=0\n", "strategies[0].replicas[0]:"),
    "unknown_strategy": ("[scenario]\nname='x'\n[batch]\nper_replica=8\n[[strategies]]\n"
                         "name='horovod'\n", "strategies[0].name:"),
    "unknown_keras": ("[scenario]\nname='x'\n[batch]\nper_replica=8\n[train]\nkeras='keras2'\n"
                      "[[strategies]]\nname='default'\n", "train.keras:"),
    "numpy_ctl": ("[scenario]\nname='x'\n[data]\nfeed='numpy'\n[batch]\nper_replica=8\n"
                  "[[strategies]]\nname='default'\n",
                  "data.feed: 'numpy' feeds Keras fit and JAX's custom loop; TensorFlow's"),
    "numpy_tfds": ("[scenario]\nname='x'\n[data]\nname='tfds'\ntfds_name='mnist'\nfeed='numpy'\n"
                   "[batch]\nper_replica=8\n[train]\napi='fit'\n[[strategies]]\nname='default'\n",
                   "data.feed: 'numpy' feeds fit the in-memory arrays; data 'tfds'"),
    "checkpoint_every": ("[scenario]\nname='x'\n[batch]\nper_replica=8\n[measure]\n"
                         "checkpoint={ every = -1, keep = 2 }\n[[strategies]]\nname='default'\n",
                         "measure.checkpoint.every: Input should be greater than or equal to 1"),
    "frozen_too_many": ("[scenario]\nname='x'\n[data]\nshape=[32, 32, 3]\n[model]\n"
                        "name='resnet50'\ntrainable=[\"head\", 500]\n[batch]\nper_replica=8\n"
                        "[[strategies]]\nname='default'\n",
                        "model.trainable: 500 is more layers than ResNet50's base has (176)"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
@pytest.mark.parametrize("command", ["validate", "run"])
def test_cli_rejects_malformed_scenarios_in_one_line(tmp_path: Path, case: str,
                                                     command: str) -> None:
    text, expected = MALFORMED[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(text)
    results = tmp_path / "results"
    extra = ["--results-dir", str(results)] if command == "run" else []
    proc = bench(command, str(path), *extra)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: {path}: ")
    assert expected in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not results.exists() or not any(results.iterdir())  # nothing half-written


def test_cli_validate_lists_variants() -> None:
    proc = bench("validate", "scenarios/mnist_mirrored.toml")
    assert proc.returncode == 0, proc.stderr
    assert "12 variant(s)" in proc.stdout
    assert "mirrored-r2-ctl-float32-gb128" in proc.stdout


def test_every_shipped_scenario_validates() -> None:
    for path in sorted((Path(__file__).parent.parent / "scenarios").glob("*.toml")):
        assert tomllib.loads(path.read_text())
        assert load_variants(path)[1], path


@pytest.mark.parametrize(("model", "data", "message"), [
    ("resnet50", {"name": "mnist"}, "model.name: 'resnet50' needs images [H, W >= 32, 3]; data "
                                    "'mnist' gives examples of shape [28, 28, 1]"),
    ("lstm", {"name": "synthetic"}, "model.name: 'lstm' needs series [timesteps, features]"),
    ("cnn", {"name": "synthetic", "shape": [100, 8]}, "model.name: 'cnn' needs images"),
    ("mlp", {"name": "mnist", "variable_length": True},
     "data.variable_length: applies to synthetic series [timesteps, features] only"),
])
def test_model_and_data_must_fit_each_other(model: str, data: dict, message: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(message)):
        parse_scenario(scenario(model={"name": model}, data=data), "s.toml")


# Each built-in model with synthetic data of a shape it is built for.
PAIRED = (("lstm", {"shape": [100, 8], "variable_length": True}),
          ("transformer", {"shape": [28, 28, 1]}), ("transformer", {"shape": [50, 8]}),
          ("resnet50", {"shape": [224, 224, 3]}), ("cnn", {"shape": [28, 28, 1]}))


def paired_scenario(model: str, data: dict, **more: object) -> dict:
    return scenario(model={"name": model}, data={"name": "synthetic", **data, **more})


def test_models_accept_their_paired_data() -> None:
    """Validation passes each pairing through as given, and it is a decision, not the absence
    of one: the same model is refused flat vectors, which none of them takes."""
    for model, data in PAIRED:
        [variant, *_] = expand(parse_scenario(paired_scenario(model, data)))
        assert variant.model.name == model
        assert list(variant.data.shape) == data["shape"]
        assert variant.data.variable_length is data.get("variable_length", False)
        with pytest.raises(ScenarioError, match=f"model.name: '{model}' needs"):
            parse_scenario(paired_scenario(model, {"shape": [64]}), "s.toml")


PAIRED_IN_TENSORFLOW = """
import json, sys
from bench.data import sources
from bench.scenario.loading import parse_scenario
from bench.scenario.matrix import expand
from bench.training import workload

out = []
for doc in json.loads(sys.argv[1]):
    variant = expand(parse_scenario(doc))[0]
    data = sources.load_for(variant)  # the worker's own pairing check, once examples exist
    built = workload.build(variant, sources.model_inputs(data, variant.data))
    x, y = next(iter(sources.make_dataset(data, variant.data, 2).take(1)))
    out.append({"model": variant.model.name, "input": list(x.shape),
                "output": built.model(x, training=False).shape.as_list(),
                "classes": data.outputs,
                "loss": workload.initial_loss(built, (x, y), variant.model.name)})
print(json.dumps(out))
"""


@pytest.mark.slow
def test_models_accept_their_paired_data_in_tensorflow() -> None:
    """What validation accepts, the real Keras builders take: one batch through each model."""
    docs = [paired_scenario(model, data, num_examples=4) for model, data in PAIRED]
    proc = subprocess.run([sys.executable, "-c", PAIRED_IN_TENSORFLOW, json.dumps(docs)],
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = json.loads(proc.stdout.splitlines()[-1])
    assert [b["model"] for b in built] == [model for model, _ in PAIRED]
    for (model, data), b in zip(PAIRED, built, strict=True):
        assert b["input"][1:] == data["shape"], (model, b)
        assert b["output"] == [2, b["classes"]], (model, b)
        assert math.isfinite(b["loss"]), (model, b)


# ---------------------------------------------------------------------------------------------
# data sources read from files, preprocessing, pipeline axes, the accuracy check


@pytest.mark.parametrize(("data", "check", "field", "message"), [
    ({"name": "tfrecord"}, None, "data.files", "required for data.name = 'tfrecord'"),
    ({"name": "tfds"}, None, "data.tfds_name", "required for data.name = 'tfds'"),
    ({"name": "mnist", "files": "x/*.tfrecord"}, None, "data.files",
     "applies to data.name = 'tfrecord' only, not 'mnist'"),
    ({"name": "tfrecord", "files": "x/*", "data_dir": "/d"}, None, "data.data_dir",
     "applies to data.name = 'tfds' only"),
    ({"name": "mnist", "auto_shard": "file"}, None, "data.auto_shard",
     "'file' shards by input file; data 'mnist' is held in memory"),
    ({"name": "synthetic", "shape": [100, 8], "resize": [32, 32]}, None, "data.resize",
     "applies to images [H, W, C]; data 'synthetic' gives examples of shape [100, 8]"),
    ({"name": "mnist", "random_crop": [32, 32]}, None, "data.random_crop",
     "[32, 32] is larger than the image [28, 28]"),
    ({"name": "mnist", "resize": [40, 40], "random_crop": [48, 40]}, None, "data.random_crop",
     "[48, 40] is larger than the image [40, 40] after data.resize"),
    ({"name": "mnist", "resize": [40]}, None, "data.resize", "at least 2 items"),
    ({"name": "mnist"}, {"accuracy": {"min": 0.5, "eval_split": "validation"}},
     "check.accuracy.eval_split", "'validation': data 'mnist' has the splits 'train' and 'test'"),
    ({"name": "tfrecord", "files": "x/*"}, {"accuracy": {"min": 0.5}}, "data.eval_files",
     "required by check.accuracy"),
    ({"name": "mnist"}, {"accuracy": {"min": 1.5}}, "check.accuracy.min", "less than or equal"),
    ({"name": "mnist", "map_parallelism": []}, None, "data.map_parallelism", "an empty list"),
])
def test_data_errors_name_the_field(data: dict, check: dict | None, field: str,
                                    message: str) -> None:
    doc = scenario(data=data, **({"check": check} if check else {}))
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc, "f.toml")
    text = str(info.value)
    assert text.startswith(f"f.toml: {field}: "), text
    assert message in text and "\n" not in text


def test_preprocessing_sets_the_shape_the_model_is_checked_against() -> None:
    # The cnn needs images of at least 10 x 10: the crop, not the stored 28 x 28, decides.
    with pytest.raises(ScenarioError, match=re.escape(
            "model.name: 'cnn' needs images [H, W >= 10, C]; data 'mnist' gives examples of "
            "shape [8, 8, 1]")):
        parse_scenario(scenario(model={"name": "cnn"},
                                data={"name": "mnist", "resize": [40, 40], "random_crop": [8, 8]}))
    parse_scenario(scenario(model={"name": "resnet50"},
                            data={"name": "synthetic", "shape": [16, 16, 3], "resize": [32, 32]}))
    # Shapes of file-based data are known only to the worker; the scenario itself is fine.
    parse_scenario(scenario(model={"name": "resnet50"},
                            data={"name": "tfrecord", "files": "/nowhere/*.tfrecord"}))


def test_pipeline_fields_given_as_lists_are_matrix_axes() -> None:
    doc = scenario(data={"map_parallelism": [1, "autotune"], "prefetch": [0, 2, "autotune"]},
                   train={"api": "fit"})
    variants = variants_of(doc)
    assert [v.id for v in variants][:3] == ["default-r1-fit-float32-gb32-map1-pf0",
                                            "default-r1-fit-float32-gb32-map1-pf2",
                                            "default-r1-fit-float32-gb32-map1-pfauto"]
    assert len(variants) == 6 and len({v.id for v in variants}) == 6
    last = variants[-1]
    assert (last.data.map_parallelism, last.data.prefetch) == ("autotune", "autotune")
    assert last.axes()["map_parallelism"] == "autotune"
    # An axis of one value (or a scalar) changes nothing in the ids.
    single = variants_of(scenario(data={"prefetch": [3]}, train={"api": "fit"}))
    assert [v.id for v in single] == ["default-r1-fit-float32-gb32"]
    assert single[0].data.prefetch == 3


def test_quick_shortens_the_run_and_its_short_epoch_to_a_window() -> None:
    default = load_scenario(REPO / "scenarios" / "mnist_mirrored.toml")
    quick = apply_overrides(default, RunOptions(quick=True)).measure
    assert (quick.warmup_steps, quick.steps, quick.repeats, quick.settle_steps, quick.trace_steps,
            quick.epochs, quick.epoch_steps, quick.settle_s, quick.min_window_s) == \
        (3, 16, 2, 1, 0, 1, 16, 0.0, 0.0)  # fixed counts: no sizing by duration
    fewer = apply_overrides(default, RunOptions(quick=True, steps=8)).measure
    assert (fewer.steps, fewer.epoch_steps) == (8, 8)
    resnet = apply_overrides(load_scenario(REPO / "scenarios" / "resnet50.toml"),
                             RunOptions(quick=True)).measure
    assert (resnet.steps, resnet.epoch_steps) == (4, 4)
    assert apply_overrides(default, RunOptions()).measure.epoch_steps == 64
