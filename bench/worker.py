"""`python -m bench.worker`: run one variant in this (fresh) process and write its record.

Every variant gets its own process because logical devices, the precision policy and the
collective configuration are process-wide in TensorFlow. The worker never decides the run's
fate: it writes ok / skipped / failed into its record file and exits 0; the parent handles
crashes and hangs it could not report itself.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench import fingerprint, leaving, protocol, results
from bench.backends import measurer
from bench.checks import suite as checks_suite
from bench.checks.train_copy import StrategyRoute
from bench.child_env import ChildEnv
from bench.data import sources as data_mod
from bench.errors import BenchError, DataUnavailable, VariantSkipped, WorkloadError
from bench.launch.cluster_plan import read_tf_config
from bench.perf import overhead
from bench.protocol import FINISH, ProgressFn
from bench.record import measured, profiled, provenance
from bench.record.failure import error_from_exception
from bench.record.model import VariantRecord
from bench.scenario.schema import Variant
from bench.timing import (
    Phases,
    round_up,
    summarize,
    throughput,
)
from bench.training import (
    checkpointing,
    devices,
    epoch_ends,
    flavour,
    known_failures,
    loop_choice,
    models,
    objectives,
    precision,
    ps_loops,
    recovery,
    strategies,
    to_target,
    traced_turn,
    variables,
    workload,
)
from bench.training.gate import Gate
from bench.training.loop_sections import loop_sections
from bench.training.schedule import variant_plan
from bench.training.tracing import NON_CHIEF_UNTRACED
from bench.utilization import mfu


def _emit_progress(done: int, total: int) -> None:
    protocol.emit(protocol.format_progress(done, total))


def _task_identity() -> provenance.Task | None:
    """This process's task in a TF_CONFIG cluster, if it is part of one."""
    config = read_tf_config()
    task = config.get("task")
    return provenance.Task(type=task.get("type"), index=task.get("index")) if task else None


def pair_sizing_file(variant: Variant) -> str | None:
    """Where the run's A/A pair (its baseline and the control twin) agree on their windows'
    length. Sized apart, from each one's own first steps, their windows would differ by a few
    steps, and a short window's length moves its rate by about a step's share: the noise floor
    would read that as noise."""
    run_dir = ChildEnv.from_env().run_dir
    if not run_dir or variant.control not in ("baseline", "twin"):
        return None
    return str(Path(run_dir) / results.LOGS_DIR / "control-window-steps")


def _strategy_and_layout(variant: Variant) -> tuple[Any, devices.DeviceLayout]:
    """Configure devices and build the strategy, in the order TensorFlow requires."""
    if variant.kind.resolved:  # a TPU: the resolver finds its devices
        strategy = strategies.build_tpu(variant.tpu)
        names = tuple(d.name for d in strategy.extended.worker_devices)
        return strategy, devices.DeviceLayout("tpu", names, 1)
    layout = devices.configure(variant.devices, variant.kind.process_replicas(variant))
    strategies.check_supported(variant.strategy, variant.cross_device_ops, layout,
                               variant.collective)
    precision.check_supported(variant.precision, layout.kind, variant.train.float16_on_cpu)
    return strategies.build(variant, layout), layout


def _effective_batch(variant: Variant, replicas: int) -> tuple[measured.Effective, list[str]]:
    """Batch actually used, from the replicas the strategy really has, and a note when they
    differ from the plan.

    MultiWorkerMirrored on CPU uses only CPU:0 of each worker, so `devices_per_worker = 2`
    yields one replica per worker, not two: the record says so instead of pretending.
    """
    notes = []
    if variant.batch_rule == "weak":
        per_replica, global_batch = variant.per_replica_batch, variant.per_replica_batch * replicas
    else:
        global_batch = variant.global_batch
        per_replica = global_batch // replicas
    if replicas != variant.replicas:
        notes.append(f"planned {variant.replicas} replicas, the strategy has {replicas}: "
                     f"global batch {global_batch}, per-replica {per_replica}")
    return measured.Effective(replicas=replicas, per_replica_batch=per_replica,
                              global_batch=global_batch), notes


def use_scenario_dir(variant: Variant) -> None:
    """A user's modules beside the scenario file import first (before the current directory and
    the installed packages), in every process of a variant: local, forked, cluster or Slurm."""
    if variant.scenario_dir and variant.scenario_dir not in sys.path:
        sys.path.insert(0, variant.scenario_dir)


def start_state() -> provenance.StartState:
    """What this process had already set before the variant touched anything.

    A variant must start pristine however it was started (fresh interpreter or fork server):
    no TensorFlow context (so no device layout yet) and the float32 policy. The isolation test
    reads this from every record.
    """
    from tensorflow.python.eager import context

    return provenance.StartState(
        pid=os.getpid(), tf_context_initialized=bool(context.context()._initialized),
        precision_policy=flavour.keras().mixed_precision.global_policy().name,
        keras_modules=sorted(m for m in ("keras", "tf_keras") if m in sys.modules))


