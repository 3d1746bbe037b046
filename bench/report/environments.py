"""Variants that differ only in their `[environment]`: what changed (TensorFlow 2.20.0 -> 2.21.0,
and any other package that moved) and what it did to throughput, for the terminal and the report.

The reference is the run's first environment (the scenario's first point, or the variants without
one beside an upgrade candidate); every other environment's variants are paired with their twins
in it. The ± is the 95% interval of the pair's headline ratio over the rounds both ran
(`bench.compare.noise.paired_difference`, as the noise floor is): interleaved windows of the two
ran moments apart, so drift of the machine cancels from the ratio.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.compare.noise import paired_difference, within_noise
from bench.record.model import VariantRecord
from bench.report.derived import axis_pairs

Record = VariantRecord
# How a change names a package; the TensorFlow distributions all read "TF".
NAMES = {"tensorflow": "TF", "tensorflow-cpu": "TF", "tf-nightly": "TF", "tf-nightly-cpu": "TF",
         "keras": "Keras", "tf-keras": "tf-keras", "numpy": "NumPy", "protobuf": "protobuf",
         "ml-dtypes": "ml-dtypes"}


def reference_environment(records: Sequence[Record]) -> str | None:
    """The label the others are compared with, when records name two environments or more (a
    run of variants without an environment beside an upgrade candidate: None is the reference)."""
    labels = list(dict.fromkeys(r.variant.axis("environment") for r in records))
    return labels[0] if len(labels) > 1 else None


def environment_pairs(records: Sequence[Record]) -> list[tuple[Record, Record]]:
    """(reference environment's record, other environment's record) pairs of ok records that
    differ in nothing but their environment (the run's controls left out)."""
    variants = [r for r in records if r.counts_as_variant]
    if len({r.variant.axis("environment") for r in variants}) < 2:
        return []
    return axis_pairs(variants, "environment", reference_environment(variants))


def _versions(record: Record) -> dict[str, str]:
    packages = (record.environment.packages if record.environment else None) or {}
    return {NAMES.get(name, name): version for name, version in packages.items()}


def changed(ref: Record, other: Record) -> str:
    """What differs between two records' environments: "TF 2.20.0 -> 2.21.0" and any other
    named package that moved (the Keras the variant does not use is left out); the labels
    when the records do not say."""
    before, after = _versions(ref), _versions(other)
    unused = "Keras" if ref.variant.axis("keras") == "tf_keras" else "tf-keras"
    moved = [f"{name} {before.get(name, '-')} -> {after.get(name, '-')}"
             for name in dict.fromkeys([*before, *after])
             if name != unused and before.get(name) != after.get(name)]
    if moved:
        return ", ".join(moved)

    def label(record: Record) -> str:
        return str(record.variant.axis("environment") or "this interpreter")
    return f"{label(ref)} -> {label(other)}"


def change(ref: Record, other: Record, floor: dict[str, Any] | None) -> dict[str, Any]:
    """The pair's headline ratio (other ÷ reference), the half-width of its 95% interval in
    percent (None without two rounds), and whether the run's noise floor could explain it."""
    diff = paired_difference(ref, other)
    ratio = 1.0 + diff["difference_pct"] / 100.0
    interval = diff["interval_pct"]
    return {"what": changed(ref, other), "ratio": ratio,
            "plus_minus_pct": (interval[1] - interval[0]) / 2.0 if interval else None,
            "within_noise": within_noise(ratio, floor)}


def describe(ref: Record, other: Record, floor: dict[str, Any] | None) -> str:
    """"TF 2.20.0 -> 2.21.0: ×0.97 ±2%", saying so when within the noise floor."""
    c = change(ref, other, floor)
    text = f"{c['what']}: ×{c['ratio']:.2f}"
    if c["plus_minus_pct"] is not None:
        text += f" ±{c['plus_minus_pct']:.0f}%"
    return text + (" (within the noise floor)" if c["within_noise"] else "")


def summary_line(records: Sequence[Record], floor: dict[str, Any] | None) -> str | None:
    """The report's sentence on the environments, one clause per pair; None without pairs."""
    pairs = environment_pairs(records)
    if not pairs:
        return None
    return ("Environments (examples/s of the same variant; ± the 95% interval over the rounds "
            "both ran): " + "; ".join(f"{ref.variant_id}: {describe(ref, other, floor)}"
                                       for ref, other in pairs) + ".")
