"""Matrix expansion: a validated Scenario becomes its list of concrete Variants, in file order.

Every list-valued field is an axis; the cross product of the axes is the matrix. A variant's id
names the values that tell it apart from its siblings.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from bench.axes import DATA_AXES, OBJECT_AXES, TRAIN_AXES
from bench.errors import ScenarioError
from bench.scenario.environment import EnvironmentPoint, with_environment
from bench.scenario.schema import (
    BatchConfig,
    DataConfig,
    ModelConfig,
    Scenario,
    StrategyConfig,
    TrainConfig,
    Variant,
)
from bench.scenario.strategy_kinds import strategy_kind
from bench.scenario.target_rules import check_target_batches

DEFAULT_LEARNING_RATE = 0.001  # Keras' own for Adam, bench's default optimizer
# A variant id names its files (logs/<id>.log, traces/<id>/, checkpoints/<id>/): one path part
# of at most 255 bytes, less what the longest suffix adds (".forkserver.log", ".backup-...").
MAX_ID_BYTES = 200


def id_problem(vid: str) -> str | None:
    """Why `vid` cannot name a variant's files inside its run directory (None: it can)."""
    if any(sep in vid for sep in ("/", "\\", "\0")):
        return "holds a path separator"
    if vid.startswith("."):
        return "starts with '.'"
    if len(vid.encode()) > MAX_ID_BYTES:
        return f"is longer than a file name may be ({MAX_ID_BYTES} bytes)"
    return None


def _lr_factor(batch: BatchConfig, global_batch: int, reference_batch: int) -> float:
    """What the batch rule multiplies the base learning rate by."""
    factor = global_batch / reference_batch
    return {"linear": factor, "sqrt": math.sqrt(factor)}.get(batch.lr_scaling, 1.0)


def _base_lr(batch: BatchConfig, train: TrainConfig) -> tuple[float, bool]:
    """The learning rate before the batch rule, and whether the scenario gave it (the rules
    allow it in one place only: batch.learning_rate or the optimizer table)."""
    optimizer = train.optimizer.args if train.optimizer is not None else {}
    if "learning_rate" in optimizer:
        return float(optimizer["learning_rate"]), True
    if batch.learning_rate is not None:
        return batch.learning_rate, True
    return DEFAULT_LEARNING_RATE, False


def batch_label(batch: BatchConfig) -> list[str]:
    """The id parts of a strategy entry's own [batch] table: its rule, its learning-rate
    scaling and warmup ("weak-linear-wu30720"), so entries that differ only there differ."""
    parts = [batch.rule] + ([batch.lr_scaling] if batch.lr_scaling != "none" else [])
    return parts + ([f"wu{batch.lr_warmup_examples}"] if batch.lr_warmup_examples else [])


def _variant_id(strategy: str, shape: str, devices: str, options: tuple[str, ...], api: str,
                dd: str | None, precision: str, global_batch: int,
                training: tuple[str, ...] = ()) -> str:
    parts = [strategy, shape]
    if devices != "auto":
        parts.append(devices)
    parts += [o for o in options if o not in ("auto", "none")]
    parts += [*training, api]
    if dd == "distribute_datasets_from_function":
        parts.append("dsfn")
    parts += [precision, f"gb{global_batch}"]
    return "-".join(parts)


def shape_axes(strat: StrategyConfig) -> dict[str, list[Any]]:
    """The strategy entry's fields whose cross product is its process/device shapes."""
    takes = strategy_kind(strat.name).fields
    if "devices_per_worker" in takes:
        return {"workers": strat.workers, "devices_per_worker": strat.devices_per_worker,
                "collective": strat.collective}
    if "ps" in takes:
        return {"ps": strat.ps, "workers": strat.workers}
    return {"replicas": strat.replicas, "cross_device_ops": strat.cross_device_ops}


def _shapes(strat: StrategyConfig) -> list[dict[str, Any]]:
    """The process/device shapes one strategy entry expands to, with the id label of each."""
    base = {"cross_device_ops": "auto", "collective": "auto", "workers": 1,
            "devices_per_worker": 1, "ps": 0}
    axes = shape_axes(strat)
    shapes = [{**base, **dict(zip(axes, values, strict=True))}
              for values in itertools.product(*axes.values())]
    for shape in shapes:
        if "devices_per_worker" in axes:
            shape.update(replicas=shape["workers"] * shape["devices_per_worker"],
                         label=f"w{shape['workers']}x{shape['devices_per_worker']}")
        elif "ps" in axes:
            # Each scheduled step runs one whole batch on one worker: 1 replica in sync.
            shape.update(replicas=1, label=f"ps{shape['ps']}w{shape['workers']}")
        else:
            shape["label"] = f"r{shape['replicas']}"
    return shapes


