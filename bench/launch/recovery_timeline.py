"""A `[fault]` variant's recovery timeline, supervisor side, read from the tasks' events.

Once the fault is injected (bench.launch.fault_injector), recovery goes as a job controller does
it, as the strategy's description says (`recovers_by`): for MultiWorkerMirrored the whole
cluster is started again (fresh ports) and restores from the last backup; for ParameterServer
only the lost worker is started again, at its address, while the coordinator goes on. `timeline`
reads the tasks' events files (bench.training.recovery writes them) into the record's `recovery`
section. Pure: no TensorFlow.
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.launch.fault_injector import FaultInjector
from bench.scenario.fault import FaultConfig
from bench.scenario.strategy_kinds import strategy_kind

BACK_TO_SPEED = 1.05  # "back at speed": step time within 5% of the pre-fault median
SPEED_WINDOW = 3  # steps whose median is compared with it


def _first(events: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    return next((e for e in events if e["event"] == kind), None)


def _steps(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == "step"]


def _pre_fault_median(before: list[dict[str, Any]], warmup: int) -> float | None:
    dts = [e["dt"] for e in before if e["step"] > warmup] or [e["dt"] for e in before[1:]]
    return statistics.median(dts) if dts else None


def _back_to_speed(after: list[dict[str, Any]], reference: float | None) -> float | None:
    """When the median of SPEED_WINDOW consecutive post-restore steps is first within 5% of the
    pre-fault median: the wall time of the window's last step."""
    if reference is None:
        return None
    for i in range(SPEED_WINDOW, len(after) + 1):
        window = after[i - SPEED_WINDOW:i]
        if statistics.median(e["dt"] for e in window) <= BACK_TO_SPEED * reference:
            return window[-1]["t"]
    return None


def _continuity_ps(before: list[dict[str, Any]], after: list[dict[str, Any]]
                   ) -> dict[str, Any] | None:
    """ParameterServer: nothing is restored; the training loss of the first block after the
    fault against the last block before it and the first block of the run."""
    if not before or not after:
        return None
    first, last, resumed = before[0]["loss"], before[-1]["loss"], after[0]["loss"]
    return {"train_loss_first_block": first, "train_loss_before_fault": last,
            "train_loss_first_after_fault": resumed,
            "continues": abs(resumed - last) < abs(resumed - first)}


def _continuity(first: list[dict[str, Any]], chief_after: list[dict[str, Any]],
                restored_step: int | None) -> dict[str, Any] | None:
    """Does training go on from the backup, not from scratch? The fixed probe batch's loss right
    after the restore against its loss at the backup it came from and at step 0 (before any
    step); the first post-restore training loss against those at the backup step and step 1."""
    restored = _first(chief_after, "restored")
    start = _first(first, "restored")
    if restored is None or start is None:
        return None
    backup = next((e for e in first if e["event"] == "backup" and e["step"] == restored_step),
                  None)
    after_steps = _steps(chief_after)
    train_at = {e["step"]: e["loss"] for e in _steps(first)}
    out: dict[str, Any] = {
        "probe_loss_step0": start["probe_loss"],
        "probe_loss_at_backup": backup["probe_loss"] if backup else None,
        "probe_loss_after_restore": restored["probe_loss"],
        "train_loss_step1": train_at.get(1),
        "train_loss_at_backup": train_at.get(restored_step or 0),
        "train_loss_first_after_restore": after_steps[0]["loss"] if after_steps else None,
    }
    after = restored["probe_loss"]
    if backup is None:  # nothing was backed up before the fault: a restart from scratch
        out["continues"] = restored_step == 0
        out["reason"] = "no backup before the fault: training started again from step 0"
        return out
    out["continues"] = abs(after - backup["probe_loss"]) < abs(after - start["probe_loss"])
    out["restored_exactly"] = abs(after - backup["probe_loss"]) <= 1e-6 * max(1.0, abs(after))
    return out


