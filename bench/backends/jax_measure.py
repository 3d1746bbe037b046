"""A variant on Keras' JAX backend, measured as every TensorFlow variant is: the same data
(the scenario's tf.data pipeline, or its arrays), the same builders, the same plan, gate and
clock (bench.training.schedule, loop_clock, gate), the same record sections.

Its process was started with KERAS_BACKEND=jax and, on a CPU, as many XLA host devices as it
has replicas (bench.child_env.backend_env); Keras reads the first once at import, XLA the
second once at its first device query.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from typing import Any

from bench import fingerprint
from bench.backends import (
    jax_checks,
    jax_distribution,
    jax_flops,
    jax_loops,
    jax_target,
    jax_trace,
    tf_ops,
)
from bench.checks import suite as checks_suite
from bench.child_env import KERAS_BACKEND_ENV, ChildEnv
from bench.data import sources as data_mod
from bench.errors import VariantSkipped
from bench.protocol import FINISH, ProgressFn
from bench.record import measured, profiled, provenance
from bench.scenario.schema import Variant
from bench.timing import Phases, summarize, throughput
from bench.training import flavour, models, precision, to_target, traced_turn, workload
from bench.training.gate import Gate
from bench.training.loop_sections import loop_sections
from bench.training.schedule import variant_plan


def _versions(keras: Any) -> provenance.WorkerVersions:
    import jax
    import jaxlib
    import tensorflow as tf

    return provenance.WorkerVersions(tensorflow=tf.__version__, keras=keras.__version__,
                                     keras_flavour="keras3", pid=os.getpid(),
                                     keras_backend="jax", jax=jax.__version__,
                                     jaxlib=jaxlib.__version__)


def measure(variant: Variant, spawn_time: float, progress: ProgressFn,
            sizing_file: str | None = None) -> dict[str, Any]:
    """Build the variant under its distribution, run its plan, return the record's sections."""
    phases = Phases()
    phases.seconds["start"] = max(0.0, time.time() - spawn_time)
    k = variant.train.steps_per_execution
    if variant.train.keras != "keras3" or (k != 1 and variant.api != "fit"):
        raise VariantSkipped("the JAX backend runs Keras 3, and steps_per_execution > 1 through "
                             "fit only (the guide's custom loop runs a step a call)")
    if os.environ.get(KERAS_BACKEND_ENV) != "jax":
        raise RuntimeError(f"a JAX variant needs {KERAS_BACKEND_ENV}=jax before Keras is "
                           "imported; its launcher did not set it")
    if importlib.util.find_spec("jax") is None:
        point = variant.environment
        raise VariantSkipped(
            f"backend 'jax' needs JAX, which environment {point.label} has not: give "
            "[environment] jax (e.g. jax = \"0.10.*\")" if point is not None and
            not point.is_current else "backend 'jax' needs JAX, which is not installed here: "
            "pip install -c constraints.txt -e \".[jax]\"")
    with phases("import"):
        flavour.use("keras3")
        import keras
    with phases("build"):
        if variant.scenario_dir and variant.scenario_dir not in sys.path:
            sys.path.insert(0, variant.scenario_dir)
        jax_distribution.keep_tensorflow_off_gpus()
        placement = jax_distribution.build(variant)
        precision.check_supported(variant.precision, placement.kind,
                                  variant.train.float16_on_cpu, "jax")
        policy = precision.apply_policy(variant.precision)
        loaded = data_mod.load_for(variant)
        keras.utils.set_random_seed(variant.data.seed)
        # the planned global batch: DataParallel splits it over its replicas, ModelParallel's
        # mesh (batch axis 1) runs it whole on every device
        replicas, global_batch = placement.replicas, variant.global_batch
        inputs = data_mod.model_inputs(loaded, variant.data)

        def dataset() -> Any:
            return data_mod.make_dataset(loaded, variant.data, global_batch)

        built = tf_ops.checked(lambda: workload.build(variant, inputs), variant.model.name)
        model = built.model
        probe_batch = next(iter(dataset().take(1).as_numpy_iterator()))
        initial_loss = tf_ops.checked(lambda: built.objectives.batch_loss(model, probe_batch),
                                      variant.model.name)
        metrics = built.objectives.metrics(probe_batch, model)

    gate = Gate.from_env(ChildEnv.from_env().gate_timeout_s or variant.measure.timeout_s)
    base = traced_turn.window(variant, k)
    trace = jax_trace.window(base)
    planned = variant_plan(variant, gate, k, trace.steps if trace else 0, sizing_file)
    with phases("loop"):
        arrays = (data_mod.numpy_feed(loaded, planned.longest().total_steps * global_batch)
                  if variant.data.feed == "numpy" else None)
        result = tf_ops.checked(lambda: jax_loops.train(
            variant, built, metrics, dataset, placement, schedule=planned,
            global_batch=global_batch, progress=progress, trace=trace, arrays=arrays,
            steps_per_execution=k),
            variant.model.name)
    schedule = result.schedule or planned
    steps = schedule.window_steps
    with phases("peak"):  # before FINISH: no other variant runs beside it
        peak_measured_here = jax_flops.settle_peak(variant, placement)
    gate.wait(FINISH)
    with phases("final_loss"):
        final_loss = built.objectives.batch_loss(model, probe_batch)
    windows = result.samples.get("observed") or []
    timed = [s for w in windows for s in w]
    step_stats = summarize(timed)
    unobserved_s = result.clocks.get("unobserved") or []
    with phases("utilization"):
        utilised = jax_flops.utilization(variant, placement, model, built.optimizer,
                                         built.objectives, probe_batch, step_stats.median,
                                         peak_measured_here)
    with phases("checks"):  # after the measurement, so the checks cannot disturb it
        checked = checks_suite.run(variant, jax_checks.JaxRoute(placement), loaded)
    rates = throughput(windows, global_batch, unobserved_s, k, steps)
    with phases("target"):  # after everything it measured: it trains fresh models
        target = to_target.section(variant, loaded, lambda arrays: jax_target.train_seeds(
            variant, placement, loaded, global_batch=global_batch, headline=rates.headline,
            arrays=arrays))
    strategy_info = placement.describe(model)
    metric_results = {m.name: float(m.result()) for m in metrics
                      if getattr(m.result(), "shape", ()) == ()}
    return {
        "effective": measured.Effective(replicas=replicas,
                                        per_replica_batch=global_batch // replicas,
                                        global_batch=global_batch),
        "data_source": loaded.source,
        "data_fallback_reason": loaded.fallback_reason,
        "devices": provenance.Devices(**jax_distribution.devices_section(placement)),
        "environment": provenance.WorkerEnvironment(**fingerprint.installed_environment()),
        "strategy_info": provenance.StrategyInfo(**strategy_info),
        "precision_policy": policy,
        "keras": provenance.KerasInfo(flavour="keras3", version=str(keras.__version__)),
        "model_params": provenance.ModelParams(**models.parameter_counts(model)),
        "workload": provenance.Workload(**built.describe()),
        "env": _versions(keras),
        **loop_sections(result, schedule, gate,
                        rates, step_stats,
                        global_batch=global_batch, steps_per_call=k,
                        repeats=variant.measure.repeats,
                        startup_s=result.first_step_end - spawn_time, phases_s=phases.seconds,
                        cached_examples=data_mod.cached_examples(loaded, variant.data)),
        "trace": traced_turn.summary(trace, result, variant),
        "loss": measured.Loss(initial=initial_loss, final=final_loss),
        "metric_results": metric_results,
        "utilization": profiled.Utilization(**utilised),
        "checks": profiled.Checks(**checked),
        **({"target": target} if target is not None else {}),
        "notes": [*result.notes, *jax_distribution.layout_notes(strategy_info, variant),
                  *(precision.loss_scale_notes(model.optimizer) if variant.api == "fit" else [])],
    }
