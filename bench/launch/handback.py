"""How every launcher takes the record its process left, and says why there is none.

A worker (or a cluster's supervisor, or a Slurm job's chief) writes its record to a file by
rename; the launcher takes it (reads and removes it) once it is there. A process that ended
without one, or ran out of its budget, gets a failed record from its launcher, with one reason
line and the last error line of its log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.launch.process import last_error_line
from bench.record.model import VariantRecord
from bench.scenario.schema import Variant


def take_record(path: Path) -> VariantRecord | None:
    """The record a process wrote to `path`, read and removed; None while there is none."""
    if not path.exists():
        return None
    record = VariantRecord.read(path)
    path.unlink()
    return record


def timed_out(budget_s: float, how: str) -> str:
    """The one timeout reason: the budget, and how the launcher ended the process (`how`)."""
    return f"timed out after {budget_s:g} s (measure.timeout_s){how}"


def no_record(variant: Variant, log: Path, reason: str, kind: str,
              **error: Any) -> VariantRecord:
    """The failed record of a process that left none: `reason`, an error of `kind` with the
    log's last error line (unless `error` gives the message) and where the log is."""
    return VariantRecord.failed(variant, reason, **{
        "type": kind, "message": last_error_line(log), "log": str(log), **error})
