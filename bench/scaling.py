"""Scaling efficiency: throughput(n) / (n × throughput(1)) within one run, labelled weak or strong.

Throughput is the headline (THE examples/s, bench.record.model). The 1-replica reference is the
variant of the same strategy that differs only in replica count (same API, precision, cross-device
ops, dataset distribution and batch): weak scaling keeps the per-replica batch, strong scaling
keeps the global batch.
"""

from __future__ import annotations

from typing import Any

from bench.record.model import VariantRecord
from bench.record.variant import RecordedVariant


def replicas_of(rec: VariantRecord) -> int:
    """Replicas that really ran (MultiWorkerMirrored on CPU has one per worker, whatever planned)."""
    return int(rec.replicas or 0)


def group_key(variant: RecordedVariant) -> tuple[Any, ...]:
    """Variants that differ only in replica count share a key: one scaling curve."""
    scaled_batch = "global_batch" if variant.batch_rule == "weak" else "per_replica_batch"
    return variant.key(without=("replicas", "workers", "devices_per_worker", scaled_batch))


def _scaled(rec: VariantRecord) -> bool:
    return rec.ok and rec.counts_as_variant


def add_scaling_efficiency(records: list[VariantRecord]) -> list[VariantRecord]:
    """Return copies of the records with `scaling_efficiency` and `scaling_kind` filled in."""
    reference: dict[tuple[Any, ...], float] = {}
    replica_counts: dict[tuple[Any, ...], set[int]] = {}
    for rec in records:
        if not _scaled(rec):
            continue
        replica_counts.setdefault(group_key(rec.variant), set()).add(replicas_of(rec))
        if replicas_of(rec) == 1 and rec.headline is not None:
            reference[group_key(rec.variant)] = rec.headline
    # Efficiency needs a sweep: a group measured at one replica count has nothing to compare.
    reference = {k: v for k, v in reference.items() if len(replica_counts[k]) > 1}
    out = []
    for rec in records:
        base = reference.get(group_key(rec.variant)) if _scaled(rec) else None
        if base and rec.headline is not None:
            efficiency, kind = rec.headline / (replicas_of(rec) * base), rec.variant.batch_rule
        else:
            efficiency, kind = None, None
        out.append(rec.model_copy(update={"scaling_efficiency": efficiency,
                                          "scaling_kind": kind}))
    return out
