"""The `[fault]` section: which task of a cluster to kill, when, and how often to back up.

Its own module so the schema stays readable; the cross-field rules (a cluster strategy that has
the task) are in bench.scenario.rules, the step check after --quick in bench.scenario.matrix.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from bench.scenario.fields import MAX_STEPS, STEPS_WHY, STRICT, Steps

# A fault's target task, written "type:index" as TF_CONFIG names it (e.g. "worker:1").
TaskName = Annotated[str, Field(pattern=r"^(chief|worker|ps):[0-9]+$")]


def _step_or_fraction(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"a step count (integer >= 1) or a fraction in (0, 1); got {value!r}")
    if isinstance(value, int) and not 1 <= value <= MAX_STEPS:
        raise ValueError(f"a step count must be between 1 and {MAX_STEPS:,}; got {value}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"a fraction of the steps must be a finite number; got {value}")
    if isinstance(value, float) and not 0 < value < 1:
        raise ValueError(f"a fraction of the steps must be more than 0 and less than 1 (a step "
                         f"count is an integer); got {value}")
    return value


class FaultKill(BaseModel):
    """Which task to kill and when: `at_step` is a step count (1 = after the first step), or a
    fraction of the variant's steps (0.5: half-way), which stays sensible under --quick."""

    model_config = STRICT

    task: TaskName = Field(description=(
        "The task to kill, as TF_CONFIG names it (\"worker:1\"); only a worker, never the chief."))
    at_step: Annotated[int | float, BeforeValidator(_step_or_fraction)] = Field(description=(
        "A step count, or a fraction of the variant's steps (warmup + repeats x steps)."))

    def step_of(self, total_steps: int) -> int:
        """The step count at which the task is killed, for a variant of `total_steps` steps."""
        if isinstance(self.at_step, int):
            return self.at_step
        return max(1, round(self.at_step * total_steps))


class FaultConfig(BaseModel):
    """A lost worker, injected by the cluster supervisor (bench.launch.recovery): the task is
    sent `signal` once it reports `at_step`; the training backs up every `backup_every` steps
    and the cluster recovers from the last backup (MultiWorkerMirrored) or the coordinator
    re-schedules the lost worker's steps (ParameterServer)."""

    model_config = STRICT

    kill: FaultKill = Field(description="Which task to kill and when.")
    signal: Literal["SIGKILL", "SIGTERM"] = Field("SIGKILL", description=(
        "The signal sent to the task (a task that survives SIGTERM gets SIGKILL 1 s later)."))
    backup_every: Steps = Field(10, description=(
        f"MultiWorkerMirrored backs up every K steps. {STEPS_WHY}"))
