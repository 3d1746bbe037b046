"""Cross-field rules a scenario must meet before anything runs.

Fields that need or exclude each other, and the shape rules: what a data source's examples look
like, what host-side preprocessing makes of them, and whether the model can take the result.
The worker applies the same shape rules once it has read files whose shape only they can tell.
"""

from __future__ import annotations

from pathlib import Path

from bench.errors import ScenarioError
from bench.scenario.catalogue import input_problem, model_info, trainable_problem
from bench.scenario.imports import is_import_path, lookup_problem
from bench.scenario.keras_names import labels_problem
from bench.scenario.schema import (
    ARRAY_DATASETS,
    FILE_DATASETS,
    MNIST_SHAPE,
    DataConfig,
    ModelConfig,
    Scenario,
)
from bench.scenario.strategy_kinds import strategy_kind

IMAGE_OPTIONS = ("resize", "random_crop", "random_flip", "random_brightness")

# Fields that only mean something for some sources: set elsewhere, they are an error.
_DATA_FIELDS_FOR = {
    "files": ("tfrecord",), "eval_files": ("tfrecord",), "interleave_cycle_length": ("tfrecord",),
    "interleave_parallelism": ("tfrecord",), "tfds_name": ("tfds",), "data_dir": ("tfds",),
    "features": ("synthetic",), "label_shape": ("synthetic",),
}
# What a user's dataset function decides itself: set beside one, they are an error.
_NOT_FOR_USER_DATA = ("path", "download", "fallback", "num_examples", "shape", "variable_length",
                      "labels")


def requested_image_options(cfg: DataConfig) -> list[str]:
    return [name for name in IMAGE_OPTIONS if getattr(cfg, name)]


