"""Process groups: how bench makes sure no process it started outlives its purpose.

Every worker, task and server leads its own process group (or dies with its parent), and is
ended by group id, never by name: `kill_group` for the parent's teardown, `die_with_parent` in
children that must not outlive a supervisor.
"""

from __future__ import annotations

import os
import signal
import time


def kill_group(pid: int, grace_s: float = 3.0) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after `grace_s`."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def die_with_parent() -> None:
    """In the child: get SIGKILL when the parent dies, so no task outlives its supervisor."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
