"""`VariantRecord`: the one record of a variant, written by every launcher, read by every tool.

Every kind of variant is written the same way: `VariantRecord.begin(variant)` (a worker, a local
cluster's supervisor, `bench worker`), the sections it measured `add`ed, then `finish`ed ok,
skipped or failed; a launcher that got no record from its process makes `VariantRecord.failed`.
Every reader loads records through `load` (a run's `records.jsonl`: `bench.results`) and asks the
derived properties below instead of working the figures out again.

Writers build the sections as their typed models (`Timing(...)`, `Measurement(...)`): a field
a section does not have is an error where it is written. Readers keep every field (a newer
bench's too): reading a record of schema 2 and writing it again gives back the same JSON
(bench.record.section). A record of schema 1 (nightly stores hold them; a record without
`schema` is one) is migrated as it loads (bench.record.migration): the properties below read
schema 2 alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationError

from bench.errors import BenchError
from bench.record.cluster import Cluster, Interleave, Launch, RecordError, Recovery
from bench.record.measured import (
    Effective,
    Loss,
    Measurement,
    Observer,
    Samples,
    StepTime,
    Throughput,
    Timing,
)
from bench.record.migration import upgrade
from bench.record.profiled import TRACE_INFLATION_LIMIT as TRACE_INFLATION_LIMIT  # re-exported
from bench.record.profiled import (
    Checkpoint,
    Checks,
    Trace,
    TraceAnalysis,
    Utilization,
)
from bench.record.provenance import (
    Devices,
    KerasInfo,
    MetricValue,
    ModelParams,
    StartState,
    StrategyInfo,
    Task,
    Variables,
    WorkerEnvironment,
    WorkerVersions,
    Workload,
)
from bench.record.section import READING, Number, Section, field
from bench.record.target import Target
from bench.record.variant import RecordedVariant

if TYPE_CHECKING:  # a reader of records never needs the scenario's schema
    from bench.scenario.schema import Variant

SCHEMA = 2  # what this bench writes
READABLE_SCHEMAS = (1, 2)
STATUSES = ("ok", "skipped", "failed")
# What every writer puts in a record (VariantRecord.begin): a stored record lacks none of them.
STORED_FIELDS = ("variant_id", "status", "variant")
Status = Literal["ok", "skipped", "failed"]

# Per-step observation, or the profiler, is flagged as costing the steps when the interval of
# its ratio (observed ÷ unobserved, traced ÷ untraced, side by side) lies wholly above this: by
# the worker in the record, and by the report's measurement-cost chart.
OBSERVER_FLAG_RATIO = 1.02
# Roles of the run's controls that measure the machine, not the code: never compared, scaled,
# charted or gated as variants.
MACHINE_CONTROLS = ("twin", "yardstick")


class VariantRecord(Section):
    """One variant's record: what it was, what ran, what it measured, and how it ended."""

    schema_version: int = Field(1, alias="schema", description=(
        "the record format's version: 2 (a record of schema 1, from before the typed record, "
        "has no `schema` and is migrated as it loads)"))
    variant_id: str | None = field("the variant's id (`variant.id`)")
    index: int | None = field("its place in the run's matrix")
    status: Status = field("`ok`, `skipped` or `failed`", "failed")
    reason: str | None = field("why it was skipped or failed, in one line (null when ok)")
    error: RecordError | None = field("the error (null when ok)")
    variant: RecordedVariant = field("the variant as it ran: the scenario's fields with its "
                                     "matrix point's values", default_factory=RecordedVariant)
    finished_at: str | None = field("when the record was written (UTC, ISO 8601)")
    task: Task | None = field("the cluster task that wrote it (null for a single process)")
    effective: Effective | None = field("the replicas and batches that really ran (e.g. one "
                                        "device per MultiWorkerMirrored worker on CPU)")
    data_source: str | None = field("the data actually used, e.g. `tfrecord:<glob> (train, 8 "
                                    "files, ...)`")
    data_fallback_reason: str | None = field("why synthetic data replaced the dataset asked for "
                                             "(null: it did not)")
    devices: Devices | None = field("the device kind, physical and logical devices, and whether "
                                    "they are simulated")
    gpu: dict[str, Any] | None = field("the GPUs beside it (model, memory, driver, compute "
                                       "capability) and the CUDA and cuDNN of the build")
    environment: WorkerEnvironment | None = field("what the worker really ran: interpreter, key "
                                                  "package versions, a digest of every "
                                                  "distribution")
    strategy_info: StrategyInfo | None = field("the strategy class, replicas in sync, all-reduce "
                                               "and partitioner")
    precision_policy: str | None = field("the Keras mixed-precision policy")
    start_state: StartState | None = field("what the process found at start (a forked worker "
                                           "must find nothing set)")
    keras: KerasInfo | None = field("the Keras flavour and version")
    model_params: ModelParams | None = field("trainable and total parameters")
    workload: Workload | None = field("what trained: the model class, the loss and the optimizer, "
                                      "and where each came from")
    variables: Variables | None = field("the bytes each device or ps task holds, and each table "
                                        "of 1 MB or more")
    env: WorkerVersions | None = field("TensorFlow and Keras versions and the pid, as the worker "
                                       "saw them")
    timing: Timing | None = field("where the worker's time went")
    step_time: StepTime | None = field("statistics of the observed windows' steps, in seconds")
    throughput: Throughput | None = field("examples/s: `headline` (THE throughput) and `median` "
                                          "(the typical-step rate)")
    measurement: Measurement | None = field("how the timed windows ran")
    observer: Observer | None = field("the observer effect: observed ÷ unobserved windows")
    checkpoint: Checkpoint | None = field("with `measure.checkpoint`: what saving costs")
    steady_state_start: int | None = field(
        "timed steps still warming up, judged on the variant's own windows (0: none)")
    samples: Samples | None = field("every step time, in seconds")
    trace: Trace | None = field("the profiler trace, its cost and xprof's analysis")
    loss: Loss | None = field("the loss of a fixed batch before and after training")
    metric_results: dict[str, MetricValue] | None = field(
        "each metric's value after training (null where it could not be read right: `notes` "
        "says why)")
    utilization: Utilization | None = field("FLOPs per step, achieved and peak FLOP/s, MFU")
    checks: Checks | None = field("the verdicts of `[check]`")
    notes: list[str] | None = field("anything else worth knowing about the measurement")
    peak_rss_mb: Number | None = field("the worker's own peak resident memory (VmHWM)")
    threads: int | None = field("the worker's OS threads when it wrote its record")
    wall_s: Number | None = field("the variant's process time as its launcher saw it")
    launch: Launch | None = field("how the process started")
    cluster: Cluster | None = field("cluster variants: the cluster, its tasks and restarts",
                                    json_schema_extra={"sometimes": True})
    recovery: Recovery | None = field("`[fault]` variants: the recovery's timeline",
                                      json_schema_extra={"sometimes": True})
    interleave: Interleave | None = field("the batch of variants it shared rounds with")
    target: Target | None = field("`[target]`: each seed trained to the target, and examples "
                                  "and time to it", json_schema_extra={"sometimes": True})
    # Filled by bench.scaling for the run's readers; never written.
    scaling_efficiency: float | None = Field(None, exclude=True)
    scaling_kind: str | None = Field(None, exclude=True)

    # -- writing ------------------------------------------------------------------------------

    @classmethod
    def begin(cls, variant: Variant, status: Status = "failed") -> VariantRecord:
        """A new record of `variant`: what every writer starts from (failed until finished)."""
        return cls.model_validate({
            "schema": SCHEMA, "variant_id": variant.id, "index": variant.index,
            "status": status, "reason": None, "error": None,
            "variant": variant.model_dump(mode="json", by_alias=True), "finished_at": None})

    def add(self, **sections: Any) -> VariantRecord:
        """Set sections (typed, or plain JSON), each validated: a name or field the record does
        not have is a ValidationError."""
        for name, value in sections.items():
            setattr(self, name, value)
        return self

    def section(self, name: str) -> Any:
        """The section `name`, made empty first if the record has none (to set one field)."""
        if getattr(self, name) is None:
            setattr(self, name, {})
        return getattr(self, name)

    def finish(self, status: Status, reason: str | None = None,
               error: dict[str, Any] | None = None) -> VariantRecord:
        assert status in STATUSES
        return self.add(status=status, reason=reason, error=error,
                        finished_at=datetime.now(UTC).isoformat(timespec="seconds"))

    @classmethod
    def failed(cls, variant: Variant, reason: str, **error: Any) -> VariantRecord:
        """The record of a variant that left none of its own (a crash, a timeout, a refusal)."""
        return cls.begin(variant).finish("failed", reason=reason, error=error or None)

    @classmethod
    def skipped(cls, variant: Variant, reason: str) -> VariantRecord:
        return cls.begin(variant).finish("skipped", reason=reason)

    def to_json(self) -> dict[str, Any]:
        """The record as it goes on disk: the fields it was given, in the schema's order."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def write(self, path: Path) -> None:
        """Write atomically (a rename): a launcher waiting for the file never sees half of it."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2, default=str), encoding="utf-8")
        tmp.replace(path)

    # -- reading ------------------------------------------------------------------------------

    @classmethod
    def load(cls, data: dict[str, Any] | VariantRecord, where: str = "a record"
             ) -> VariantRecord:
        """A record from its JSON (schema 1, migrated, or 2), every field it holds kept; a record
        it cannot read is one BenchError line naming `where` and the field."""
        if isinstance(data, VariantRecord):
            return data
        schema = data.get("schema", 1) if isinstance(data, dict) else None
        if schema not in READABLE_SCHEMAS:
            raise BenchError(f"{where}: schema {schema!r} is not one this bench reads "
                             f"({', '.join(map(str, READABLE_SCHEMAS))}); a newer bench wrote it?")
        try:
            return cls.model_validate(upgrade(data, schema), extra=READING)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise BenchError(f"{where}: {loc}: {first['msg']}") from None

    @classmethod
    def load_stored(cls, data: Any, where: str) -> VariantRecord:
        """A record as a run stores it: `load`, and the fields every writer sets (`begin`)
        must be there, so a line without them is damage, not a failed variant of no name."""
        if not isinstance(data, dict):
            raise BenchError(f"{where}: not a record (a JSON {type(data).__name__})")
        if missing := [name for name in STORED_FIELDS if name not in data]:
            raise BenchError(f"{where}: {missing[0]}: missing (every stored record has it)")
        return cls.load(data, where)

    @classmethod
    def read(cls, path: Path) -> VariantRecord:
        """The record a worker or supervisor wrote to `path`."""
        return cls.load(json.loads(path.read_text(encoding="utf-8")), str(path))

    # -- what readers compute -----------------------------------------------------------------

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def strategy(self) -> str | None:
        return self.variant.strategy

    @property
    def control_role(self) -> str | None:
        """"baseline" and "twin" (the A/A control), "yardstick" (the fixed calibration workload),
        or None for an ordinary variant."""
        return self.variant.control

    @property
    def is_twin(self) -> bool:
        return self.control_role == "twin"

    @property
    def counts_as_variant(self) -> bool:
        """The control twin and the yardstick are kept in the run but are never variants of
        comparisons, scaling, charts or the gate: they measure the machine, not the code."""
        return self.control_role not in MACHINE_CONTROLS

    @property
    def has_throughput(self) -> bool:
        """It measured examples/s (an ok record of a throughput variant)."""
        return bool(self.throughput and self.throughput.median)

    @property
    def headline(self) -> float | None:
        """THE throughput: examples/s over the unobserved timed windows' wall clock."""
        t = self.throughput
        return None if t is None or t.headline is None else float(t.headline)

    def headline_ratio(self, base: VariantRecord) -> float:
        """This headline ÷ `base`'s; NaN where `base` has none (0 where this one has none)."""
        return (self.headline or 0.0) / (base.headline or float("nan"))

    @property
    def typical_step_rate(self) -> float | None:
        """The global batch ÷ the median observed step: the typical step's examples/s."""
        return None if self.throughput is None or self.throughput.median is None \
            else float(self.throughput.median)

    @property
    def spread_pct(self) -> float | None:
        return None if self.throughput is None else self.throughput.spread_pct

    @property
    def window_rates(self) -> list[float]:
        """Examples/s of each timed window (the headline's windows), in order."""
        return list(self.throughput.per_repeat or []) if self.throughput else []

    @property
    def replicas(self) -> int | None:
        """Replicas that really ran, else the planned ones (MultiWorkerMirrored on CPU has one
        per worker, whatever was planned)."""
        if self.effective is not None and self.effective.replicas is not None:
            return self.effective.replicas
        return self.variant.replicas

    @property
    def global_batch(self) -> int | None:
        """The global batch that really ran, else the planned one."""
        if self.effective is not None and self.effective.global_batch is not None:
            return self.effective.global_batch
        return self.variant.global_batch

    @property
    def per_replica_batch(self) -> int | None:
        if self.effective is not None and self.effective.per_replica_batch is not None:
            return self.effective.per_replica_batch
        return self.variant.per_replica_batch

    @property
    def median_step_s(self) -> float | None:
        return None if self.step_time is None else self.step_time.median

    @property
    def timed_windows(self) -> list[list[float]]:
        """The observed windows' per-step times, one list per window."""
        return list(self.samples.timed or []) if self.samples else []

    @property
    def timed_steps(self) -> list[float]:
        """Every observed step time, windows in order."""
        return [s for window in self.timed_windows for s in window]

    @property
    def warmup_steps(self) -> list[float]:
        return list(self.samples.warmup or []) if self.samples else []

    @property
    def traced_steps(self) -> list[float]:
        return list(self.samples.traced or []) if self.samples else []

    @property
    def device_kind(self) -> str | None:
        return None if self.devices is None else self.devices.kind

    @property
    def trace_analysis(self) -> TraceAnalysis | None:
        """xprof's analysis of the trace, once the runner attached it."""
        return None if self.trace is None else self.trace.analysis

    @property
    def profiler_ratio(self) -> float | None:
        return None if self.trace is None else self.trace.overhead_ratio

    @property
    def profiler_flagged(self) -> bool:
        """Tracing cost the steps: the interval of its ratio lies above the limit."""
        return bool(self.trace and self.trace.overhead_flagged)

    @property
    def observer_ratio(self) -> float | None:
        return None if self.observer is None else self.observer.ratio

    @property
    def observer_flagged(self) -> bool:
        return bool(self.observer and self.observer.flagged)

    @property
    def bimodal_speeds(self) -> bool:
        """Its fresh input iterators ran at two speeds."""
        speeds = self.measurement.speeds if self.measurement else None
        return bool(speeds and speeds.bimodal)

    @property
    def unobserved_window_s(self) -> float:
        """Seconds in the timed windows the headline counts: the unobserved windows' clocks."""
        m = self.measurement
        return sum(m.window_s or []) if m is not None else 0.0

    @property
    def observed_window_s(self) -> float:
        m = self.measurement
        return sum(m.observed_window_s or []) if m is not None else 0.0


def scenario_data_sources(records: Iterable[VariantRecord]) -> list[str]:
    """The data the scenario's variants read; the yardstick reads its own fixed data."""
    return sorted({str(r.data_source) for r in records
                   if r.data_source and r.control_role != "yardstick"})


def load_all(records: Sequence[dict[str, Any] | VariantRecord], where: str = "records"
             ) -> list[VariantRecord]:
    """Records from their JSON (or already loaded)."""
    return [VariantRecord.load(r, f"{where}[{i}]") for i, r in enumerate(records)]
