"""The "checkpoint cost" figures of a run (measure.checkpoint), read from its records.

One row per variant that was asked to save checkpoints: the median blocking time of a save, its
size on disk, one restore into a fresh model (and whether it gave back the saved weights), and
examples/s with saving on ÷ off from alternating blocks of the same process. Shared by the HTML
table and the terminal summary. No TensorFlow here.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.record.model import VariantRecord

COLUMNS = ("variant", "saved with", "every", "saves", "save ms (median)", "save ms (p95)",
           "size", "restore ms", "restored = saved", "throughput on ÷ off", "blocked %")


@dataclass(frozen=True)
class CheckpointRow:
    variant_id: str
    status: str  # ok, or why there is no figure (skipped / failed)
    api: str | None = None
    every: int | None = None
    saves: int | None = None
    save_ms: float | None = None
    save_p95_ms: float | None = None
    size_bytes: float | None = None
    restore_ms: float | None = None
    weights_match: bool | None = None
    ratio: float | None = None  # examples/s saving ÷ not saving (< 1: saving costs throughput)
    blocked_share: float | None = None  # of the saving blocks' time, spent waiting for saves
    reason: str = ""


def checkpoint_row(rec: VariantRecord) -> CheckpointRow | None:
    """The row of one record, or None when the variant saved no checkpoints."""
    cost = rec.checkpoint
    if cost is None or not cost.to_json():
        return None
    vid = str(rec.variant_id)
    if cost.status != "ok":
        return CheckpointRow(vid, str(cost.status), reason=str(cost.reason or cost.error or ""))
    restore, save_ms = cost.restore, cost.save_ms
    return CheckpointRow(
        vid, "ok", api=cost.api, every=cost.every, saves=cost.save_count,
        save_ms=save_ms.median if save_ms else None, save_p95_ms=save_ms.p95 if save_ms else None,
        size_bytes=cost.size_bytes, restore_ms=restore.ms if restore else None,
        weights_match=restore.weights_match if restore else None, ratio=cost.throughput_ratio,
        blocked_share=cost.blocked_share)


def checkpoint_rows(records: list[VariantRecord]) -> list[CheckpointRow]:
    return [row for rec in records if rec.ok and (row := checkpoint_row(rec)) is not None]


def format_size(size: float | None) -> str:
    if size is None:
        return "–"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size:.0f} B"


def describe(rows: list[CheckpointRow]) -> str | None:
    """One summary line: the variant whose throughput checkpointing cost most."""
    measured = [r for r in rows if r.ratio is not None]
    if not measured:
        return None
    worst = min(measured, key=lambda r: r.ratio or 0.0)
    mismatched = [r.variant_id for r in measured if r.weights_match is False]
    line = (f"Checkpoints: saving cost most on {worst.variant_id} (examples/s ×{worst.ratio:.2f} "
            f"with saving every {worst.every} steps; a save blocks {worst.save_ms:.0f} ms, "
            f"{format_size(worst.size_bytes)}).")
    if mismatched:
        line += f" A restore did not give back the saved weights: {', '.join(mismatched)}."
    return line
