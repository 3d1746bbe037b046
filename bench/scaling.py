"""Scaling efficiency: throughput(n) / (n × throughput(1)) within one run, labelled weak or strong.

The 1-replica reference is the variant of the same strategy that differs only in replica count
(same API, precision, cross-device ops, dataset distribution and batch): weak scaling keeps the
per-replica batch, strong scaling keeps the global batch.
"""

from __future__ import annotations

from typing import Any

from bench.axes import variant_key
from bench.records import counts_as_variant, headline


def replicas_of(rec: dict[str, Any]) -> int:
    """Replicas that really ran (MultiWorkerMirrored on CPU has one per worker, whatever planned)."""
    return int((rec.get("effective") or rec["variant"])["replicas"])


def group_key(variant: dict[str, Any]) -> tuple[Any, ...]:
    """Variants that differ only in replica count share a key: one scaling curve."""
    scaled_batch = "global_batch" if variant["batch_rule"] == "weak" else "per_replica_batch"
    return variant_key(variant, without=("replicas", "workers", "devices_per_worker", scaled_batch))


def add_scaling_efficiency(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return copies of the records with `scaling_efficiency` and `scaling_kind` filled in."""
    reference: dict[tuple[Any, ...], float] = {}
    replica_counts: dict[tuple[Any, ...], set[int]] = {}
    for rec in records:
        variant = rec.get("variant") or {}
        if rec.get("status") != "ok" or not counts_as_variant(rec):
            continue
        replica_counts.setdefault(group_key(variant), set()).add(replicas_of(rec))
        if replicas_of(rec) == 1:
            reference[group_key(variant)] = headline(rec)
    # Efficiency needs a sweep: a group measured at one replica count has nothing to compare.
    reference = {k: v for k, v in reference.items() if len(replica_counts[k]) > 1}
    out = []
    for rec in records:
        rec = dict(rec)
        variant = rec.get("variant") or {}
        base = reference.get(group_key(variant)) if variant else None
        if rec.get("status") == "ok" and base and counts_as_variant(rec):
            n = replicas_of(rec)
            rec["scaling_efficiency"] = headline(rec) / (n * base)
            rec["scaling_kind"] = variant["batch_rule"]
        else:
            rec["scaling_efficiency"] = None
            rec["scaling_kind"] = None
        out.append(rec)
    return out
