"""The checks a scenario asks for, run in the worker after the timed steps so they cannot disturb
them; one that cannot run is reported in the record, never fatal to the variant."""

from __future__ import annotations

from typing import Any

from bench.checks import accuracy, parity
from bench.checks.train_copy import Route
from bench.record.failure import extra_failed
from bench.scenario.schema import Variant


def run(variant: Variant, route: Route, data: Any) -> dict[str, Any]:
    """Every check the scenario asks for, its copies built and trained by the backend's `route`;
    one that cannot run is reported, never fatal."""
    measures = {"loss_parity": parity.measure, "accuracy": accuracy.measure}
    results: dict[str, Any] = {}
    for key, measure in measures.items():
        if getattr(variant.check, key) is None:
            continue
        if variant.is_cluster:
            results[key] = {"status": "skipped", "reason": f"{key.replace('_', ' ')} is checked "
                            "for single-process strategies only"}
            continue
        try:
            results[key] = measure(variant, route, data)
        except Exception as exc:  # a check that cannot run is reported, not fatal
            results[key] = extra_failed(exc)
    return results