# Objects whose destruction would only cost time: the process leaves with os._exit instead.
_KEPT_UNTIL_EXIT: list[Any] = []


def measure(variant: Variant, spawn_time: float, progress: ProgressFn) -> dict[str, Any]:
    """Build everything the variant names, run warmup + timed windows, return the measurements:
    the record's sections by name, typed."""
    phases = Phases()
    phases.seconds["start"] = max(0.0, time.time() - spawn_time)  # spawn (or fork) → here
    with phases("import"):
        flavour.use(variant.train.keras)  # before TensorFlow is imported (tf_keras)
        import tensorflow as tf
        keras = flavour.keras()
    started = start_state()

    with phases("build"):
        if variant.api == "fit" and (problem := strategies.keras_fit_problem(
                variant.strategy, variant.train.keras)):
            raise VariantSkipped(problem)
        use_scenario_dir(variant)
        strategy, layout = _strategy_and_layout(variant)
        policy = precision.apply_policy(variant.precision)
        loaded = data_mod.load_for(variant)
        print(f"data source: {loaded.source}", file=sys.stderr, flush=True)
        keras.utils.set_random_seed(variant.data.seed)
        effective, batch_notes = _effective_batch(variant, int(strategy.num_replicas_in_sync))
        global_batch = effective.global_batch
        inputs = data_mod.model_inputs(loaded, variant.data)

        def dataset(input_context: Any = None) -> Any:
            return data_mod.make_dataset(loaded, variant.data, global_batch, input_context)

        def build_model_and_optimizer() -> tuple[Any, Any]:
            fresh = workload.build(variant, inputs)
            return fresh.model, fresh.optimizer

        with strategy.scope():
            built = workload.build(variant, inputs)
        model = built.model
        probe_batch = next(iter(dataset().take(1)))
        initial_loss = workload.initial_loss(built, probe_batch, variant.model.name)
        with strategy.scope():
            metrics = built.objectives.metrics(probe_batch, model)

    def describe_setup() -> dict[str, Any]:
        """The record's fields about what ran and where, for throughput and recovery alike."""
        gpu = devices.gpu_facts()
        return {
            "task": _task_identity(),
            "effective": effective,
            "data_source": loaded.source,
            "data_fallback_reason": loaded.fallback_reason,
            "devices": provenance.Devices(**layout.to_dict(), **devices.describe(),
                                          **devices.cluster_device_kind()),
            "gpu": gpu,
            "environment": provenance.WorkerEnvironment(**fingerprint.installed_environment(gpu)),
            "strategy_info": provenance.StrategyInfo(**strategies.describe_strategy(strategy)),
            "precision_policy": policy,
            "start_state": started,
            "keras": provenance.KerasInfo(**flavour.describe()),
            "model_params": provenance.ModelParams(**models.parameter_counts(model)),
            "workload": provenance.Workload(**built.describe()),
            "variables": provenance.Variables(**variables.describe(model)),
            "env": provenance.WorkerVersions(tensorflow=tf.__version__, keras=keras.__version__,
                                             keras_flavour=flavour.chosen(), pid=os.getpid()),
        }

    if variant.fault is not None:
        return recovery.measure(variant, strategy, built, metrics, dataset, progress,
                                describe_setup(), phases, probe_batch, initial_loss, spawn_time,
                                global_batch=global_batch, batch_notes=batch_notes)

    m, k = variant.measure, variant.train.steps_per_execution
    coordinated = variant.kind.coordinated  # steps scheduled in blocks on the workers
    if coordinated:
        k = ps_loops.ps_block(variant)
    trace = traced_turn.window(variant, k)
    gate = Gate.from_env(ChildEnv.from_env().gate_timeout_s or m.timeout_s)
    planned = variant_plan(variant, gate, k, trace.steps if trace else 0,
                           pair_sizing_file(variant))
    arrays = (data_mod.numpy_feed(loaded, planned.longest().total_steps * global_batch)
              if variant.data.feed == "numpy" else None)
    with phases("loop"):
        result = loop_choice.train(variant, strategy, built, metrics, dataset,
                             global_batch=global_batch, schedule=planned,
                             steps_per_execution=k, jit_compile=variant.train.jit_compile,
                             progress=progress, trace=trace, arrays=arrays)
    # Kept until the process exits, also when a later phase raises: destroying the loop's input
    # iterators waits for their threads (see LoopResult.iterators), and freeing the variant's
    # tf.functions removes them from the context one by one (on a ParameterServer coordinator,
    # from every worker too), each before the record is written.
    _KEPT_UNTIL_EXIT.append((strategy, built, metrics, result))
    schedule = result.schedule or planned  # its windows as sized (LoopClock._size_windows)
    steps = schedule.window_steps
    # Before FINISH: under MultiWorkerMirrored reading a metric is a collective, and a cluster's
    # tasks pass FINISH together, so no task leaves while a peer still reads from it.
    metric_results, metric_notes = objectives.kept_results(metrics, strategy,
                                                           one_process=not variant.is_cluster)
    with phases("peak"):  # before FINISH: no other variant runs beside it
        peak_measured_here = mfu.settle_peak(variant, layout)
    gate.wait(FINISH)
    with phases("final_loss"):
        final_loss = built.objectives.batch_loss(model, probe_batch)
    with phases("checkpoint"):  # after the measurement and the loss: it trains on
        checkpoint = checkpointing.cost(variant, result.checkpointed, strategy, model,
                                        build_model_and_optimizer, global_batch, k)
    with phases("epoch_ends"):  # it trains on too
        ends = (epoch_ends.measure(result.run_epoch, m.epochs, round_up(m.epoch_steps, k))
                if result.run_epoch is not None and m.epochs and not variant.is_cluster
                and variant.control not in ("twin", "yardstick") else None)
    windows = result.samples.get("observed") or []
    timed = [s for w in windows for s in w]
    notes = list(result.notes) + batch_notes + metric_notes
    if trace is not None and variant.workers > 1 and traced_turn.multi_worker_chief(variant):
        notes.append(f"only the chief was traced: {NON_CHIEF_UNTRACED}")
    step_stats = summarize(timed)
    with phases("utilization"):
        utilised = mfu.utilization(variant, layout, probe_batch, inputs, step_stats.median,
                                   peak_measured_here)
    with phases("checks"):
        # after the measurement, so the checks cannot disturb it
        checked = checks_suite.run(variant, StrategyRoute(strategy), loaded)
    unobserved_s = result.clocks.get("unobserved") or []
    rates = throughput(windows, global_batch, unobserved_s, k, steps)
    with phases("target"):  # after everything it measured: it trains fresh models
        target = to_target.section(variant, loaded, lambda arrays: to_target.train_seeds(
            variant, strategy, loaded, global_batch=global_batch, headline=rates.headline,
            arrays=arrays))
    return {
        **describe_setup(),
        **loop_sections(result, schedule, gate, rates, step_stats, global_batch=global_batch,
                        steps_per_call=k, repeats=m.repeats,
                        startup_s=result.first_step_end - spawn_time, phases_s=phases.seconds,
                        epoch_ends=ends, coordinated=coordinated,
                        cached_examples=None if variant.is_cluster
                        else data_mod.cached_examples(loaded, variant.data)),
        "checkpoint": profiled.Checkpoint(**checkpoint) if checkpoint is not None else None,
        "trace": traced_turn.summary(trace, result, variant),
        "loss": measured.Loss(initial=initial_loss, final=final_loss),
        "metric_results": metric_results,
        "utilization": profiled.Utilization(**utilised),
        "checks": profiled.Checks(**checked),
        "notes": notes,
        **({"target": target} if target is not None else {}),
    }


