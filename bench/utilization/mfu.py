"""Model FLOPs utilisation: the FLOPs a step needs, per second of the median step, against the
machine's measured peak for the device kind and precision.

A figure beside the measurement, never part of it: any failure becomes the record's
`utilization` error, and the variant stays ok.
"""

from __future__ import annotations

from typing import Any

from bench.data.sources import ModelInputs
from bench.record.failure import extra_failed
from bench.scenario.schema import Variant
from bench.training import models, workload
from bench.training.devices import DeviceLayout
from bench.utilization import flops, peak


def _skip_reason(variant: Variant, layout: DeviceLayout) -> str | None:
    if variant.is_cluster or layout.kind == "tpu":
        return (f"MFU is not computed for {variant.strategy} (tasks share a host, or the peak "
                "benchmark does not run there)")
    if variant.model.trainable != "all":
        # Measured: ResNet50 at 32 x 32 counts 478 MFLOP per example frozen ("head"), 478 with
        # the last 30 layers trainable and 481 fully trainable, while the frozen step runs ~20x
        # faster: the graph count includes backward ops of the base that never run.
        return ("model.trainable freezes layers: the step graph's FLOP count still includes the "
                "frozen base's backward ops, which do not run, so an MFU would overstate the work")
    return None


def settle_peak(variant: Variant, layout: DeviceLayout) -> list[float] | None:
    """Measure the devices' peak into the cache if it is not settled yet, and say when
    (peak.settle). The worker calls it while it holds the machine alone: beside another
    variant's process a matmul reads a fraction of the peak, and every MFU after would read too
    high. Never raises (a failure shows in `utilization`)."""
    if _skip_reason(variant, layout) is not None:
        return None
    try:
        return peak.settle(layout.devices[0], layout.kind, variant.precision)
    except Exception:  # the lookup in `utilization` meets it again and records it
        return None


def utilization(variant: Variant, layout: DeviceLayout, batch: tuple[Any, Any],
                inputs: ModelInputs, median_step_s: float,
                peak_measured_here: list[float] | None = None) -> dict[str, Any]:
    """Achieved FLOP/s and MFU against the measured peak; never fails the variant."""
    if (why := _skip_reason(variant, layout)) is not None:
        return {"status": "skipped", "reason": why}
    try:
        # A plain copy of the model (outside the strategy) gives the graph to count.
        plain = workload.build(variant, inputs)
        weights = models.parameter_counts(plain.model)
        if 2 * weights["trainable"] < weights["total"]:
            return {"status": "skipped", "reason": f"{weights['trainable']:,} of the model's "
                    f"{weights['total']:,} weights train (a frozen base): the step graph's FLOP "
                    "count would include backward ops that do not run"}
        step_flops, source = flops.count(plain.model, plain.objectives.loss(), *batch)
        device_peak = peak.peak_flops(layout.devices[0], layout.kind, variant.precision)
    except Exception as exc:  # a utilisation figure is a bonus, not the measurement
        return extra_failed(exc)
    # Logical CPU devices share the same cores: the machine's peak does not grow with them.
    counted = len(layout.devices) if layout.kind == "gpu" else 1
    achieved = step_flops / median_step_s
    total_peak = device_peak["flops_per_s"] * counted
    return {"status": "ok", "flops_per_step": step_flops, "flops_source": source,
            "achieved_flops_per_s": achieved, "peak_flops_per_s": total_peak,
            "peak_devices": counted, "peak": device_peak,
            "peak_measured_here": peak_measured_here, "mfu": achieved / total_peak}