def output_shape(cfg: DataConfig, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of one example after preprocessing (what the model is built for)."""
    size = cfg.random_crop or cfg.resize
    return (*size, shape[-1]) if size else tuple(shape)


def preprocess_problem(cfg: DataConfig, shape: tuple[int, ...]) -> tuple[str, str] | None:
    """(field, why) when the preprocessing options do not fit examples of `shape`."""
    requested = requested_image_options(cfg)
    if requested and len(shape) != 3:
        return f"data.{requested[0]}", (f"applies to images [H, W, C]; data '{cfg.name}' gives "
                                        f"examples of shape {list(shape)}")
    if requested and None in shape[:2] and not cfg.resize:
        return "data.resize", (f"data '{cfg.name}' has images of varying size {list(shape)}: "
                               "set data.resize so batches have one shape")
    if cfg.random_crop:
        image = cfg.resize or list(shape[:2])
        if any(c > s for c, s in zip(cfg.random_crop, image, strict=True)):
            after = " after data.resize" if cfg.resize else ""
            return "data.random_crop", f"{cfg.random_crop} is larger than the image {image}{after}"
    return None


def input_shape(data: DataConfig) -> tuple[int, ...] | None:
    """The shape of one example as stored (MNIST-like sets are 28 x 28 x 1); None when only the
    files can tell (tfrecord, tfds, a user's function: then the worker checks the pairing once
    it has the examples) or the features are named columns."""
    if data.name in FILE_DATASETS or data.is_user_function or data.features is not None:
        return None
    return tuple(data.shape) if data.name == "synthetic" else MNIST_SHAPE


def pairing_problem(model: str, data: DataConfig, shape: tuple[int, ...]) -> tuple[str, str] | None:
    """(field, why) when the model cannot take what the pipeline yields from examples of `shape`:
    shared by the scenario check here and the worker's check once files have been read."""
    if problem := preprocess_problem(data, shape):
        return problem
    fed = output_shape(data, shape)
    if problem := input_problem(model, fed):
        return "model.name", (f"'{model}' {problem}; data '{data.name}' gives examples of shape "
                              f"{list(fed)}")
    return None


def check_data_fields(scenario: Scenario, source: str) -> None:
    """Fields that need or exclude each other, named one at a time."""
    data = scenario.data
    for field, names in _DATA_FIELDS_FOR.items():
        if field in data.model_fields_set and data.name not in names:
            raise ScenarioError(source, f"data.{field}", "applies to data.name = "
                                f"{' / '.join(map(repr, names))} only, not '{data.name}'")
    if data.is_user_function:
        for field in _NOT_FOR_USER_DATA:
            if field in data.model_fields_set:
                raise ScenarioError(source, f"data.{field}", f"'{data.name}' is your own dataset "
                                    "function: its examples are what it returns")
    required = {"tfrecord": ("files", "a glob of TFRecord shards, e.g. "
                                      "\"data/train-*.tfrecord\" (bench data write-tfrecord)"),
                "tfds": ("tfds_name", "the tensorflow_datasets name, e.g. \"mnist\"")}
    if data.name in required and getattr(data, required[data.name][0]) is None:
        field, what = required[data.name]
        raise ScenarioError(source, f"data.{field}", f"required for data.name = '{data.name}': "
                            f"{what}")
    check_labels(scenario, source)
    if data.auto_shard == "file" and data.name not in FILE_DATASETS and not data.is_user_function:
        raise ScenarioError(source, "data.auto_shard", f"'file' shards by input file; data "
                            f"'{data.name}' is held in memory (use 'data' or 'auto')")
    accuracy = scenario.check.accuracy
    if accuracy is None:
        return
    if data.label_kind == "regression":
        raise ScenarioError(source, "check.accuracy", "counts correctly predicted classes; "
                            "data.labels = \"regression\" has none")
    if problem := eval_split_problem(data, accuracy.eval_split, "check.accuracy"):
        raise ScenarioError(source, *problem)


def eval_split_problem(data: DataConfig, split: str, owner: str) -> tuple[str, str] | None:
    """(field, why) when `data` has no held-out `split` for `owner` (check.accuracy, target)
    to judge on."""
    if data.name in ARRAY_DATASETS + ("tfrecord",) and split not in ("test", "train"):
        return f"{owner}.eval_split", (f"'{split}': data '{data.name}' has the splits 'train' "
                                       "and 'test'")
    if data.name == "tfrecord" and split == "test" and data.eval_files is None:
        return "data.eval_files", (f"required by {owner} (eval_split = 'test'): a glob of the "
                                   "held-out TFRecord shards")
    return None


def check_labels(scenario: Scenario, source: str) -> None:
    """What the labels are must fit where they come from and every loss the scenario names."""
    data = scenario.data
    if data.labels in ("binary", "regression") and data.name != "synthetic":
        raise ScenarioError(source, "data.labels", f"'{data.labels}' targets are made for "
                            f"synthetic data; '{data.name}' has class labels (\"sparse\", or "
                            "\"one_hot\" to convert them)")
    if data.label_shape is not None and data.labels != "regression":
        raise ScenarioError(source, "data.label_shape", "applies to labels = \"regression\" "
                            "only (class labels take their shape from num_classes)")
    if data.features is not None:
        if "shape" in data.model_fields_set:
            raise ScenarioError(source, "data.shape", "data.features names the columns of each "
                                "example; give each column its own shape there")
        if not any(f.is_ids for f in data.features.values()) and not any(
                f.shape for f in data.features.values()):
            raise ScenarioError(source, "data.features", "give each column a vocab (ids) or a "
                                "shape (real values)")
    kind = data.label_kind
    for loss in scenario.train.axis_values("loss"):
        if loss is not None and kind and not loss.is_import_path and \
                (problem := labels_problem(loss.name, kind)):
            raise ScenarioError(source, "train.loss", problem)


def check_learning_rate(scenario: Scenario, source: str) -> None:
    """The base learning rate is given in one place: batch.learning_rate or the optimizer's."""
    if all(b.learning_rate is None for b in
           [scenario.batch, *(s.batch for s in scenario.strategies if s.batch)]):
        return
    for optimizer in scenario.train.axis_values("optimizer"):
        if optimizer is not None and "learning_rate" in optimizer.args:
            raise ScenarioError(source, "train.optimizer", "learning_rate is given here and in "
                                "batch.learning_rate: set it in one place")


def check_imports(scenario: Scenario, source: str) -> None:
    """Every user module a scenario names can be found beside it or among the installed
    packages, with the name it asks for (looked up, never imported: bench.scenario.imports)."""
    path = Path(source)
    scenario_dir = path.resolve().parent if path.is_file() else None
    named = [(f"{where}.name", model.name) for where, model in _models(scenario)]
    named.append(("data.name", scenario.data.name))
    train = scenario.train
    for field in ("loss", "optimizer"):
        named += [(f"train.{field}", spec.name) for spec in train.axis_values(field) if spec]
    named += [("train.metrics", spec.name) for spec in train.metrics or []]
    for field, value in named:
        if is_import_path(value) and (problem := lookup_problem(value, scenario_dir)):
            raise ScenarioError(source, field, problem)


def _models(scenario: Scenario) -> list[tuple[str, ModelConfig]]:
    """Every model the scenario trains, with the field it is written in."""
    return [("model", scenario.model)] + [(f"strategies[{i}].model", s.model)
                                          for i, s in enumerate(scenario.strategies) if s.model]


def _inputs_problem(model: ModelConfig, data: DataConfig) -> str | None:
    """Why a built-in model cannot take named columns, or needs them (None: it fits)."""
    info = model_info(model.name)
    if data.features is not None and (info is not None or model.extra_matmul):
        if info is not None and info.inputs == "features":
            if not any(f.is_ids for f in data.features.values()):
                return (f"'{model.name}' embeds id columns; data.features has none (give a "
                        "column a vocab)")
            return None
        what = f"'{model.name}' takes" if info is not None else "model.extra_matmul needs"
        return (f"{what} one input tensor; data.features gives named columns (a dict): use "
                "'recommender' or your own builder")
    if info is not None and info.inputs == "features":
        return (f"'{model.name}' embeds the id columns of synthetic data.features, e.g. "
                "{ item = { vocab = 1000000 }, dense = { shape = [13] } }; for your own dataset, "
                "bring your own builder")
    return None


def check_pairing(scenario: Scenario, source: str) -> None:
    """Model and data must fit each other: caught at load, not minutes into a run."""
    shape = input_shape(scenario.data)
    for where, model in _models(scenario):
        if problem := _inputs_problem(model, scenario.data):
            raise ScenarioError(source, f"{where}.name", problem)
        if shape is not None and (problem := pairing_problem(model.name, scenario.data, shape)):
            field, why = problem
            raise ScenarioError(source, field.replace("model", where, 1), why)
        for value in model.axis_values("trainable"):
            if why := trainable_problem(model.name, value):
                raise ScenarioError(source, f"{where}.trainable", why)
    if scenario.data.variable_length and (scenario.data.name != "synthetic" or
                                          shape is None or len(shape) != 2):
        raise ScenarioError(source, "data.variable_length", "applies to synthetic series "
                            f"[timesteps, features] only; shape is {list(shape or [])}")


def check_feed(scenario: Scenario, source: str) -> None:
    """feed = "numpy" hands Keras fit, and JAX's custom loop, the in-memory arrays; TensorFlow's
    custom loop and ParameterServer take a pipeline."""
    data = scenario.data
    for i, strat in enumerate(scenario.strategies):
        if (strat.feed or data.feed) != "numpy":
            continue
        field = f"strategies[{i}].feed" if strat.feed else "data.feed"
        if data.name in FILE_DATASETS:
            raise ScenarioError(source, field, f"'numpy' feeds fit the in-memory arrays; data "
                                f"'{data.name}' is read from files: use feed = \"dataset\"")
        if "ctl" in (strat.api or scenario.train.api) and "tensorflow" in strat.backends(
                scenario.train):
            raise ScenarioError(source, field, "'numpy' feeds Keras fit and JAX's custom loop; "
                                "TensorFlow's custom loop (api \"ctl\") takes bench's tf.data "
                                "pipeline: set api = \"fit\" or backend = \"jax\" where feed "
                                "= \"numpy\"")
        if strategy_kind(strat.name).coordinated:
            raise ScenarioError(source, field, "'numpy' cannot feed ParameterServer fit, which "
                                "needs a per-worker dataset: use feed = \"dataset\"")
        if requested := requested_image_options(data):
            raise ScenarioError(source, f"data.{requested[0]}", "host-side preprocessing runs "
                                "in bench's tf.data pipeline; feed = \"numpy\" gives fit the "
                                "arrays as they are")


def check_fault(scenario: Scenario, source: str) -> None:
    """[fault] kills one task of a cluster: every strategy must be a cluster that has that task,
    and the task must be one the cluster can lose (not the one that writes the record)."""
    fault = scenario.fault
    if fault is None:
        return
    kind, index = fault.kill.task.split(":")
    for i, strat in enumerate(scenario.strategies):
        strategy = strategy_kind(strat.name)
        if not strategy.cluster:
            raise ScenarioError(source, f"strategies[{i}].name", f"'{strat.name}' runs in one "
                                "process: [fault] kills a task of a cluster "
                                "(multi_worker_mirrored or parameter_server)")
        if kind != "worker":
            raise ScenarioError(source, "fault.kill.task", f"'{fault.kill.task}': only a worker "
                                "can be lost and recovered (the chief writes the record and "
                                "coordinates; a ps holds the variables)")
        if strategy.chief == (kind, int(index)):
            raise ScenarioError(source, "fault.kill.task", f"'{fault.kill.task}' is "
                                f"{strat.name}'s chief, which writes the record: kill another "
                                "worker")
        if strategy.coordinated and "fit" in (strat.api or scenario.train.api):
            raise ScenarioError(source, f"strategies[{i}].api", "[fault] on parameter_server "
                                "runs the ClusterCoordinator loop only: set api = \"ctl\"")
        if int(index) >= min(strat.workers):
            raise ScenarioError(source, "fault.kill.task", f"'{fault.kill.task}': "
                                f"strategies[{i}] ({strat.name}) has workers "
                                f"0..{min(strat.workers) - 1}")
    if scenario.train.axis_values("steps_per_execution") != [1]:
        raise ScenarioError(source, "train.steps_per_execution", "[fault] times and backs up "
                            "every step: use steps_per_execution = 1")
