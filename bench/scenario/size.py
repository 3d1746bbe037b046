"""How large a scenario's matrix is, counted from its axes' lengths before anything is expanded.

Expanding costs the parent about 9 KB and 0.3 ms a variant (9,600 variants: 3.2 s, 114 MB), so
a 15-line file of 3,072,000 variants would exhaust memory before saying anything. Its size is
the product of its axes' lengths, which the validated scenario already holds; it is checked
against two bounds:

- a scenario holds at most MAX_SCENARIO_VARIANTS (10,000): what `bench validate` and
  `bench plan` list, and `bench run --only` chooses from, in a few seconds;
- a run holds at most MAX_RUN_VARIANTS (1,000). A run is interleaved rounds of its variants on
  one machine: only the variants alive at once (`measure.max_live`, from free memory at 768 MiB
  a process) share rounds, and the rest run in later batches, whose drift the rounds no longer
  cancel; and every variant costs a few seconds of start-up (2.5 s measured) besides its windows
  (7 s a variant for the default scenario), so a thousand variants are already hours of run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench.axes import DATA_AXES, OBJECT_AXES
from bench.errors import ScenarioError
from bench.scenario.fields import MAX_RUN_VARIANTS, MAX_SCENARIO_VARIANTS, PROCESS_BYTES
from bench.scenario.matrix import shape_axes
from bench.scenario.schema import Scenario, StrategyConfig
from bench.scenario.strategy_kinds import strategy_kind


@dataclass(frozen=True)
class EntrySize:
    """One strategy entry's share of the matrix."""

    field: str  # "strategies[0]"
    variants: int
    processes: int  # every process its variants start, in all
    axes: tuple[tuple[str, int], ...]  # (field, values) of each axis of more than one value

    def product(self) -> str:
        """"replicas 10 x batch.per_replica 10": its axes, largest first (its own fields named
        without the entry's prefix)."""
        prefix = f"{self.field}."
        axes = sorted(self.axes, key=lambda axis: -axis[1])
        return " x ".join(f"{name.removeprefix(prefix)} {count:,}" for name, count in axes) \
            or "one variant"


@dataclass(frozen=True)
class MatrixSize:
    entries: tuple[EntrySize, ...]

    @property
    def variants(self) -> int:
        return sum(entry.variants for entry in self.entries)

    @property
    def processes(self) -> int:
        return sum(entry.processes for entry in self.entries)

    @property
    def largest(self) -> EntrySize:
        return max(self.entries, key=lambda entry: entry.variants)

    def describe(self) -> str:
        """The count, where it comes from (the largest entry's axes), what its processes need."""
        largest = self.largest
        here = "" if len(self.entries) == 1 else f", {largest.variants:,} of them here"
        memory = self.processes * PROCESS_BYTES / (1 << 30)
        return (f"{self.variants:,} variants{here} ({largest.product()}), {self.processes:,} "
                f"processes of about {PROCESS_BYTES >> 20} MiB each ({memory:,.0f} GiB)")


def _shape_processes(strat: StrategyConfig) -> tuple[int, int]:
    """(shapes, processes they start in all) of a strategy entry: a cluster's tasks, each role
    as many times as its count field says, summed without listing the shapes."""
    axes = shape_axes(strat)
    shapes = math.prod(len(values) for values in axes.values())
    kind = strategy_kind(strat.name)
    if not kind.cluster:
        return shapes, shapes
    processes = 0
    for role in kind.roles:
        counts = axes[role.count] if role.count else [1]
        processes += sum(counts) * (shapes // len(counts))
    return shapes, processes


def entry_size(scenario: Scenario, index: int, strat: StrategyConfig) -> EntrySize:
    """The variants and processes one strategy entry expands to (as bench.scenario.matrix.expand
    makes them), from its axes' lengths."""
    here = f"strategies[{index}]"
    batch, train, data = strat.batch or scenario.batch, scenario.train, scenario.data
    where = f"{here}.batch" if strat.batch else "batch"
    apis = strat.api or train.api
    backends = strat.backends(train)
    # TensorFlow's custom loop also sweeps train.distribute_dataset; fit and JAX's loop do not
    api_points = sum(len(train.distribute_dataset) if api == "ctl" and backend == "tensorflow"
                     else 1 for api in apis for backend in backends)
    shapes, shape_processes = _shape_processes(strat)
    factors: dict[str, int] = {
        f"{where}.per_replica" if batch.rule == "weak" else f"{where}.global":
            len(batch.per_replica if batch.rule == "weak" else batch.global_batch or []),
        f"{here}.precision" if strat.precision else "train.precision":
            len(strat.precision or train.precision),
        f"{here}.model.trainable" if strat.model else "model.trainable":
            len((strat.model or scenario.model).axis_values("trainable")),
        f"{here}.keras" if strat.keras else "train.keras":
            len(strat.keras or train.axis_values("keras")),
        **{f"train.{name}": len(train.axis_values(name))
           for name in ("steps_per_execution", "jit_compile", *OBJECT_AXES)},
        **{f"data.{name}": len(data.axis_values(name)) for name in DATA_AXES},
    }
    if (environment := scenario.environment) is not None:
        factors.update({"environment.tensorflow": len(environment.tensorflow),
                        "environment.keras": len(environment.keras or [None]),
                        "environment.tf_keras": len(environment.tf_keras)})
    others = math.prod(factors.values())
    axes = {**{f"{here}.{name}": len(values) for name, values in shape_axes(strat).items()},
            f"{here}.api" if strat.api else "train.api": len(apis),
            f"{here}.backend" if strat.backend else "train.backend": len(backends),
            **({"train.distribute_dataset": len(train.distribute_dataset)}
               if "ctl" in apis and "tensorflow" in backends else {}),
            **factors}
    return EntrySize(here, shapes * api_points * others, shape_processes * api_points * others,
                     tuple((name, count) for name, count in axes.items() if count > 1))


def matrix_size(scenario: Scenario) -> MatrixSize:
    return MatrixSize(tuple(entry_size(scenario, i, strat)
                            for i, strat in enumerate(scenario.strategies)))


def check_scenario_size(scenario: Scenario, source: str) -> None:
    """A scenario of more variants than MAX_SCENARIO_VARIANTS is refused before expansion."""
    size = matrix_size(scenario)
    if size.variants > MAX_SCENARIO_VARIANTS:
        raise ScenarioError(source, size.largest.field, (
            f"{size.describe()}: more than a scenario may hold ({MAX_SCENARIO_VARIANTS:,}); list "
            "fewer values in its largest axes, or split it into several scenarios"))


def check_run_size(scenario: Scenario, variants: int, source: str) -> None:
    """A run of more variants than MAX_RUN_VARIANTS (after --only) is refused before it starts."""
    if variants > MAX_RUN_VARIANTS:
        size = matrix_size(scenario)
        raise ScenarioError(source, size.largest.field, (
            f"{variants:,} variants to run, more than one run may hold ({MAX_RUN_VARIANTS:,}: "
            "its rounds interleave the variants alive at once, and each variant costs seconds "
            "of start-up): choose some with --only PATTERN, or list fewer values in the largest "
            f"axes ({size.largest.field}: {size.largest.product()})"))
