"""TensorBoard event files for a run, beside each variant's profile, written without TensorFlow.

`tensorboard --logdir RUN_DIR` then shows, for every variant, the HParams dashboard (the variant's
axes as hyperparameters, its figures as metrics), the per-step time series and the profile:

    RUN_DIR/traces/events.out.tfevents.*.bench            the experiment: hparams and metrics listed
    RUN_DIR/traces/<variant>/events.out.tfevents.*.bench  hparams, metrics, step times, loss
    RUN_DIR/traces/<variant>/plugins/profile/...          the profile (written by the worker)

Everything comes from the records: TensorBoard's own protos (hparams and scalar summaries) and
its event-file writer, so the parent process stays free of TensorFlow. Writing again replaces
bench's earlier event files (suffix `.bench`) instead of doubling every series.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.axes import VARIANT_AXES
from bench.errors import BenchError, file_errors
from bench.record.model import VariantRecord
from bench.report.runs import RunView, load_run
from bench.results import is_run_dir
from bench.trace.serve import TRACES_DIR

SUFFIX = ".bench"  # marks the event files bench wrote, so a rewrite can replace exactly them
INSTALL_HINT = "pip install 'bench[tensorboard]'"

# Beyond the matrix axes: how the variant ended and (when the record has it and the axes do not
# name it yet) the Keras flavour. The A/A control role is in the trial id already
# (`<baseline>-control`, `yardstick`).
EXTRA_HPARAMS = ("status",) + (() if "keras" in VARIANT_AXES else ("keras",))


def _ms(value: Any) -> float | None:
    return None if value is None else float(value) * 1e3


def _pct(value: Any) -> float | None:
    return None if value is None else float(value) * 100


# tag, display name, description, value from (run, record)
Metric = tuple[str, str, str, Callable[[RunView, VariantRecord], Any]]
METRICS: tuple[Metric, ...] = (
    ("metrics/examples_per_sec", "examples/s",
     "headline: examples in the timed windows ÷ their wall-clock time",
     lambda run, r: r.headline if r.has_throughput else None),
    ("metrics/median_step_ms", "median step ms", "median of the timed steps (ms)",
     lambda run, r: _ms(r.median_step_s)),
    ("metrics/spread_pct", "spread %", "robust coefficient of variation of the step time",
     lambda run, r: r.spread_pct),
    ("metrics/scaling_efficiency", "scaling eff.",
     "examples/s(n) ÷ (n × examples/s(1)) against the run's 1-replica variant",
     lambda run, r: r.scaling_efficiency),
    ("metrics/mfu_pct", "MFU %", "achieved FLOP/s ÷ the measured matmul peak",
     lambda run, r: _pct(r.utilization.mfu if r.utilization else None)),
    ("metrics/noise_floor_pct", "noise floor %",
     "how far the run's A/A control twins' examples/s differ (the same for every variant)",
     lambda run, r: (run.noise_floor or {}).get("difference_pct")),
    ("metrics/observer_ratio", "observer ×",
     "time per step: observed timed windows ÷ an unobserved block",
     lambda run, r: r.observer_ratio),
    ("metrics/profiler_ratio", "profiler ×", "traced ÷ untraced median step time",
     lambda run, r: r.profiler_ratio),
)
PHASES = ("warmup", "timed", "traced")


def _modules() -> tuple[Any, Any, Any, Any]:
    """TensorBoard's summary protos and writer (no TensorFlow), or one line saying how to get them."""
    try:
        from tensorboard.compat.proto import event_pb2
        from tensorboard.plugins.hparams import summary_v2 as hparams
        from tensorboard.plugins.scalar import summary_v2 as scalars
        from tensorboard.summary.writer.record_writer import RecordWriter
    except ImportError as exc:
        raise BenchError(f"tensorboard is not installed ({exc}); {INSTALL_HINT}") from None
    return event_pb2, hparams, scalars, RecordWriter


def hparams_of(record: VariantRecord, as_text: frozenset[str] = frozenset()
               ) -> dict[str, bool | int | float | str]:
    """The variant's axes (and status, Keras flavour) as hparam values; an axis the variant does
    not have (None) is left out rather than typed as a string. Axes in `as_text` are written as
    text (e.g. `prefetch = [0, "autotune"]`: one hparam has one type across the sessions)."""
    values: dict[str, Any] = record.variant.axes()
    values["status"] = record.status
    if "keras" in EXTRA_HPARAMS:
        values["keras"] = record.variant.axis("keras")
    # what really ran, where the worker said so
    values.update(replicas=record.replicas, per_replica_batch=record.per_replica_batch,
                  global_batch=record.global_batch)
    return {k: v if isinstance(v, bool | int | float) and k not in as_text else str(v)
            for k, v in values.items() if v is not None}


def mixed_types(records: list[VariantRecord]) -> frozenset[str]:
    """The hparams whose values are numbers in some records and text in others."""
    kinds: dict[str, set[bool]] = {}
    for record in records:
        for name, value in hparams_of(record).items():
            kinds.setdefault(name, set()).add(isinstance(value, str))
    return frozenset(name for name, seen in kinds.items() if len(seen) > 1)


def metrics_of(run: RunView, record: VariantRecord) -> dict[str, float]:
    out = {}
    for tag, _, _, value in METRICS:
        got = value(run, record) if record.ok else None
        if got is not None:
            out[tag] = float(got)
    return out


