"""Failures that are facts about TensorFlow here, not about bench or the variant's code: recorded
as skips with their cause (as NCCL on CPU is), so a run says what cannot run rather than crash.

Only failures seen and understood are listed; anything else stays a failure with its error.
"""

from __future__ import annotations

import re

from bench.scenario.schema import Variant

# XLA compiles each replica's step for one device; the cross-replica variable update (the
# all-reduce's result applied to every replica's copy) then reads copies on the other devices.
_XLA_FOREIGN_RESOURCE = re.compile(r"Trying to access resource \S+ (?:\(defined @ [^)]*\) )?"
                                   r"located in device (\S+) from device (\S+)")
_XLA_CPU_COLLECTIVES = "Collectives are not yet implemented for CPU devices when compiling with XLA"
_XLA_UNSUPPORTED = re.compile(r"Detected unsupported operations when trying to compile graph "
                              r"\S+ on (\S+): (\w+)")


# Keras 3 fit's multi-step loop under Mirrored's default (collective) all-reduce (DESIGN.md).
_UNFED_PLACEHOLDER = re.compile(r"You must feed a value for placeholder tensor '[^']*cond/"
                                r"Placeholder")


def skip_reason(variant: Variant, exc: BaseException) -> str | None:
    """Why `exc` is a known limitation of this variant's configuration, or None."""
    text = str(exc)
    if (variant.api == "fit" and variant.train.steps_per_execution > 1
            and variant.kind.all_reduce == "cross_device_ops"  # in one process
            and variant.cross_device_ops == "auto"
            and variant.train.keras == "keras3" and _UNFED_PLACEHOLDER.search(text)):
        return ("Keras 3 fit with steps_per_execution > 1 under MirroredStrategy's default "
                "all-reduce fails ('You must feed a value for placeholder tensor .../cond/"
                "Placeholder'); it runs with cross_device_ops = \"reduction_to_one_device\" or "
                "\"hierarchical_copy\", or with tf_keras")
    if not variant.train.jit_compile:
        return None
    if match := _XLA_FOREIGN_RESOURCE.search(text):
        return (f"jit_compile with {variant.strategy} over {variant.replicas} devices of one "
                "process: XLA compiles the replica step for one device, and the cross-replica "
                "update (all-reduce) reads the variables of the other replicas' devices, which "
                f"XLA cannot ('located in device {match[1]} from device {match[2]}'); measured "
                "with TensorFlow 2.21 on logical CPU devices")
    if _XLA_CPU_COLLECTIVES in text:
        return (f"jit_compile with {variant.strategy}: the cross-replica all-reduce runs inside "
                f"the XLA-compiled step, and XLA has no CPU collectives (TensorFlow: "
                f"'{_XLA_CPU_COLLECTIVES}', b/194942685)")
    if match := _XLA_UNSUPPORTED.search(text):
        return (f"jit_compile: XLA on {match[1]} has no kernel for {match[2]}, which this "
                f"{variant.strategy} step needs (the cross-replica all-reduce runs outside XLA "
                "only in Keras fit)")
    return None
