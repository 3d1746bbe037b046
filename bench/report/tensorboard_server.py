"""TensorBoard over one or more run directories, on 127.0.0.1 only, in a process group of its own.

TensorBoard runs as a child process (`python -m tensorboard.main`), not inside bench: its profile
plugin imports TensorFlow, which the parent never does. The child leads its own process group and
is ended by group id (bench.launch.groups.end_groups), so nothing it starts outlives the command.

One run is served as `--logdir RUN_DIR/traces`, so TensorBoard's runs are the variant ids. Several
runs are served through a temporary folder of symbolic links named after the runs, so the runs
read `<run name>/<variant>` and the profile plugin (which needs one logdir) still works.

Nothing outlives the command, SIGKILL included: the child gets SIGKILL when bench dies
(`die_with_parent`, PR_SET_PDEATHSIG), and the temporary folder, named after bench's pid, is
removed by `stop()` or, after a SIGKILL, by the next `bench tensorboard` (`remove_stale_folders`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench.entrypoints import TENSORBOARD, command
from bench.errors import BenchError
from bench.launch.groups import die_with_parent, end_groups
from bench.trace.serve import HOST, TRACES_DIR

FOLDER_PREFIX = "bench-tensorboard-"  # then the pid of the bench that made it, and a suffix

_URL = re.compile(r"TensorBoard \S+ at (http://127\.0\.0\.1:(\d+)/)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def remove_stale_folders(root: Path | None = None) -> list[Path]:
    """Remove the temporary folders of `bench tensorboard`s that are gone (SIGKILLed: nothing
    of theirs ran to remove it); a folder of a live one, or of another user, is kept."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    for folder in root.glob(f"{FOLDER_PREFIX}*"):
        pid = folder.name.removeprefix(FOLDER_PREFIX).split("-", 1)[0]
        try:
            mine = folder.is_dir() and not folder.is_symlink() and \
                folder.stat().st_uid == os.getuid()
        except OSError:
            continue
        if mine and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def link_runs(run_dirs: list[Path], into: Path) -> None:
    """`into/<run name>` → each run's traces folder (a suffix keeps equal names apart)."""
    used: set[str] = set()
    for run_dir in run_dirs:
        name, n = run_dir.resolve().name, 1
        while name in used:
            n += 1
            name = f"{run_dir.resolve().name}-{n}"
        used.add(name)
        (into / name).symlink_to((run_dir / TRACES_DIR).resolve(), target_is_directory=True)


class TensorBoardServer:
    """`tensorboard` for `run_dirs` at http://127.0.0.1:<free port>/ until `stop()` (idempotent).

    Raises BenchError (one line, with TensorBoard's last words) when it exits or prints no URL
    within `start_timeout` seconds.
    """

    def __init__(self, run_dirs: list[Path], port: int = 0, start_timeout: float = 120.0) -> None:
        remove_stale_folders()
        self._tmp = tempfile.TemporaryDirectory(prefix=f"{FOLDER_PREFIX}{os.getpid()}-")
        tmp = Path(self._tmp.name)
        if len(run_dirs) == 1:
            logdir = run_dirs[0] / TRACES_DIR
        else:
            logdir = tmp / "runs"
            logdir.mkdir()
            link_runs(run_dirs, logdir)
        self.log_path = tmp / "tensorboard.log"
        args = ["--logdir", str(logdir), "--host", HOST, "--port", str(port),
                "--load_fast", "false"]  # no extra data-server process with its own port
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(command(TENSORBOARD, *args), stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=env, start_new_session=True,
                                          preexec_fn=functools.partial(die_with_parent,
                                                                       os.getpid()))
        self.pid = self._proc.pid
        self._stopped = False
        try:
            self.url, self.port = self._wait_for_url(start_timeout)
        except BaseException:
            self.stop()
            raise

    def _log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def _wait_for_url(self, timeout: float) -> tuple[str, int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found := _URL.search(self._log()):
                return found.group(1), int(found.group(2))
            if self._proc.poll() is not None:
                break
            time.sleep(0.2)
        lines = [line for line in self._log().splitlines() if line.strip()]
        why = lines[-1].strip() if lines else "no output"
        state = (f"exited with code {self._proc.returncode}" if self._proc.poll() is not None
                 else f"printed no URL within {timeout:g} s")
        raise BenchError(f"tensorboard {state}: {why}")

    @property
    def alive(self) -> bool:
        return not self._stopped and self._proc.poll() is None

    def wait(self, timeout: float | None = None) -> None:
        """Block until TensorBoard exits (or `timeout`)."""
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def stop(self) -> None:
        """End TensorBoard's whole process group, reap it, remove the temporary folder."""
        if self._stopped:
            return
        self._stopped = True
        end_groups([self._proc])
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._tmp.cleanup()

    def __enter__(self) -> TensorBoardServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
