"""What the index, a scenario's page and its trend need of each run, kept small.

A run's page needs all its records; the pages over many runs need only a line of each (name,
start, commit, machine, counts), its points on the trend, its figures for judging later runs
(bench.compare.figures) and its own detected steps. A `RunSummary` holds exactly that, so a
store of a thousand runs renders with one run's records in memory at a time, and the summary is
kept in the site's manifest (bench.report.manifest) for the next render.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench import fingerprint
from bench.compare.figures import RunFigures, run_figures
from bench.report.derived import ok_with_throughput, window_whiskers
from bench.report.history import Step
from bench.report.runs import RunView


@dataclass
class RunSummary:
    name: str
    path: str
    scenario_name: str
    description: str
    started_at: str
    commit: str
    machine: str
    counts: dict[str, int]
    not_run: list[str]
    figures: RunFigures
    # variant id -> [headline examples/s, and below/above it the interquartile range of
    # its windows' examples/s]
    points: dict[str, list[float]]
    steps: list[Step] = field(default_factory=list)
    steps_key: str = ""  # the history the steps were judged against (bench.report.manifest)
    # the machine as far as speed goes (fingerprint.machine)
    hardware: dict[str, Any] = field(default_factory=dict)
    page: str = ""
    scenario_page: str = ""

    def count(self, status: str) -> int:
        return self.counts.get(status, 0)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "scenario_name": self.scenario_name,
                "description": self.description, "started_at": self.started_at,
                "commit": self.commit, "machine": self.machine, "counts": self.counts,
                "not_run": self.not_run, "figures": self.figures.to_json(),
                "points": self.points, "steps": [s.to_json() for s in self.steps],
                "steps_key": self.steps_key, "hardware": self.hardware}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSummary:
        return cls(**{**data, "figures": RunFigures.from_json(data["figures"]),
                      "steps": [Step.from_json(s) for s in data["steps"]]})


def summarize(run: RunView) -> RunSummary:
    """The run's line, trend points and figures (its steps are judged later, in order)."""
    counts = {status: run.count(status) for status in ("ok", "skipped", "failed")}
    points = {str(rec.variant_id): [rec.headline or 0.0, *window_whiskers(rec)]
              for rec in ok_with_throughput(run)}
    return RunSummary(run.name, str(run.path), run.scenario_name, run.description,
                      run.started_at, run.commit, run.machine, counts, run.not_run,
                      run_figures(run.records), points,
                      hardware=fingerprint.machine(run.environment))
