"""The shape of a variant record, shared by workers (ok/skipped/failed) and the parent (crash, timeout).

Keeping one constructor means a record written by a dying worker's parent has the same keys as
one written by a healthy worker, so report and compare never special-case them.
"""

from __future__ import annotations

import traceback
from datetime import UTC, datetime
from typing import Any

from bench.scenario import Variant

STATUSES = ("ok", "skipped", "failed")


def base_record(variant: Variant, status: str = "failed") -> dict[str, Any]:
    return {
        "schema": 1,
        "variant_id": variant.id,
        "index": variant.index,
        "status": status,
        "reason": None,
        "error": None,
        "variant": variant.model_dump(mode="json", by_alias=True),
        "finished_at": None,
    }


def finish(record: dict[str, Any], status: str, reason: str | None = None,
           error: dict[str, Any] | None = None) -> dict[str, Any]:
    assert status in STATUSES
    record.update(status=status, reason=reason, error=error,
                  finished_at=datetime.now(UTC).isoformat(timespec="seconds"))
    return record


def error_from_exception(exc: BaseException, **extra: Any) -> dict[str, Any]:
    """Keep the one-line cause for tables and the full traceback for whoever digs deeper."""
    lines = str(exc).strip().splitlines()
    return {
        "type": type(exc).__name__,
        "message": (lines[0] if lines else "")[:500],
        "traceback": "".join(traceback.format_exception(exc))[-8000:],
        **extra,
    }


def failed(variant: Variant, reason: str, **error: Any) -> dict[str, Any]:
    return finish(base_record(variant), "failed", reason=reason, error=error or None)
