"""A `[fault]` variant's fault, injected: the signal sent to the target task once it reports its
step, escalated to SIGKILL when the task survives a SIGTERM, and the chief given its time to see
the loss. The supervisor (bench.launch.supervisor) drives it; what the tasks did across the fault
is read by bench.launch.recovery_timeline. Pure: no TensorFlow.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.protocol import read_events
from bench.scenario.fault import FaultConfig

DETECT_S = 30.0  # how long the chief may take to see the lost peer before the restart anyway
# A task that survives SIGTERM (TensorFlow's preemption notifier catches it in a cluster task) is
# sent SIGKILL this long after, as a job controller does once its grace period is over.
TERM_GRACE_S = 1.0


@dataclass
class FaultInjector:
    """Sends the fault's signal to the target task once it reports reaching `at_step`."""

    fault: FaultConfig
    at_step: int
    target: str  # the task's name (Task.name), e.g. "worker-1"
    watched: str  # whose steps count: the target's, or the chief's when the target only serves
    steps: dict[str, int] = field(default_factory=dict)  # task name -> last step it reported
    injected_at: float | None = None
    injected_step: int | None = None
    pid: int | None = None
    escalated_at: float | None = None  # SIGKILL after a SIGTERM the task survived

    def _alive(self) -> bool:
        try:  # a zombie (dead, not yet reaped by its Popen) is not alive
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    def _escalate(self) -> None:
        """SIGKILL a task still alive TERM_GRACE_S after its SIGTERM, as a job controller does
        at the end of its grace period."""
        assert self.injected_at is not None and self.pid is not None
        if (self.fault.signal == "SIGTERM" and self.escalated_at is None
                and time.time() - self.injected_at >= TERM_GRACE_S and self._alive()):
            self.escalated_at = time.time()
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def on_progress(self, task: str, done: int) -> None:
        self.steps[task] = done

    def poll(self, pids: dict[str, int]) -> bool:
        """Inject if due; True when the fault has been injected (now or before)."""
        if self.injected_at is not None:
            self._escalate()
            return True
        if self.steps.get(self.watched, 0) < self.at_step:
            return False
        self.pid = pids[self.target]
        self.injected_step = self.steps[self.watched]
        self.injected_at = time.time()
        try:
            os.kill(self.pid, getattr(signal, self.fault.signal))
        except ProcessLookupError:
            pass
        return True


def await_detection(chief_events: Path, chief: Any, deadline: float) -> None:
    """Give the chief the time to see the lost peer: its `error` event, or its exit (`chief` is
    its Popen), within DETECT_S and the budget's monotonic `deadline`."""
    until = min(deadline, time.monotonic() + DETECT_S)
    while time.monotonic() < until and chief.poll() is None:
        if any(e["event"] == "error" for e in read_events(chief_events)):
            return
        time.sleep(0.05)
