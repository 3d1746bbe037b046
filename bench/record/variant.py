"""The record's `variant`: the variant as it ran, read back leniently.

A record holds `Variant.model_dump()` of the bench that wrote it. The scenario's own `Variant`
is strict (unknown keys are errors, every field required), which is right for a scenario and
wrong for a record written months ago: here every field is optional and unknown ones are kept,
also as a writer sets them (the strict `Variant` is what this section is written from). An axis
the record predates reads as the value it meant then (`bench.axes.VARIANT_AXES`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ConfigDict, PrivateAttr

from bench.axes import axis_value, variant_axes, variant_key
from bench.record.section import Number, Section, field
from bench.scenario.strategy_kinds import KINDS, StrategyKind, strategy_kind

# Written from the scenario's strict `Variant`: every field of the bench that wrote it is kept.
_VARIANTS_FIELDS = ConfigDict(extra="allow")


class ModelTable(Section):
    """The `[model]` table with the point's values."""

    model_config = _VARIANTS_FIELDS

    name: str | None = field("the model")
    extra_matmul: int | None = field("the extra matmul's size (0: none)")
    trainable: str | int | None = field("which layers train")


class EnvironmentTable(Section):
    """Its `[environment]` point: what was asked for and what it resolved to."""

    model_config = _VARIANTS_FIELDS

    label: str | None = field("what ids and comparisons call it, e.g. `tf2.20`")
    tensorflow: str | None = field("the TensorFlow asked for (a pip specifier, or `current`)")
    resolved: dict[str, str] | None = field("distribution → version, as pip resolved them")
    candidate: bool | None = field("an upgrade candidate beside the pinned variants")


class RecordedVariant(Section):
    """The variant a matrix point became (`bench.scenario.schema.Variant`), as the record holds
    it: a field the record predates is None here, and `axis` reads it with its old meaning."""

    # Frozen, as what ran: its JSON form and keys are computed once (a report of a year of
    # nightly runs asks for them hundreds of thousands of times).
    model_config = ConfigDict(**_VARIANTS_FIELDS, frozen=True)

    id: str | None = field("its id")
    index: int | None = field("its place in the run's matrix")
    scenario_name: str | None = field("its scenario")
    scenario_digest: str | None = field("digest of the scenario file")
    strategy: str | None = field("the strategy")
    replicas: int | None = field("planned replicas in sync (`effective` says what ran)")
    devices: str | None = field("the devices asked for")
    cross_device_ops: str | None = field("MirroredStrategy's all-reduce")
    workers: int | None = field("cluster workers")
    devices_per_worker: int | None = field("MultiWorkerMirrored devices per worker")
    ps: int | None = field("ParameterServer ps tasks")
    collective: str | None = field("MultiWorkerMirrored's collective")
    partitioner: str | None = field("ParameterServer's partitioner")
    network: str | None = field("a local cluster's network")
    min_effect: Number | None = field("the smallest slowdown `bench compare` counts")
    api: str | None = field("`fit` or `ctl`")
    precision: str | None = field("the precision policy")
    backend: str | None = field("the Keras backend (`tensorflow` or `jax`; None: tensorflow)")
    distribute_dataset: str | None = field("how the custom loop distributes its dataset")
    batch_rule: str | None = field("`weak` or `strong` scaling")
    per_replica_batch: int | None = field("planned examples per replica")
    global_batch: int | None = field("planned examples per step")
    learning_rate: Number | None = field("the learning rate")
    model: ModelTable | None = field("the `[model]` table with the point's values")
    data: dict[str, Any] | None = field("the `[data]` table")
    train: dict[str, Any] | None = field("the `[train]` table")
    measure: dict[str, Any] | None = field("the `[measure]` table")
    check: dict[str, Any] | None = field("the `[check]` table")
    fault: dict[str, Any] | None = field("the `[fault]` table")
    control: str | None = field("`baseline`, `twin`, `yardstick`, or null for a variant")
    environment: EnvironmentTable | None = field("its `[environment]` point")

    _json: dict[str, Any] | None = PrivateAttr(default=None)
    _keys: dict[frozenset[str], tuple[Any, ...]] = PrivateAttr(default_factory=dict)

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False
                   ) -> RecordedVariant:
        """A copy (with `update`'s fields), its JSON form and keys computed anew."""
        copy = super().model_copy(update=update, deep=deep)
        copy._json, copy._keys = None, {}
        return copy

    @property
    def as_dict(self) -> dict[str, Any]:
        """The variant as the record holds it (what `bench.axes` reads; not to be changed)."""
        if self._json is None:
            self._json = self.to_json()
        return self._json

    def axis(self, name: str) -> Any:
        """One axis (`bench.axes.VARIANT_AXES`); an older record reads with that axis's default."""
        return axis_value(self.as_dict, name)

    def axes(self, without: Iterable[str] = ()) -> dict[str, Any]:
        return variant_axes(self.as_dict, without)

    def key(self, without: Iterable[str] = ()) -> tuple[Any, ...]:
        """Equal keys: the same variant as far as a comparison varying only `without` goes."""
        skip = frozenset(without)
        if skip not in self._keys:
            self._keys[skip] = variant_key(self.as_dict, skip)
        return self._keys[skip]

    @property
    def model_name(self) -> str | None:
        return self.axis("model")

    @property
    def kind(self) -> StrategyKind | None:
        """What its strategy is (bench.scenario.strategy_kinds); None for a name this bench
        does not know."""
        return strategy_kind(self.strategy) if self.strategy in KINDS else None

    @property
    def on_baseline_strategy(self) -> bool:
        """It ran a single-device strategy: what every other variant is measured against."""
        return self.kind is not None and self.kind.baseline