def _data_points(data: DataConfig) -> list[tuple[DataConfig, str]]:
    """The input-pipeline axes (map_parallelism x prefetch): one DataConfig each, with the id
    suffix that tells them apart ("-map1-pf0"); an axis of one value adds nothing to ids."""
    labels = {"map_parallelism": "map", "prefetch": "pf"}
    axes = [data.axis_values(field) for field in DATA_AXES]
    points = []
    for values in itertools.product(*axes):
        label = "".join(f"-{labels[field]}{'auto' if value == 'autotune' else value}"
                        for field, value, axis in zip(DATA_AXES, values, axes, strict=True)
                        if len(axis) > 1)
        points.append((data.model_copy(update=dict(zip(DATA_AXES, values, strict=True))), label))
    return points


def _train_points(train: TrainConfig, keras: list[str]) -> list[tuple[TrainConfig, list[str]]]:
    """The training axes (Keras flavour x steps_per_execution x jit_compile x loss x optimizer):
    one TrainConfig of scalars each, with the id parts that tell it apart. Values other than the
    defaults always show in the id ("tf_keras", "spe4", "xla"), so an id never changes with its
    siblings; a loss or an optimizer shows where the scenario lists several ("huber", "sgd")."""
    axes = [keras, train.axis_values("steps_per_execution"), train.axis_values("jit_compile")]
    objects = [train.axis_values(axis) for axis in OBJECT_AXES]
    points = []
    for (flavour, k, jit), chosen in itertools.product(itertools.product(*axes),
                                                       itertools.product(*objects)):
        label = ([flavour] if flavour != "keras3" else []) + ([f"spe{k}"] if k != 1 else [])
        label += ["xla"] if jit else []
        label += [value.label() for value, axis in zip(chosen, objects, strict=True)
                  if len(axis) > 1]
        update = {**dict(zip(TRAIN_AXES, (flavour, k, jit), strict=True)),
                  **dict(zip(OBJECT_AXES, chosen, strict=True))}
        points.append((train.model_copy(update=update), label))
    return points


def _model_points(model: ModelConfig, named: bool) -> list[tuple[ModelConfig, list[str]]]:
    """The model's trainable axis (all | head | N): one ModelConfig each, with its id parts; the
    model's name too when a strategy entry chose its own model (`named`)."""
    points = []
    for value in model.axis_values("trainable"):
        label = [model.name.rsplit(".", 1)[-1].rsplit(":", 1)[-1].lower()] if named else []
        if value != "all":
            label.append("head" if value == "head" else f"ft{value}")
        points.append((model.model_copy(update={"trainable": value}), label))
    return points


def _backends(strat: StrategyConfig, train: TrainConfig, s_index: int, source: str) -> list[str]:
    """The Keras backends a strategy entry runs on: its own `backend`, else train.backend's that
    have the strategy, else (train.backend left at its default) the strategy's own backend. A
    backend named where the strategy is not is a ScenarioError naming the field."""
    kind = strategy_kind(strat.name)
    if strat.backend is not None:
        field, asked = f"strategies[{s_index}].backend", strat.backend
        if missing := [b for b in asked if b not in kind.backends]:
            raise ScenarioError(source, field, (
                f"strategy '{strat.name}' does not run on {', '.join(missing)} (it runs on "
                f"{' and '.join(kind.backends)})"))
        return list(asked)
    if "backend" in train.model_fields_set and not any(b in kind.backends for b in train.backend):
        raise ScenarioError(source, "train.backend", (
            f"strategy '{strat.name}' (strategies[{s_index}]) runs on "
            f"{' and '.join(kind.backends)} only, and train.backend names "
            f"{', '.join(train.backend)}: add its backend, or set the entry's own backend"))
    return strat.backends(train)


def block_steps(train: TrainConfig) -> int:
    """The step count every warmup and timed window must be a multiple of: each
    steps_per_execution value of the axis divides it."""
    return math.lcm(*train.axis_values("steps_per_execution"))


