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
from bench.backends import jax_distribution, jax_flops, jax_loops, jax_trace, tf_ops
from bench.child_env import KERAS_BACKEND_ENV, ChildEnv
from bench.data import sources as data_mod
from bench.errors import VariantSkipped
from bench.protocol import FINISH, ProgressFn
from bench.record import measured, profiled, provenance
from bench.scenario.schema import Variant
from bench.timing import Phases, summarize, throughput
from bench.training import flavour, loops, models, precision, traced_turn, workload
from bench.training.gate import Gate
from bench.training.loop_sections import loop_sections
from bench.training.schedule import Schedule

# What a JAX variant does not measure yet, said in its record.
NOT_YET = {
    "checks": "loss parity and accuracy are checked on the TensorFlow backend only so far",
}


def batch_loss(objectives: Any, model: Any, batch: tuple[Any, Any]) -> float:
    """The mean loss of the model on one fixed batch (the yardstick every path reports)."""
    import numpy as np

    x, y = batch
    per_example = objectives.loss(per_example=True)(y, model(x, training=False))
    return float(np.mean(np.asarray(per_example, dtype=np.float32)))


def _versions(keras: Any) -> provenance.WorkerVersions:
    import jax
    import jaxlib
    import tensorflow as tf

    return provenance.WorkerVersions(tensorflow=tf.__version__, keras=keras.__version__,
                                     keras_flavour="keras3", pid=os.getpid(),
                                     keras_backend="jax", jax=jax.__version__,
                                     jaxlib=jaxlib.__version__)


def _schedule(variant: Variant, gate: Gate, trace_steps: int, sizing_file: str | None
              ) -> Schedule:
    """The plan the worker makes for a one-process TensorFlow variant, with one step a call."""
    m = variant.measure
    settle = m.settle_steps if gate.interleaved else 0
    return Schedule(m.warmup_steps, m.steps, m.repeats, gate, settle, trace_steps,
                    m.iterators, m.min_window_s, sizing_file, observed_steps=m.steps,
                    settle_s=m.settle_s if settle else 0.0)


def _train(variant: Variant, built: Any, metrics: list[Any], dataset: Any,
           placement: jax_distribution.Placement, loaded: Any, planned: Schedule,
           global_batch: int, trace: Any, progress: ProgressFn) -> Any:
    """Keras fit (bench's own fit path, which runs on any backend) or the guide's loop, fed by
    the tf.data pipeline or, with feed = "numpy", the in-memory arrays."""
    model = built.model
    arrays = (data_mod.numpy_feed(loaded, planned.longest().total_steps * global_batch)
              if variant.data.feed == "numpy" else None)
    if variant.api == "fit":
        feed = (loops.FitInput(*arrays, batch_size=global_batch) if arrays is not None
                else loops.FitInput(dataset()))
        return loops.run_fit(model, built.optimizer, feed, objectives=built.objectives,
                             metrics=metrics, schedule=planned, steps_per_execution=1,
                             jit_compile=True, progress=progress, trace=trace)
    batches = ((lambda: jax_loops.array_batches(arrays, global_batch)) if arrays is not None
               else (lambda: dataset().as_numpy_iterator()))
    return jax_loops.run_custom_loop(model, built.optimizer, batches, placement,
                                     objectives=built.objectives, metrics=metrics,
                                     precision=variant.precision, schedule=planned,
                                     progress=progress, trace=trace)


def measure(variant: Variant, spawn_time: float, progress: ProgressFn,
            sizing_file: str | None = None) -> dict[str, Any]:
    """Build the variant under its distribution, run its plan, return the record's sections."""
    phases = Phases()
    phases.seconds["start"] = max(0.0, time.time() - spawn_time)
    if variant.train.keras != "keras3" or variant.train.steps_per_execution != 1:
        raise VariantSkipped("the JAX backend runs Keras 3 with steps_per_execution = 1 here")
    if os.environ.get(KERAS_BACKEND_ENV) != "jax":
        raise RuntimeError(f"a JAX variant needs {KERAS_BACKEND_ENV}=jax before Keras is "
                           "imported; its launcher did not set it")
    if importlib.util.find_spec("jax") is None:
        raise VariantSkipped("backend 'jax' needs JAX, which is not installed here: "
                             "pip install -c constraints.txt -e \".[jax]\"")
    with phases("import"):
        flavour.use("keras3")
        import keras
    with phases("build"):
        if variant.scenario_dir and variant.scenario_dir not in sys.path:
            sys.path.insert(0, variant.scenario_dir)
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
        initial_loss = tf_ops.checked(lambda: batch_loss(built.objectives, model, probe_batch),
                                      variant.model.name)
        metrics = built.objectives.metrics(probe_batch, model)

    gate = Gate.from_env(ChildEnv.from_env().gate_timeout_s or variant.measure.timeout_s)
    base = traced_turn.window(variant, 1)
    trace = jax_trace.window(base)
    planned = _schedule(variant, gate, trace.steps if trace else 0, sizing_file)
    with phases("loop"):
        result = tf_ops.checked(lambda: _train(variant, built, metrics, dataset, placement,
                                               loaded, planned, global_batch, trace, progress),
                                variant.model.name)
    schedule = result.schedule or planned
    steps = schedule.window_steps
    with phases("peak"):  # before FINISH: no other variant runs beside it
        peak_measured_here = jax_flops.settle_peak(variant, placement)
    gate.wait(FINISH)
    with phases("final_loss"):
        final_loss = batch_loss(built.objectives, model, probe_batch)
    windows = result.samples.get("observed") or []
    timed = [s for w in windows for s in w]
    step_stats = summarize(timed)
    unobserved_s = result.clocks.get("unobserved") or []
    with phases("utilization"):
        utilised = jax_flops.utilization(variant, placement, model, built.optimizer,
                                         built.objectives, probe_batch, step_stats.median,
                                         peak_measured_here)
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
                        throughput(windows, global_batch, unobserved_s, 1, steps), step_stats,
                        global_batch=global_batch, steps_per_call=1,
                        repeats=variant.measure.repeats,
                        startup_s=result.first_step_end - spawn_time, phases_s=phases.seconds),
        "trace": traced_turn.summary(trace, result, variant),
        "loss": measured.Loss(initial=initial_loss, final=final_loss),
        "metric_results": metric_results,
        "utilization": profiled.Utilization(**utilised),
        "notes": [*result.notes, *jax_distribution.layout_notes(strategy_info, variant),
                  *(precision.loss_scale_notes(model.optimizer) if variant.api == "fit" else []),
                  *([NOT_YET["checks"]] if variant.check.loss_parity or variant.check.accuracy
                    else [])],
    }
