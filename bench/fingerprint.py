"""Environment fingerprint of the parent process, gathered without importing TensorFlow.

TensorFlow's and Keras's versions come from package metadata here; each worker adds what only a
live TensorFlow can tell (devices, the versions it really imported) to its own record.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import entrypoints

_PACKAGES = ("tensorflow", "tensorflow-cpu", "tf-keras", "keras", "numpy", "pandas", "bench")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def package_versions() -> dict[str, str]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def git_commit(path: Path) -> str | None:
    """The commit of the checkout holding `path`, with '+dirty' when it has local changes."""
    try:
        commit = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def environment(scenario_digest: str | None = None) -> dict[str, Any]:
    return {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
        "git_commit": git_commit(Path(__file__).resolve().parent),
        "scenario_digest": scenario_digest,
    }


def probe_in_subprocess(timeout_s: float = 120.0) -> dict[str, Any]:
    """Probe devices in a child; on failure return the reason instead of raising."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    try:
        out = subprocess.run(entrypoints.command(entrypoints.DEVICE_PROBE), capture_output=True,
                             text=True, timeout=timeout_s, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"error": f"device probe timed out after {timeout_s:g} s"}
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"device probe failed: {tail}"}
    return json.loads(out.stdout.strip().splitlines()[-1])
