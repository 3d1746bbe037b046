"""A `bench` command started at the session's start and waited for by the tests that need it.

For set-up that is mostly one process's work, such as an [environment] build (a minute and more
of pip): it runs beside the tests before its first user instead of holding them up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


class BackgroundBench:
    """`python -m bench ARGS` in its own process group, its output kept in files in `folder`."""

    def __init__(self, args: list[str], folder: Path, cwd: Path) -> None:
        self.started = time.monotonic()
        self._out, self._err = folder / "stdout.txt", folder / "stderr.txt"
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        with self._out.open("w") as out, self._err.open("w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "bench", *args], stdout=out,
                                         stderr=err, stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                                         start_new_session=True)

    def result(self, timeout: float) -> subprocess.CompletedProcess[str]:
        """The finished command, as subprocess.run gives it; stopped and raised past `timeout`."""
        try:
            self.proc.wait(timeout=max(0.0, timeout - (time.monotonic() - self.started)))
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode,
                                           self._out.read_text(), self._err.read_text())

    def stop(self) -> None:
        """End the command's process group if it still runs (the session ends or gave up)."""
        if self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
