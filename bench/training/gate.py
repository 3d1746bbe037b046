"""The worker's side of the gate: wait, idle, until the parent releases the next segment.

The runner interleaves the timed windows of all live variants in shuffled rounds, so a slow
spell of a shared machine lands on every variant alike instead of on whichever ran during it.
Between segments a worker announces the segment it will run next and blocks on its FIFO; it
runs nothing meanwhile, so the one variant released has the machine to itself. Without a FIFO
(`--no-interleave`, or a worker started by hand) every wait returns at once.
"""

from __future__ import annotations

import os
import select
import sys
import time

from bench import protocol
from bench.child_env import ChildEnv


class GateTimeout(RuntimeError):
    """The parent did not release the worker within its budget: it is gone or stuck."""


class Gate:
    def __init__(self, path: str | None, timeout_s: float) -> None:
        # O_RDWR: opening never blocks, and the FIFO never reads as closed between releases.
        self._fd = os.open(path, os.O_RDWR) if path else None
        self._timeout_s = timeout_s
        self.waited_s = 0.0  # time spent idle at the gate, outside every measurement
        self.waited_by_segment: dict[str, float] = {}

    @property
    def interleaved(self) -> bool:
        return self._fd is not None

    def wait(self, segment: str, index: int = 0) -> None:
        """Announce `segment` and block until the parent says go (at once without a FIFO)."""
        if self._fd is None:
            return
        started = time.perf_counter()
        protocol.emit(protocol.format_gate(segment, index))
        sys.stderr.flush()
        readable, _, _ = select.select([self._fd], [], [], self._timeout_s)
        if not readable:
            raise GateTimeout(f"not released for {segment} {index} within {self._timeout_s:g} s")
        if os.read(self._fd, len(protocol.GO)) != protocol.GO:
            raise GateTimeout(f"unexpected message at the gate before {segment} {index}")
        waited = time.perf_counter() - started
        self.waited_s += waited
        self.waited_by_segment[segment] = self.waited_by_segment.get(segment, 0.0) + waited

    @classmethod
    def from_env(cls, timeout_s: float) -> Gate:
        return cls(ChildEnv.from_env().gate or None, timeout_s)
