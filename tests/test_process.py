"""Process-group control: budgets kill the whole group, progress lines are parsed, errors found."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.launch.groups import end_groups
from bench.launch.process import WorkerProcess, last_error_line
from bench.protocol import format_progress, parse_progress

HANG_WITH_GRANDCHILD = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1], "w").write(str(child.pid))
print("@@bench-progress 3 10", flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); treat it as gone
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    seen: list[tuple[int, int]] = []
    cmd = [sys.executable, "-c", HANG_WITH_GRANDCHILD, str(pid_file)]
    with WorkerProcess(cmd, dict(os.environ), tmp_path / "w.log", lambda d, t: seen.append((d, t))
                       ) as proc:
        outcome = proc.wait(timeout_s=3)
    assert outcome.timed_out and outcome.returncode is None
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(grandchild)
    assert not alive(proc.popen.pid)
    assert seen == [(3, 10)]


IGNORES_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \
                  "print('ready', flush=True); time.sleep(600)"


def test_a_group_that_ends_on_sigterm_is_not_waited_out() -> None:
    """Its leader, exited but not yet reaped, must not keep the group alive for the grace."""
    grace_s = 60.0  # what waiting it out would take at least
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    started = time.monotonic()
    end_groups([proc], grace_s=grace_s)
    assert time.monotonic() - started < grace_s
    assert proc.wait(timeout=5) == -signal.SIGTERM


def test_groups_that_outlive_sigterm_share_one_grace() -> None:
    procs = [subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], start_new_session=True,
                              stdout=subprocess.PIPE) for _ in range(2)]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    grace_s = 4.0
    started = time.monotonic()
    end_groups(procs, grace_s=grace_s)
    # the grace once: a grace for each group would take at least two of them
    assert grace_s <= time.monotonic() - started < 2 * grace_s
    assert [proc.wait(timeout=5) for proc in procs] == [-signal.SIGKILL] * 2


def test_normal_exit_keeps_the_log(tmp_path: Path) -> None:
    # stderr goes to the log straight, stdout through the parent's pump: a line the child writes
    # in two pieces (print writes its newline apart) may take a stdout line between them, so the
    # error line is written whole, as a traceback's last line is
    code = ("import sys; print('hello', flush=True); sys.stderr.write('ValueError: bad thing\\n');"
            " sys.exit(3)")
    log = tmp_path / "w.log"
    with WorkerProcess([sys.executable, "-c", code], dict(os.environ), log) as proc:
        outcome = proc.wait(timeout_s=30)
    assert outcome.returncode == 3 and not outcome.timed_out
    assert "hello" in log.read_text()
    assert last_error_line(log) == "ValueError: bad thing"


def test_output_behind_a_slow_progress_callback_still_reaches_the_log(tmp_path: Path) -> None:
    """The reader is still in a progress callback when the process has ended: close() waits for
    it, and the line after the progress line is in the log."""
    code = (f"print({format_progress(1, 2)!r}, flush=True); print('after the progress line', "
            "flush=True)")
    log = tmp_path / "w.log"

    def slow(done: int, total: int) -> None:
        time.sleep(3.0)

    with WorkerProcess([sys.executable, "-c", code], dict(os.environ), log,
                       on_progress=slow) as proc:
        assert proc.wait(timeout_s=30).returncode == 0
    assert "after the progress line" in log.read_text()


def test_progress_protocol_round_trip() -> None:
    assert parse_progress(format_progress(7, 40)) == (7, 40)
    assert parse_progress("2026 some tensorflow log line") is None
    assert parse_progress("@@bench-progress x y") is None