def step_series(record: VariantRecord) -> dict[str, list[tuple[int, float]]]:
    """(step, ms) per phase, numbered on one axis in the order the process ran them."""
    series: dict[str, list[tuple[int, float]]] = {}
    step = 0
    for phase, values in zip(PHASES, (record.warmup_steps, record.timed_steps,
                                      record.traced_steps), strict=True):
        series[phase] = [(step + i + 1, float(s) * 1e3) for i, s in enumerate(values)]
        step += len(values)
    return series


def _wall_time(record: VariantRecord) -> float:
    try:
        return datetime.fromisoformat(str(record.finished_at)).timestamp()
    except ValueError:
        return datetime.now().timestamp()


def _replace_events(logdir: Path, events: list[Any], record_writer: Any) -> Path:
    """Write `events` to a fresh event file in `logdir`, after removing bench's earlier ones.

    TensorBoard's RecordWriter on a plain file: its EventFileWriter opens files through
    `tensorboard.compat.tf`, which imports TensorFlow whenever it is installed."""
    event_pb2 = _modules()[0]
    now = time.time()
    name = f"events.out.tfevents.{int(now):010d}.{socket.gethostname()}.{os.getpid()}{SUFFIX}"
    tmp = logdir / f".{name}.tmp"
    with file_errors(logdir, "write event files into it"):
        logdir.mkdir(parents=True, exist_ok=True)
        for old in logdir.glob(f"events.out.tfevents.*{SUFFIX}"):
            old.unlink()
        with open(tmp, "wb") as fh:
            writer = record_writer(fh)
            header = event_pb2.Event(wall_time=now, file_version="brain.Event:2")
            for event in [header, *events]:
                writer.write(event.SerializeToString())
        os.replace(tmp, logdir / name)
    return logdir / name


def variant_events(run: RunView, record: VariantRecord,
                   as_text: frozenset[str] = frozenset()) -> list[Any]:
    """The events of one variant: its hparams, its metrics, step times per phase, the loss."""
    event_pb2, hparams, scalars, _ = _modules()
    wall = _wall_time(record)

    def event(summary: Any, step: int = 0) -> Any:
        return event_pb2.Event(wall_time=wall, step=step, summary=summary)

    events = [event(hparams.hparams_pb(hparams_of(record, as_text), trial_id=record.variant_id,
                                       start_time_secs=wall))]
    descriptions = {tag: description for tag, _, description, _ in METRICS}
    events += [event(scalars.scalar_pb(tag, value, descriptions[tag]))
               for tag, value in metrics_of(run, record).items()]
    series = step_series(record)
    for phase, points in series.items():
        events += [event(scalars.scalar_pb(f"step_time_ms/{phase}", ms,
                                           f"{phase} steps, ms each, in the order they ran"), step)
                   for step, ms in points]
    initial, final = (record.loss.initial, record.loss.final) if record.loss else (None, None)
    last = max((points[-1][0] for points in series.values() if points), default=1)
    for step, value in ((1, initial), (last, final)):
        if value is not None:
            events.append(event(scalars.scalar_pb(
                "loss", float(value), "the first and the last measured loss (records keep no "
                "per-step loss)"), step))
    return events


def experiment_events(records: list[VariantRecord]) -> list[Any]:
    """The experiment summary: which hparams and metrics the dashboard lists, with their names.

    Hparams whose value differs between the variants are marked so: TensorBoard lists those
    first (then by name) and shows the first five, so the table opens on what the run varied."""
    event_pb2, hparams, _, _ = _modules()
    from tensorboard.plugins.hparams import metadata, plugin_data_pb2

    values: dict[str, set[Any]] = {}
    as_text = mixed_types(records)
    for record in records:
        for name, value in hparams_of(record, as_text).items():
            values.setdefault(name, set()).add(value)
    names = [name for name in (*VARIANT_AXES, *EXTRA_HPARAMS) if name in values]
    metrics = [hparams.Metric(tag, display_name=display, description=description)
               for tag, display, description, _ in METRICS]
    summary = hparams.hparams_config_pb([hparams.HParam(name) for name in names], metrics)
    value = summary.value[0]
    experiment = metadata.parse_experiment_plugin_data(value.metadata.plugin_data.content)
    for info in experiment.hparam_infos:
        info.differs = len(values[info.name]) > 1
    value.metadata.CopyFrom(metadata.create_summary_metadata(
        plugin_data_pb2.HParamsPluginData(experiment=experiment)))
    return [event_pb2.Event(wall_time=max((_wall_time(r) for r in records), default=0.0),
                            summary=summary)]


def write_run_events(run_dir: Path) -> list[Path]:
    """(Re)write the run's event files; returns the variant logdirs written, in record order."""
    run_dir = Path(run_dir)
    if not is_run_dir(run_dir):
        raise BenchError(f"{run_dir}: not a bench run directory (no variants.json)")
    record_writer = _modules()[3]
    run = load_run(run_dir)
    traces = run_dir / TRACES_DIR
    written = []
    as_text = mixed_types(run.records)
    for record in run.records:
        logdir = traces / str(record.variant_id)
        _replace_events(logdir, variant_events(run, record, as_text), record_writer)
        written.append(logdir)
    if run.records:
        _replace_events(traces, experiment_events(run.records), record_writer)
    return written