def run_variant(variant: Variant, spawn_time: float,
                progress: ProgressFn = _emit_progress) -> VariantRecord:
    record = VariantRecord.begin(variant)
    try:
        backend_measure = measurer(variant)  # None: TensorFlow's, measured here
        record.add(**(measure(variant, spawn_time, progress) if backend_measure is None else
                      backend_measure(variant, spawn_time, progress, pair_sizing_file(variant))))
        record.finish("ok")
    except VariantSkipped as exc:
        record.finish("skipped", reason=str(exc))
    except (DataUnavailable, WorkloadError) as exc:
        record.finish("failed", reason=str(exc), error=error_from_exception(exc))
    except Exception as exc:  # a crash inside TF is the variant's result, not the worker's
        error = error_from_exception(exc)
        if known := known_failures.skip_reason(variant, exc):
            record.finish("skipped", reason=known, error=error)
        else:
            record.finish("failed", reason=f"{error['type']}: {error['message']}", error=error)
    return record.add(peak_rss_mb=overhead.peak_rss_mb(), threads=overhead.os_threads())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.worker", description=__doc__)
    parser.add_argument("--variants", required=True, help="variants.json of the run")
    parser.add_argument("--id", required=True, help="variant id to run")
    parser.add_argument("--record", required=True, help="where to write the JSON record")
    args = parser.parse_args(argv)
    spawn_time = ChildEnv.from_env().spawn_time or time.time()
    try:
        variant = results.variant_by_id(results.read_json(Path(args.variants)), args.id,
                                        args.variants)
    except BenchError as exc:
        print(exc, file=sys.stderr)
        return 2
    record = run_variant(variant, spawn_time)
    # Spawn → record written, on the wall clock the parent also reads (minus: the teardown).
    record.section("timing").worker_s = time.time() - spawn_time
    leaving.end_on_sigterm()
    record.write(Path(args.record))
    leaving.hold_until_ended()
    return 0


if __name__ == "__main__":
    leaving.exit_now(main())
