"""Check verdicts, parent side: what each verdict means for display, and the loss-parity judge.

The checks themselves (`suite`, `parity`, `accuracy`) run in the worker. What each verdict means
for display (terminal line, report table and summary) is described once here, in `KINDS`, so
every view marks a failing check the same way; `ParityJudge` compares each record's parity loss
with its baseline's as records arrive. No TensorFlow: the parent process renders verdicts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.scenario.schema import BASELINE_STRATEGIES


@dataclass(frozen=True)
class CheckKind:
    """How one check's verdict is shown: `good` holds, `bad` is flagged in red everywhere."""

    key: str  # record["checks"][key]
    label: str
    good: str
    bad: str
    value: Callable[[dict[str, Any]], float]  # the figure tables sort by
    detail: Callable[[dict[str, Any]], str]  # the figure in words, for either verdict

    def verdict(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """The record's check when it reached a verdict (not skipped, failed or a baseline)."""
        check = (record.get("checks") or {}).get(self.key) or {}
        return check if check.get("status") in (self.good, self.bad) else None


def _parity_detail(check: dict[str, Any]) -> str:
    if check["status"] == "diverged":
        return f"{check['relative_difference']:.1%} from {check['baseline']}"
    return f"{check['relative_difference']:.2%}"


def _accuracy_detail(check: dict[str, Any]) -> str:
    sign = "<" if check["status"] == "below" else "≥"
    return f"{check['accuracy']:.3f} {sign} {check['min']:g} on {check['eval_split']}"


LOSS_PARITY = CheckKind("loss_parity", "loss parity", "ok", "diverged",
                        lambda c: c["relative_difference"], _parity_detail)
ACCURACY = CheckKind("accuracy", "accuracy", "ok", "below", lambda c: c["accuracy"],
                     _accuracy_detail)
KINDS = (LOSS_PARITY, ACCURACY)


class ParityJudge:
    """Compares each record's parity loss with the first baseline of the same precision."""

    def __init__(self) -> None:
        self.baselines: dict[str, dict[str, Any]] = {}

    def judge(self, record: dict[str, Any]) -> dict[str, Any]:
        parity = (record.get("checks") or {}).get("loss_parity")
        if not parity or parity.get("status") != "measured":
            return record
        variant = record["variant"]
        precision = variant["precision"]
        tolerance = variant["check"]["loss_parity"]["tolerance"]
        if variant["strategy"] in BASELINE_STRATEGIES and precision not in self.baselines:
            self.baselines[precision] = record
            parity.update(status="baseline")
            return record
        base = self.baselines.get(precision)
        if base is None:
            parity.update(status="no-baseline", reason=f"no {precision} baseline ran first")
            return record
        reference = base["checks"]["loss_parity"]["loss"]
        difference = abs(parity["loss"] - reference) / max(abs(reference), 1e-12)
        parity.update(status="ok" if difference <= tolerance else "diverged",
                      baseline=base["variant_id"], baseline_loss=reference,
                      relative_difference=difference, tolerance=tolerance)
        return record
