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

from bench.record.model import VariantRecord
from bench.record.profiled import Accuracy, CheckVerdict, LossParity


@dataclass(frozen=True)
class CheckKind:
    """How one check's verdict is shown: `good` holds, `bad` is flagged in red everywhere."""

    key: str  # the record's `checks` field
    label: str
    good: str
    bad: str
    value: Callable[[Any], float]  # the figure tables sort by
    detail: Callable[[Any], str]  # the figure in words, for either verdict

    def check_of(self, record: VariantRecord) -> CheckVerdict | None:
        """The record's check of this kind, whatever its status."""
        return getattr(record.checks, self.key) if record.checks is not None else None

    def verdict(self, record: VariantRecord) -> CheckVerdict | None:
        """The record's check when it reached a verdict (not skipped, failed or a baseline)."""
        check = self.check_of(record)
        return check if check is not None and check.status in (self.good, self.bad) else None


def _parity_detail(check: LossParity) -> str:
    """The difference; where the baseline is on another backend, the backend it is from (a
    diverged one names its baseline too)."""
    across = check.baseline_backend is not None and check.backend != check.baseline_backend
    if check.status == "diverged":
        return (f"{check.relative_difference:.1%} from {check.baseline}"
                + (f" on {check.baseline_backend}" if across else ""))
    return f"{check.relative_difference:.2%}" + (f" vs {check.baseline_backend}" if across else "")


def _accuracy_detail(check: Accuracy) -> str:
    sign = "<" if check.status == "below" else "≥"
    return f"{check.accuracy:.3f} {sign} {check.min:g} on {check.eval_split}"


LOSS_PARITY = CheckKind("loss_parity", "loss parity", "ok", "diverged",
                        lambda c: c.relative_difference, _parity_detail)
ACCURACY = CheckKind("accuracy", "accuracy", "ok", "below", lambda c: c.accuracy,
                     _accuracy_detail)
KINDS = (LOSS_PARITY, ACCURACY)


class ParityJudge:
    """Compares each record's parity loss with the first baseline of the same model and
    precision, on either backend. The runner runs the baseline strategies first, in the matrix's order, which
    takes the backends in the order `backend` lists them: with ["tensorflow", "jax"], JAX's
    variants (its `default` too) are judged against TensorFlow's one-device baseline; a run of
    JAX alone, against JAX's own."""

    def __init__(self) -> None:
        self.baselines: dict[tuple[str, str], VariantRecord] = {}

    def judge(self, record: VariantRecord) -> VariantRecord:
        parity = record.checks.loss_parity if record.checks is not None else None
        if parity is None or parity.status != "measured":
            return record
        variant = record.variant
        parity.backend = variant.backend or "tensorflow"
        precision = str(variant.precision)
        key = (str(variant.axis("model")), precision)  # another model trains another loss
        tolerance = ((variant.check or {}).get("loss_parity") or {})["tolerance"]
        if variant.on_baseline_strategy and key not in self.baselines:
            self.baselines[key] = record
            parity.status = "baseline"
            return record
        base = self.baselines.get(key)
        if base is None:
            parity.status, parity.reason = "no-baseline", (f"no {precision} baseline of model "
                                                           f"{key[0]} ran first")
            return record
        assert base.checks is not None and base.checks.loss_parity is not None
        reference = base.checks.loss_parity.loss
        assert reference is not None and parity.loss is not None
        difference = abs(parity.loss - reference) / max(abs(reference), 1e-12)
        parity.status = "ok" if difference <= tolerance else "diverged"
        parity.baseline, parity.baseline_loss = base.variant_id, reference
        parity.baseline_backend = base.variant.backend or "tensorflow"
        parity.relative_difference, parity.tolerance = difference, tolerance
        return record
