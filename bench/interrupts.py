"""SIGTERM handled as Ctrl-C is, for the commands that start workers.

A CI job that is cancelled, a `timeout`, or a plain `kill` sends SIGTERM. Python's default for it
ends the runner at once, skipping every `finally`, and leaves the workers (each in a process
group of its own) running with no parent. Raised as KeyboardInterrupt instead, it takes the
Ctrl-C path: the workers' process groups are ended and the finished records kept.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