def timeline(*, fault: FaultConfig, at_step: int, injector: FaultInjector, warmup: int,
             chief: str, events: dict[int, dict[str, list[dict[str, Any]]]],
             restarted_at: float | None, detected_by_supervisor: float | None,
             strategy: str) -> dict[str, Any]:
    """The record's `recovery` section from the events of every attempt (attempt -> task name
    -> events) and the supervisor's own times. Missing phases are None: a recovery that did not
    complete keeps the timeline so far."""
    whole = strategy_kind(strategy).recovers_by == "cluster"  # else the lost task alone
    first = events.get(1, {}).get(chief, [])
    later = events.get(2 if whole else 1, {})
    chief_after = later.get(chief, [])
    injected = injector.injected_at
    # MultiWorkerMirrored: every step of the first attempt came before the loss (a task that
    # survives a SIGTERM trains on until its SIGKILL); the coordinator goes on through it.
    before = [e for e in _steps(first) if injected is None or e["t"] <= injected or whole]
    error = _first(first, "error")
    if whole:
        ready = [_first(evs, "ready") for evs in later.values()]
        cluster_up = (max(e["t"] for e in ready if e) if ready and all(ready) else None)
        restored = _first(chief_after, "restored")
        restored_step = restored["step"] if restored else None
        after = _steps(chief_after)
    else:  # parameter server: the coordinator goes on; the lost worker is started again
        target = later.get(injector.target, [])
        restarted_ready = [e for e in target if e["event"] == "ready"
                           and injected is not None and e["t"] > injected]
        cluster_up = restarted_ready[0]["t"] if restarted_ready else None
        restored, restored_step = None, None
        after = [e for e in _steps(first) if injected is not None and e["t"] > injected]
    last_before = before[-1]["step"] if before else 0
    reference = _pre_fault_median(before, warmup)
    phases = {
        "fault_injected": injected,
        "detected": error["t"] if error else detected_by_supervisor,
        "restart_started": restarted_at,
        "cluster_back_up": cluster_up,
        "state_restored": restored["t"] if restored else None,
        "first_step_after_restore": after[0]["t"] if after else None,
        "back_to_speed": _back_to_speed(after, reference),
    }
    rel = {k: (v - injected if v is not None and injected is not None else None)
           for k, v in phases.items()}
    series = [{"attempt": 1, "step": e["step"], "t": e["t"], "dt": e["dt"], "loss": e["loss"]}
              for e in before]
    series += [{"attempt": 2 if whole else 1, "step": e["step"],
                "t": e["t"], "dt": e["dt"], "loss": e["loss"]} for e in after]
    backups = [e["step"] for e in first if e["event"] == "backup"]
    settled = [e["dt"] for e in after[1:]]  # the first step after a restore traces the step
    post = statistics.median(settled) if settled else None
    notes = []
    if phases["back_to_speed"] is None and post is not None and reference:
        notes.append(f"steps never came back within 5% of the pre-fault median "
                     f"({reference * 1e3:.1f} ms) before the end: the median after the fault "
                     f"was {post * 1e3:.1f} ms (x{post / reference:.2f})")
    if injector.escalated_at is not None:
        notes.append(f"{injector.target} survived {fault.signal} and was sent SIGKILL "
                     f"{injector.escalated_at - (injected or 0):.1f} s later")
    if not whole and injected is not None and cluster_up is None:
        notes.append("the run ended before the restarted worker was back: the coordinator "
                     "finished the steps on the remaining workers")
    return {
        "fault": {"task": fault.kill.task, "signal": fault.signal, "at_step": at_step,
                  "sigkill_after_s": (injector.escalated_at - injected
                                      if injector.escalated_at and injected else None),
                  "injected_at_step": injector.injected_step, "backup_every": fault.backup_every,
                  "pid": injector.pid},
        "detected_by": "chief" if error else ("supervisor" if detected_by_supervisor else None),
        "chief_error": {"type": error["type"], "message": error["message"]} if error else None,
        "timeline": phases,
        "timeline_s": rel,  # seconds after the fault
        "time_to_recover_s": rel["first_step_after_restore"],
        "time_to_speed_s": rel["back_to_speed"],
        "pre_fault_median_s": reference,
        "post_fault_median_s": post,
        "last_step_before_fault": last_before,
        "last_backup_before_fault": max((b for b in backups if b <= last_before), default=0),
        "restored_step": restored_step,
        "steps_redone": (last_before - restored_step) if restored_step is not None else (
            0 if not whole and after else None),
        "continuity": (_continuity(first, chief_after, restored_step)
                       if whole else _continuity_ps(before, after)),
        "series": series,
        "notes": notes,
    }


def complete(recovery: dict[str, Any], strategy: str) -> str | None:
    """Why a recovery is incomplete, or None when every phase up to the first step after the
    restore happened (back-to-speed may not, within a short run: that is a finding). A
    parameter-server run goes on without the lost worker, and may end before it is back."""
    whole = strategy_kind(strategy).recovers_by == "cluster"
    needed = [k for k in ("fault_injected", "cluster_back_up", "state_restored",
                          "first_step_after_restore")
              if whole or k not in ("cluster_back_up", "state_restored")]
    missing = [k for k in needed if recovery["timeline"][k] is None]
    return f"recovery incomplete: no {', '.join(missing)}" if missing else None
