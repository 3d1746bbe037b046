"""SIGTERM handled as Ctrl-C is, for the commands that start workers, and a teardown that runs
to its end.

A CI job that is cancelled, a `timeout`, or a plain `kill` sends SIGTERM. Python's default for it
ends the runner at once, skipping every `finally`, and leaves the workers (each in a process
group of its own) running with no parent. Raised as KeyboardInterrupt instead (`Terminated`, so
the run can say which signal ended it), it takes the Ctrl-C path: the workers' process groups
are ended and the finished records kept.

The first signal starts the teardown; a second Ctrl-C or SIGTERM (an impatient user, a CI
runner that signals twice) is ignored until the block ends, so the teardown is never cut short
half-way: workers left running, scratch folders left behind.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

# SIGHUP too: a closed terminal ends the command as Ctrl-C does (`nohup`, which ignores it, keeps
# it ignored).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, taken as Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def signal_name(interrupt: KeyboardInterrupt) -> str:
    """The signal that raised `interrupt`."""
    return signal.Signals(interrupt.signum).name if isinstance(interrupt, Terminated) else "SIGINT"


def _interrupt(signum: int, frame: FrameType | None) -> None:
    ignore_interrupts()
    raise Terminated(signum) if signum != signal.SIGINT else KeyboardInterrupt()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def ignore_interrupts() -> None:
    """SIGINT, SIGTERM and SIGHUP ignored until the enclosing `terminate_as_interrupt` block ends
    (outside one, until the process ends): a teardown under way runs to its end."""
    if _main_thread():
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt (Terminated) in the block, the first of
    them only; the handlers before it are restored after it. A SIGINT or SIGHUP ignored on entry
    (a background job of a non-interactive shell, `nohup`) stays ignored."""
    if not _main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    for sig in SIGNALS:
        if previous[sig] is not signal.SIG_IGN or sig == signal.SIGTERM:
            signal.signal(sig, _interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
