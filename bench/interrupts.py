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

An interrupted run says so in its run directory: INTERRUPTED_FILE, with the signal and how many
of its variants had finished, which the report and `bench report` show.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

# SIGHUP too: a closed terminal ends the command as Ctrl-C does (`nohup`, which ignores it, keeps
# it ignored).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
INTERRUPTED_FILE = "interrupted.json"


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


def interruptible(work: Callable[[], object]) -> str | None:
    """Run `work` where a signal interrupts it: the signal's name if one did, else None."""
    with terminate_as_interrupt():
        try:
            work()
        except KeyboardInterrupt as interrupt:
            return signal_name(interrupt)
    return None


def mark_interrupted(run_dir: Path, signal_name: str, finished: int, planned: int) -> str:
    """Mark the run as interrupted by `signal_name` after `finished` of its `planned` variants;
    what to tell the user. A mark that cannot be written costs nothing measured."""
    from bench.errors import BenchError
    from bench.results import write_json

    try:
        write_json(run_dir / INTERRUPTED_FILE, {
            "signal": signal_name, "finished": finished, "planned": planned,
            "at": datetime.now(UTC).isoformat(timespec="seconds")})
        written = ""
    except (BenchError, OSError) as exc:
        written = f" ({INTERRUPTED_FILE} not written: {exc})"
    return (f"interrupted ({signal_name}) after {finished} of {planned} variants: kept the "
            f"finished records in {run_dir}{written}")


def interrupted_note(run_dir: Path) -> str | None:
    """"interrupted (SIGINT) after 3 of 12 variants" for a run that was, else None."""
    from bench.errors import BenchError
    from bench.results import read_json

    path = run_dir / INTERRUPTED_FILE
    if not path.exists():
        return None
    try:
        mark = read_json(path)
        return (f"interrupted ({mark['signal']}) after {int(mark['finished'])} of "
                f"{int(mark['planned'])} variants")
    except (BenchError, OSError, ValueError, TypeError, KeyError, AttributeError):
        return f"interrupted (its {INTERRUPTED_FILE} is unreadable)"
