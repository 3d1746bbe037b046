"""Process groups: how bench makes sure no process it started outlives its purpose.

Every worker, task and server leads its own process group (or dies with its parent), and is
ended by group id, never by name: `end_groups` for the parent's teardown, `die_with_parent` in
children that must not outlive a supervisor.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from typing import Protocol


class Leader(Protocol):
    """A process group's leader as its parent holds it (`subprocess.Popen`, a forked child)."""

    pid: int

    def poll(self) -> int | None: ...


def end_groups(leaders: Sequence[Leader], grace_s: float = 3.0) -> None:
    """SIGTERM every leader's process group, then SIGKILL the groups still alive after
    `grace_s`: one grace for all of them (a cluster's tasks end together). Each leader is polled
    while waiting, which reaps it: an exited leader not yet reaped keeps its group alive."""
    pending = []
    for leader in leaders:
        try:
            os.killpg(leader.pid, signal.SIGTERM)
            pending.append(leader)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while pending and time.monotonic() < deadline:
        pending = [leader for leader in pending if _group_alive(leader)]
        if pending:
            time.sleep(0.02)
    for leader in pending:
        try:
            os.killpg(leader.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _group_alive(leader: Leader) -> bool:
    leader.poll()
    try:
        os.killpg(leader.pid, 0)
    except ProcessLookupError:
        return False
    return True


def die_with_parent(parent: int | None = None) -> None:
    """In the child: get SIGKILL when the parent dies, so no task outlives its supervisor. With
    the `parent` pid the child was started by, a parent that died before this call (its child
    then has another parent already) ends the child at once."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if parent is not None and os.getppid() != parent:
        os._exit(1)