def expand(scenario: Scenario, source: str = "<scenario>") -> list[Variant]:
    """Expand every list-valued axis into the cross product of concrete variants, in file order.
    When `source` is the scenario's file, its folder is where workers import user modules from."""
    scenario_dir = str(Path(source).resolve().parent) if Path(source).is_file() else None
    train = scenario.train
    variants: list[Variant] = []
    seen: set[str] = set()
    # innermost, so a variant's environments sit side by side (its id says which)
    environments = scenario.environment.points() if scenario.environment else [None]
    for s_index, strat in enumerate(scenario.strategies):
        batch = strat.batch or scenario.batch
        batch_values = batch.per_replica if batch.rule == "weak" else batch.global_batch
        assert batch_values is not None  # guaranteed by BatchConfig validation
        data_cfg = scenario.data.model_copy(update={"feed": strat.feed or scenario.data.feed})
        backends = _backends(strat, train, s_index, source)
        for (shape, backend, batch_value, precision, api, (model, model_label),
             (train_cfg, train_label)) in itertools.product(
                _shapes(strat), backends, batch_values, strat.precision or train.precision,
                strat.api or train.api,
                _model_points(strat.model or scenario.model, strat.model is not None),
                _train_points(train, strat.keras or train.axis_values("keras"))):
            replicas = shape["replicas"]
            if batch.rule == "weak":
                per_replica, global_batch = batch_value, batch_value * replicas
                reference = batch.lr_reference_batch or batch_value
            else:
                if batch_value % replicas:
                    raise ScenarioError(
                        source, "batch.global",
                        f"{batch_value} does not split evenly over {replicas} replicas "
                        f"(strategies[{s_index}])",
                    )
                per_replica, global_batch = batch_value // replicas, batch_value
                reference = batch.lr_reference_batch or batch_value
            # the JAX loop places its batches by the distribution's data layout: no tf.distribute
            dd_values: list[str | None] = (list(train.distribute_dataset)
                                           if api == "ctl" and backend == "tensorflow" else [None])
            for dd, (data, data_label), environment in itertools.product(
                    dd_values, _data_points(data_cfg), environments):
                options = (shape["cross_device_ops"], shape["collective"], strat.partitioner)
                training = (*model_label, *(["numpy"] if data.feed == "numpy" else []),
                            *train_label, *(batch_label(batch) if strat.batch else []),
                            *([backend] if backend != "tensorflow" else []))
                vid = with_environment(_variant_id(strat.name, shape["label"], strat.devices,
                                                   options, api, dd, precision, global_batch,
                                                   training) + data_label, environment)
                base_lr, lr_given = _base_lr(batch, train_cfg)
                factor = _lr_factor(batch, global_batch, reference)
                if problem := id_problem(vid):
                    shown = vid if len(vid) <= 80 else vid[:77] + "..."
                    raise ScenarioError(source, f"strategies[{s_index}]", (
                        f"variant id {shown!r} {problem}: it names the variant's files, and the "
                        "values it is made of (a loss's or an optimizer's arguments) must keep "
                        "to a file name"))
                if vid in seen:
                    raise ScenarioError(source, f"strategies[{s_index}]",
                                        f"variant '{vid}' is declared twice")
                seen.add(vid)
                variants.append(Variant(
                    id=vid, index=len(variants), scenario_name=scenario.name,
                    scenario_digest=scenario.digest(), strategy=strat.name, replicas=replicas,
                    devices=strat.devices, cross_device_ops=shape["cross_device_ops"],
                    workers=shape["workers"], devices_per_worker=shape["devices_per_worker"],
                    ps=shape["ps"], collective=shape["collective"], partitioner=strat.partitioner,
                    layout=strat.layout,
                    tpu=strat.tpu, network=scenario.cluster.network,
                    ps_devices=scenario.cluster.ps_devices,
                    min_effect=strat.min_effect if strat.min_effect is not None
                    else scenario.compare.min_effect,
                    api=api, precision=precision, backend=backend,
                    distribute_dataset=dd, batch_rule=batch.rule, per_replica_batch=per_replica,
                    global_batch=global_batch,
                    learning_rate=base_lr * factor, lr_factor=factor,
                    learning_rate_given=lr_given, scenario_dir=scenario_dir,
                    lr_scaling=batch.lr_scaling,
                    lr_warmup_examples=batch.lr_warmup_examples, model=model, data=data,
                    train=train_cfg, measure=scenario.measure, check=scenario.check,
                    fault=scenario.fault, environment=environment, target=scenario.target,
                ))
    parity = scenario.check.loss_parity
    for v in variants:
        if parity and not v.is_cluster and parity.batch % v.replicas:
            raise ScenarioError(source, "check.loss_parity.batch",
                                f"{parity.batch} does not split over the {v.replicas} replicas "
                                f"of {v.id}")
    if scenario.fault is not None and variants:
        kill = scenario.fault.kill
        total = variants[0].total_steps  # measure is the scenario's, after any overrides
        if kill.step_of(total) >= total:
            raise ScenarioError(source, "fault.kill.at_step",
                                f"step {kill.step_of(total)} is not before the end of the "
                                f"variants' {total} steps (measure.warmup_steps + repeats x "
                                "steps); give a smaller step or a fraction such as 0.5")
    check_target_batches(variants, source)
    k = block_steps(train)
    if k > 1:
        m = scenario.measure
        for field, value in (("warmup_steps", m.warmup_steps), ("steps", m.steps)):
            if value % k:
                raise ScenarioError(source, f"measure.{field}",
                                    f"{value} is not a multiple of train.steps_per_execution "
                                    f"(every value of it: {k})")
    return variants


def with_candidate(variants: list[Variant], point: EnvironmentPoint) -> list[Variant]:
    """Each variant, then its copy in the upgrade candidate's environment (`bench nightly
    --candidate-env`): side by side, so the two share a batch of interleaved rounds."""
    out: list[Variant] = []
    for v in variants:
        out += [v, v.model_copy(update={"id": with_environment(v.id, point),
                                        "environment": point})]
    return [v.model_copy(update={"index": i}) for i, v in enumerate(out)]
