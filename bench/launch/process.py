"""Start a worker process in its own session and always tear its whole process group down.

A TensorFlow worker may hang forever (a collective waiting for a peer that never comes), so the
parent's wall-clock budget plus `os.killpg` is the only reliable guard. The group is killed on
timeout, on any exception in the parent (including Ctrl-C), and after a normal exit, so no
grandchild survives the variant.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from bench.launch.groups import die_with_parent, end_groups
from bench.protocol import ProgressFn, parse_gate, parse_progress

if TYPE_CHECKING:
    from bench.launch.forkserver import ForkServer

# How long close() waits for the reader to copy the last of the output into the log.
READER_GRACE_S = 10.0


@dataclass(frozen=True)
class Outcome:
    returncode: int | None
    timed_out: bool
    duration_s: float


class WorkerProcess:
    """One child process: stdout progress lines go to `on_progress`, gate announcements to
    `on_gate`, everything else to the log.

    With `new_session` (the default) the child leads its own process group, which is killed as a
    whole. Without it the child stays in its parent's group (so killing the parent's group takes
    it too) and dies with its parent; `dies_with_parent` makes a child in its own group die with
    its parent too (a forked child dies with its fork server).
    """

    def __init__(self, cmd: list[str], env: dict[str, str], log_path: Path,
                 on_progress: ProgressFn | None = None, new_session: bool = True,
                 forkserver: ForkServer | None = None,
                 on_gate: Callable[[str, int], None] | None = None,
                 dies_with_parent: bool = False) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab", buffering=0)
        self._on_progress = on_progress
        self._on_gate = on_gate
        self._own_group = new_session
        self.started = time.monotonic()
        self.start_method = "spawn"
        self.fork_problem: str | None = None  # why a fork was asked for and not used
        self.popen: Any = None
        # when its stdout closed (time.monotonic()): the process ended then, whenever the parent
        # looks; None while it runs
        self.output_ended_at: float | None = None
        self._closing = False
        if forkserver is not None and new_session:
            self.popen = self._fork(forkserver, cmd, env)
        if self.popen is None:
            self.popen = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=self._log,
                                          start_new_session=new_session,
                                          preexec_fn=(die_with_parent if dies_with_parent
                                                      or not new_session else None))
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _fork(self, forkserver: ForkServer, cmd: list[str], env: dict[str, str]) -> Any:
        """A child forked from the pre-imported server, or None (then a fresh interpreter)."""
        from bench.launch.forkserver import ForkServerError

        if cmd[:2] != [forkserver.python, "-m"]:  # another environment's, or no python at all
            self.fork_problem = f"not a `{forkserver.python} -m` command: {cmd[0]}"
            return None
        read_end, write_end = os.pipe()
        reader = os.fdopen(read_end, "rb")
        try:
            child = forkserver.spawn(cmd[2], cmd[3:], env, write_end, self._log.fileno(), reader)
        except ForkServerError as exc:
            reader.close()
            self.fork_problem = str(exc)
            return None
        finally:
            os.close(write_end)
        self.start_method = "forkserver"
        return child

    def _pump(self) -> None:
        assert self.popen.stdout is not None
        try:
            self._copy_output()
        finally:
            self.output_ended_at = time.monotonic()
            if self._closing:  # close() left the log to this thread, still writing then
                self._log.close()

    def _copy_output(self) -> None:
        assert self.popen.stdout is not None
        for raw in self.popen.stdout:
            line = raw.decode(errors="replace")
            if (progress := parse_progress(line)) is not None:
                if self._on_progress is not None:
                    self._on_progress(*progress)
            elif (gate := parse_gate(line)) is not None and self._on_gate is not None:
                self._on_gate(*gate)
            else:
                self._log.write(raw)

    def wait(self, timeout_s: float) -> Outcome:
        try:
            code: int | None = self.popen.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            code, timed_out = None, True
        self.kill()
        return Outcome(code, timed_out, time.monotonic() - self.started)

    def kill(self, grace_s: float = 3.0) -> None:
        if self._own_group:
            end_groups([self.popen], grace_s)
        elif self.popen.poll() is None:
            self.popen.kill()

    def join_output(self, timeout_s: float = 0.5) -> None:
        """Wait (briefly) until everything the ended process wrote has been read."""
        self._reader.join(timeout=timeout_s)

    def close(self) -> None:
        """End the process group and close the log once everything the process wrote is in it.
        With the group gone its output ends at once; the reader may still be busy (a slow
        progress callback, a loaded machine), so it gets READER_GRACE_S, and past that it closes
        the log itself when its last line is written (an escaped grandchild holding the pipe)."""
        self.kill(grace_s=1.0)
        self.popen.wait()
        self._closing = True
        self._reader.join(timeout=READER_GRACE_S)
        if not self._reader.is_alive():
            self._log.close()

    @staticmethod
    def close_all(procs: Sequence[WorkerProcess], grace_s: float = 1.0) -> None:
        """Close several processes given one grace between them, not one each."""
        end_groups([proc.popen for proc in procs if proc._own_group], grace_s)
        for proc in procs:
            proc.close()

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


# A glog FATAL line (XLA's, TensorFlow's), "F1202 07:31:02.123456 1234 rendezvous.cc:161] ...":
# the line a process that aborts on a failed check leaves last but its stack.
_FATAL_LOG = re.compile(r"^F\d{4} [\d:.]+\s+\d+ (?=\S+\] )")


def last_error_line(log_path: Path, max_bytes: int = 64_000, errors_only: bool = False) -> str:
    """The most telling line of a worker's log: the last exception line, else (unless
    `errors_only`) the last line."""
    try:
        with open(log_path, "rb") as fh:
            fh.seek(max(0, log_path.stat().st_size - max_bytes))
            lines = [ln.strip() for ln in fh.read().decode(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [ln for ln in lines if ln]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception")) or head in ("Killed", "Segmentation fault"):
            return line[:500]
        if _FATAL_LOG.match(line):  # XLA's or TensorFlow's fatal check, before it aborts
            return _FATAL_LOG.sub("", line)[:500]
    return lines[-1][:500] if lines and not errors_only else ""
