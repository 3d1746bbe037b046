"""FLOPs of a JAX variant's step from XLA's cost analysis of the compiled step, and its MFU
against the measured peak (bench.utilization.peak, the same cache TensorFlow's variants read).

The step counted is the Keras JAX guide's (forward, backward, optimizer update: what fit's
step also runs, less its metrics), compiled for one device on abstract inputs of the global
batch's shapes, so the count is the whole step's, however a distribution would split it.
"""

from __future__ import annotations

from typing import Any

from bench.backends.jax_distribution import Placement
from bench.backends.jax_loops import initial_state, train_step_fn
from bench.record.failure import extra_failed
from bench.scenario.schema import Variant
from bench.training.objectives import Objectives
from bench.utilization import peak

SOURCE = "XLA cost analysis of the compiled step (forward, backward, optimizer)"
CPU_DEVICE = "/device:CPU:0"  # the peak is measured on the host's CPU, as TensorFlow's is


def step_flops(model: Any, optimizer: Any, objectives: Objectives, batch: Any) -> float:
    """FLOPs of one training step on `batch` (NumPy arrays of the global batch)."""
    import jax

    state = initial_state(model, optimizer)

    def spec(array: Any) -> Any:
        return jax.ShapeDtypeStruct(array.shape, array.dtype)

    x, y = batch
    compiled = train_step_fn(model, optimizer, objectives).lower(
        jax.tree.map(spec, state), jax.tree.map(spec, x), jax.tree.map(spec, y)).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost["flops"])


def settle_peak(variant: Variant, placement: Placement) -> list[float] | None:
    """Measure the CPU's peak into the cache while this process holds the machine (before
    FINISH), as the TensorFlow worker does; never raises."""
    if placement.kind != "cpu":
        return None
    try:
        return peak.settle(CPU_DEVICE, "cpu", variant.precision)
    except Exception:  # the lookup in `utilization` meets it again and records it
        return None


def utilization(variant: Variant, placement: Placement, model: Any, optimizer: Any,
                objectives: Objectives, batch: Any, median_step_s: float,
                peak_measured_here: list[float] | None) -> dict[str, Any]:
    """Achieved FLOP/s and MFU; skipped where the count would not be the step's, never fatal."""
    if placement.kind != "cpu":
        return {"status": "skipped", "reason": f"the peak of a {placement.kind} is not "
                "measured on the JAX backend yet"}
    if variant.strategy == "model_parallel":
        return {"status": "skipped", "reason": "a ModelParallel step is compiled for its mesh: "
                "its one-device count is not counted yet"}
    try:
        flops = step_flops(model, optimizer, objectives, batch)
        device_peak = peak.peak_flops(CPU_DEVICE, "cpu", variant.precision)
    except Exception as exc:  # a utilisation figure is a bonus, not the measurement
        return extra_failed(exc)
    achieved = flops / median_step_s
    return {"status": "ok", "flops_per_step": flops, "flops_source": SOURCE,
            "achieved_flops_per_s": achieved, "peak_flops_per_s": device_peak["flops_per_s"],
            "peak_devices": 1, "peak": device_peak, "peak_measured_here": peak_measured_here,
            "mfu": achieved / device_peak["flops_per_s"]}
