"""How a failure is told in a record: the line of an error text that says what happened, the
`error` section of an exception, and an extra figure or check that could not be computed."""

from __future__ import annotations

import re
import traceback
from typing import Any

_GENERIC_LINES = ("Graph execution error:", "Detected at node", "File \"", "Stack trace",
                  "in user code:", "return ", "raise ",
                  "[[", "Traceback", "Function call stack", "Detected unsupported operations")


_NESTED_ERROR = re.compile(r"^\s*[A-Za-z_][\w.]*(?:Error|Exception): (.+)$", re.MULTILINE)


def informative_line(text: str) -> str:
    """The line of an error text that says what happened.

    TensorFlow's errors open with boilerplate ("Graph execution error:", a node's stack trace);
    the cause ("...stopped sending heartbeats: /job:worker/replica:0/task:1") comes later. A line
    ending in ':' is joined with the next, which usually names the task or op it introduces.
    """
    nested = _NESTED_ERROR.findall(text)  # autograph re-raises with the real error at the end
    if nested:
        return nested[-1].strip()[:500]
    lines = [ln.strip() for ln in text.splitlines()]
    for i, line in enumerate(lines):
        if not line or line.startswith(_GENERIC_LINES) or line.startswith(("<", "@")):
            continue
        if line.endswith(":") and i + 1 < len(lines) and lines[i + 1]:
            line = f"{line} {lines[i + 1]}"
        return line[:500]
    return (lines[0] if lines else "")[:500]


def error_from_exception(exc: BaseException, **extra: Any) -> dict[str, Any]:
    """Keep the one-line cause for tables and the full traceback for whoever digs deeper."""
    return {
        "type": type(exc).__name__,
        "message": informative_line(str(exc)),
        "traceback": "".join(traceback.format_exception(exc))[-8000:],
        **extra,
    }


def extra_failed(exc: Exception) -> dict[str, Any]:
    """An extra figure or check that could not be computed: reported, never the variant's fate."""
    return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
