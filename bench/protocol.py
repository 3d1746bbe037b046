"""The tiny line protocol a worker uses on stdout to report progress to the parent.

Records travel as files (robust to TensorFlow's own chatter on stdout/stderr); only progress, which
must be live, uses the pipe.
"""

from __future__ import annotations

from collections.abc import Callable

# Where progress goes, on both sides of the pipe: (steps done, total steps).
ProgressFn = Callable[[int, int], None]

PROGRESS_PREFIX = "@@bench-progress "


def format_progress(done: int, total: int) -> str:
    return f"{PROGRESS_PREFIX}{done} {total}"


def parse_progress(line: str) -> tuple[int, int] | None:
    if not line.startswith(PROGRESS_PREFIX):
        return None
    try:
        done, total = line[len(PROGRESS_PREFIX):].split()
        return int(done), int(total)
    except ValueError:
        return None
