"""`bench compare` as one HTML page beside its Markdown and JSON: the verdicts, and for each
variant its step-time ratio with its confidence interval drawn against the minimum effect.

One self-contained file (the site's stylesheet inlined, inline SVG, no script), so it can be
attached to a CI run or a ticket and opened anywhere, offline.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import bench
from bench.compare.detector import RELATIVE_NOTE, Comparison, Verdict
from bench.report.templates import template_environment
from bench.results import write_text_atomic

PLOT_W, PLOT_H = 260, 22  # px of each row's interval plot


@dataclass(frozen=True)
class Row:
    """One verdict with its interval plot laid out on the page's common ratio scale."""

    verdict: Verdict
    x_ratio: float | None  # px positions on the row's plot
    x_low: float | None
    x_high: float | None


@dataclass(frozen=True)
class Scale:
    low: float
    high: float

    def x(self, ratio: float) -> float:
        return round(PLOT_W * (ratio - self.low) / (self.high - self.low), 1)


def scale_for(verdicts: list[Verdict]) -> Scale:
    """One ratio axis for every row, wide enough for each ratio, interval and effect band."""
    values = [1.0] + [x for v in verdicts for x in (v.ratio, v.ci_low, v.ci_high) if x is not None]
    effect = max((v.min_effect for v in verdicts), default=0.05)
    low, high = min(min(values), 1 - effect), max(max(values), 1 + effect)
    pad = 0.08 * (high - low)
    return Scale(low - pad, high + pad)


def _row(verdict: Verdict, scale: Scale) -> Row:
    def x(value: float | None) -> float | None:
        return None if value is None else scale.x(value)

    return Row(verdict, x(verdict.ratio), x(verdict.ci_low), x(verdict.ci_high))


def render_compare_html(result: Comparison, baseline: str, candidate: str, alpha: float) -> str:
    scale = scale_for(result.verdicts)
    effect = max((v.min_effect for v in result.verdicts), default=0.05)
    css = (resources.files("bench.report") / "static" / "report.css").read_text("utf-8")
    return template_environment().get_template("compare.html.j2").render(
        result=result, baseline=baseline, candidate=candidate, confidence=1 - alpha,
        rows=[_row(v, scale) for v in result.verdicts], scale=scale, plot_w=PLOT_W,
        plot_h=PLOT_H, band=(scale.x(1 - effect), scale.x(1 + effect)), one=scale.x(1.0),
        relative_note=RELATIVE_NOTE if result.relative else "", css=css,
        generated_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        bench_version=bench.__version__)


def write_compare_html(path: Path, result: Comparison, baseline: str, candidate: str,
                       alpha: float) -> None:
    write_text_atomic(path, render_compare_html(result, baseline, candidate, alpha))
