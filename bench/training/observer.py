"""The observer effect: what bench's per-step observation (a hook and a host sync every step)
costs, from one unobserved block held against the timed windows. Pure: the worker measures,
this judges.
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.records import OBSERVER_FLAG_RATIO
from bench.timing import round_up

# The unobserved block runs at least this many steps (see block_steps).
OBSERVER_MIN_STEPS = 30


def block_steps(window_steps: int, steps_per_execution: int) -> int:
    """Steps of the unobserved block: a window's, but at least OBSERVER_MIN_STEPS, so that the
    block's own fixed cost (a `fit` epoch's hooks, the final host sync) stays a small share of
    it when windows are only a few steps long."""
    return round_up(max(window_steps, OBSERVER_MIN_STEPS), steps_per_execution)


def summary(observed: float | dict[str, Any] | None, window_s: list[float],
            window_steps: int, unobserved_steps: int) -> dict[str, Any]:
    """How much bench's per-step observation costs: the median timed window's time per step
    against the unobserved block's (ratio > 1: observing slowed the steps)."""
    if observed is None:
        return {"status": "skipped", "reason": "the parameter-server loop only syncs per block"}
    if isinstance(observed, dict):
        return observed
    window = statistics.median(window_s)
    block_step = observed / unobserved_steps
    ratio = (window / window_steps) / block_step
    # One unobserved block is one sample of a machine whose speed moves from window to window:
    # flag only a block faster per step than 95% of the observed stretches of as many steps.
    stretch_steps = observed_stretches(window_s, window_steps, unobserved_steps)
    fast_step = (statistics.quantiles(stretch_steps, n=20, method="inclusive")[0]
                 if len(stretch_steps) >= 2 else stretch_steps[0])
    return {"status": "ok", "steps": unobserved_steps, "window_steps": window_steps,
            "unobserved_s": observed, "observed_window_s": window,
            "observed_stretch_step_p5_s": fast_step, "ratio": ratio,
            "flagged": ratio > OBSERVER_FLAG_RATIO and block_step < fast_step}


def observed_stretches(window_s: list[float], window_steps: int, unobserved_steps: int
                       ) -> list[float]:
    """Time per step over consecutive timed windows grouped into stretches of at least the
    unobserved block's steps: the observed figure to hold one block against, like for like
    (a 30-step block is steadier than any one 3-step window)."""
    per_stretch = max(1, round_up(unobserved_steps, window_steps) // window_steps)
    groups = [window_s[i:i + per_stretch] for i in range(0, len(window_s), per_stretch)]
    if len(groups) > 1 and len(groups[-1]) < per_stretch:
        groups[-2].extend(groups.pop())  # a short tail joins the stretch before it
    return [sum(group) / (len(group) * window_steps) for group in groups]
