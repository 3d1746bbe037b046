"""Time to target, read from records: the rows, the ranking and the summary in words, shared by
the terminal, the HTML report and `bench compare` (parent side: records only).

With a `[target]`, the run's answer is the ranking by time to target, not by examples/s: a
variant fastest per example may need more examples (a larger global batch at the same learning
rate) and be slower to a trained model.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.record.model import VariantRecord
from bench.record.target import Target
from bench.report.tables import Cell

COLUMNS = ("rank", "variant", "examples/s", "examples to target", "time to target s",
           "projected s", "measured ÷ projected", "seeds reached")


@dataclass(frozen=True)
class TargetRow:
    """One variant's figures to target."""

    variant_id: str
    headline: float | None
    target: Target

    @property
    def examples(self) -> float | None:
        return self.target.examples_to_target

    @property
    def seconds(self) -> float | None:
        return self.target.time_to_target

    @property
    def projected(self) -> float | None:
        return self.target.projected_s


def target_rows(records: list[VariantRecord]) -> list[TargetRow]:
    """Every variant that trained to a target (the machine's controls left out), fastest to
    target first, then those that did not reach it."""
    rows = [TargetRow(str(r.variant_id), r.headline, r.target) for r in records
            if r.target is not None and r.counts_as_variant]
    return sorted(rows, key=lambda row: (row.seconds is None, row.seconds or 0.0,
                                         row.variant_id))


def _spread(median: float | None, low: float | None, high: float | None, fmt: str) -> str:
    if median is None:
        return "-"
    text = format(median, fmt)
    if low is not None and high is not None and high > low:
        text += f" ({format(low, fmt)}-{format(high, fmt)})"
    return text


def examples_cell(target: Target) -> str:
    s = target.examples
    if target.status != "ok" or s is None:
        return target.status or "-"
    return _spread(s.median, s.low, s.high, ",.0f")


def seconds_cell(target: Target) -> str:
    s = target.seconds
    return "-" if s is None or target.status != "ok" else _spread(s.median, s.low, s.high, ".2f")


def reached_cell(target: Target) -> str:
    seeds = target.seeds or []
    if target.status != "ok":
        return escape(target.reason or target.status or "-")
    text = f"{target.reached}/{len(seeds)}"
    if target.reached != len(seeds):
        best = [s.best for s in seeds if s.status != "reached" and s.best is not None]
        diverged = sum(s.status == "diverged" for s in seeds)
        if best:
            text += f", best {max(best) if target.direction == 'above' else min(best):.3g}"
        if diverged:
            text += f", {diverged} diverged"
    return text


def agreement_cell(target: Target) -> str:
    if target.projected_s is None or target.agreement is None:
        return "-"
    return f"{target.projected_s:.2f} s (×{target.agreement:.2f})"


def describe_ranking(rows: list[TargetRow]) -> str | None:
    """The summary in words: which variant is fastest to target, and where that is not the
    fastest per example."""
    reached = [r for r in rows if r.seconds is not None]
    if not reached:
        return "No variant reached the target." if rows else None
    target = reached[0].target
    goal = f"{target.metric} {'≥' if target.direction == 'above' else '≤'} {target.value:g}"
    first = reached[0]
    words = (f"Fastest to {goal}: {first.variant_id}, {first.seconds:.2f} s of training "
             f"(median over {first.target.examples.seeds if first.target.examples else 0} "
             f"seed(s)), {first.examples:,.0f} examples.")
    by_rate = max((r for r in rows if r.headline), key=lambda r: r.headline or 0.0,
                  default=None)
    if by_rate is not None and by_rate.variant_id != first.variant_id:
        if by_rate.seconds is None:
            words += (f" The fastest per example, {by_rate.variant_id} "
                      f"({by_rate.headline:,.0f} examples/s), did not reach the target.")
        else:
            words += (f" The fastest per example, {by_rate.variant_id} "
                      f"({by_rate.headline:,.0f} examples/s), needed "
                      f"{by_rate.examples:,.0f} examples and {by_rate.seconds:.2f} s.")
    missed = [r.variant_id for r in rows if r.seconds is None]
    if missed:
        words += f" Not reached: {', '.join(missed)}."
    return words


def html_rows(records: list[VariantRecord]) -> list[list[Cell]]:
    """The report's time-to-target table, ranked as the terminal ranks it."""
    out = []
    for rank, row in enumerate(target_rows(records), 1):
        t = row.target
        out.append([Cell(str(rank) if row.seconds is not None else "-", rank, True),
                    Cell(row.variant_id, row.variant_id, False),
                    Cell(f"{row.headline:,.0f}" if row.headline else "-", row.headline or 0.0,
                         True),
                    Cell(examples_cell(t), row.examples or float("inf"), True),
                    Cell(seconds_cell(t), row.seconds or float("inf"), True),
                    Cell(f"{t.projected_s:.2f}" if t.projected_s else "-", t.projected_s or 0.0,
                         True),
                    Cell(f"{t.agreement:.2f}" if t.agreement else "-", t.agreement or 0.0, True),
                    Cell(reached_cell(t), t.reached or 0, False)])
    return out


def render_targets(console: Console, records: list[VariantRecord]) -> None:
    """The time-to-target table and its sentence, where the run had a target."""
    rows = target_rows(records)
    if not rows:
        return
    t = rows[0].target
    table = Table(title=f"Time to target ({t.metric} {'≥' if t.direction == 'above' else '≤'} "
                        f"{t.value:g} on {t.eval_split}, evaluated every "
                        f"{t.every_examples:,} examples; median (range) over seeds; projected: "
                        "examples ÷ examples/s, × measured ÷ projected)")
    for column, justify in (("rank", "right"), ("variant", "left"), ("examples/s", "right"),
                            ("examples to target", "right"), ("time to target s", "right"),
                            ("projected", "right"), ("seeds reached", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for rank, row in enumerate(rows, 1):
        table.add_row(str(rank) if row.seconds is not None else "-", escape(row.variant_id),
                      f"{row.headline:,.0f}" if row.headline else "-",
                      examples_cell(row.target), seconds_cell(row.target),
                      agreement_cell(row.target), reached_cell(row.target))
    console.print(table)
    if words := describe_ranking(rows):
        console.print(escape(words))
