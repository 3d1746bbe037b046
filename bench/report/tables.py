"""The tables of a run's page: every figure per variant, traces, problems and the environment.

Cells carry a display text and a sort key, so the page's sortable table orders 9,800 after
10,200 numerically rather than as text.
"""

from __future__ import annotations

import math
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from bench import results
from bench.checks.verdicts import ACCURACY, LOSS_PARITY, CheckKind
from bench.compare.noise import within_noise
from bench.record.model import VariantRecord
from bench.report.checkpoints import checkpoint_rows, format_size
from bench.report.derived import (
    BREAKDOWN_PARTS,
    api_label,
    batch_rule_label,
    op_shares,
    step_breakdown,
    straggler_note,
    worker_rows,
)
from bench.report.runs import RunView, versus_baseline
from bench.scaling import replicas_of


@dataclass(frozen=True)
class Cell:
    text: str
    sort: str | float = ""
    numeric: bool = False

    @property
    def sort_attr(self) -> str | None:
        """The cell's data-sort attribute: None where the text itself sorts right (the page's
        script then sorts by the text), numbers at 6 significant digits."""
        key = self.sort
        if isinstance(key, float) and math.isfinite(key):
            key = repr(float(f"{key:.6g}"))
        key = str(key)
        return None if key == self.text else key


def cells_html(row: list[Cell]) -> Markup:
    """A table row's cells as HTML (texts escaped): what the templates' cell loop wrote, built
    here because a page has a couple of thousand cells and jinja's loop was most of its time."""
    out = []
    for cell in row:
        sort = cell.sort_attr
        out.append("<td" + (' class="num"' if cell.numeric else "")
                   + ("" if sort is None else f' data-sort="{escape(sort)}"')
                   + f">{escape(cell.text)}</td>")
    return Markup("".join(out))


def _num(value: Any, fmt: str, scale: float = 1.0) -> Cell:
    if value is None:
        return Cell("–", float("-inf"), True)
    value = value * scale if scale != 1.0 else value
    return Cell(format(value, fmt), float(value), True)


def _txt(value: Any) -> Cell:
    return Cell("–" if value is None else str(value), "" if value is None else str(value))


COLUMNS = ("variant", "strategy", "replicas", "batch rule", "API", "precision", "global batch", "examples/s",
           "typical step ex/s", "spread %", "vs baseline", "scaling eff.", "observer ×",
           "profiler ×", "GFLOP/s", "MFU %", "step ms (median)",
           "p5 ms", "p95 ms", "startup s", "first step s", "input ms", "compute ms",
           "collective ms", "other ms", "input %", "loss (first → last)", "loss parity",
           "accuracy", "peak RSS MB", "status")


def figures_row(run: RunView, rec: VariantRecord) -> list[Cell]:
    v = rec.variant
    step, timing, loss, use = rec.step_time, rec.timing, rec.loss, rec.utilization
    analysis = rec.trace_analysis
    base = run.baselines.get(rec.variant_id or "")
    vs_base = versus_baseline(rec, base)
    split = step_breakdown(rec)  # shares of the traced step, on the untraced step's scale
    initial, final = (loss.initial, loss.final) if loss else (None, None)
    loss_text = f"{initial:.3f} → {final:.3f}" if initial is not None and final is not None else "–"
    has_variant = bool(v.as_dict)
    return [
        _txt(rec.variant_id), _txt(v.strategy),
        Cell(str(replicas_of(rec)) if has_variant else "–",
             replicas_of(rec) if has_variant else 0, True),
        _txt(batch_rule_label(v) if has_variant else None), _txt(api_label(v)), _txt(v.precision),
        _num(rec.global_batch, ","),
        _num(rec.headline if rec.throughput else None, ",.0f"),
        _num(rec.typical_step_rate, ",.0f"),
        _num(rec.spread_pct, ".1f"), _versus_cell(vs_base, run.noise_floor),
        _num(rec.scaling_efficiency, ".2f"), _num(rec.observer_ratio, ".3f"),
        _num(rec.profiler_ratio, ".2f"),
        _num(use.achieved_flops_per_s if use else None, ".1f", 1e-9),
        _num(use.mfu if use else None, ".1f", 100.0),
        _num(step.median if step else None, ".2f", 1e3),
        _num(step.p5 if step else None, ".2f", 1e3),
        _num(step.p95 if step else None, ".2f", 1e3),
        _num(timing.startup_s if timing else None, ".1f"),
        _num(timing.first_step_s if timing else None, ".2f"),
        *(_num((split or {}).get("scaled_ms", {}).get(k), ".2f") for k in BREAKDOWN_PARTS),
        _num(analysis.input_bound_pct if analysis else None, ".1f"),
        Cell(loss_text, final if final is not None else float("inf"), True),
        _check_cell(rec, LOSS_PARITY), _check_cell(rec, ACCURACY),
        _num(rec.peak_rss_mb, ",.0f"),
        _txt(rec.status),
    ]


def _versus_cell(ratio: float | None, floor: dict[str, Any] | None) -> Cell:
    """A ratio to the baseline; "~" marks one within the run's noise floor."""
    if ratio is None:
        return _num(None, ".2f")
    return Cell(("~" if within_noise(ratio, floor) else "") + format(ratio, ".2f"), ratio, True)


def _check_cell(rec: VariantRecord, kind: CheckKind) -> Cell:
    check = kind.verdict(rec)
    if check is not None:
        return Cell(f"{check.status} ({kind.detail(check)})", kind.value(check), True)
    found = kind.check_of(rec)
    return _txt(found.status if found else None)


def relative_link(target: Path, page_dir: Path) -> str:
    """A link that works from file:// wherever the report and the run directory live."""
    return Path(os.path.relpath(target.resolve(), page_dir.resolve())).as_posix()


@dataclass(frozen=True)
class TraceRow:
    variant_id: str
    link: str
    command: str
    status: str


def trace_rows(run: RunView, page_dir: Path) -> list[TraceRow]:
    rows = []
    for rec in run.records:
        trace = rec.trace
        if trace is None or trace.status != "captured":
            continue
        vid = str(rec.variant_id)
        analysis = trace.analysis
        kept = (run.path / "traces").is_dir()
        steps = trace.steps if "steps" in trace.model_fields_set else "?"
        analysed = (analysis.status if analysis is not None
                    and "status" in analysis.model_fields_set else "not run")
        rows.append(TraceRow(
            variant_id=vid, link=relative_link(run.path / "traces" / vid, page_dir) if kept else "",
            command=f"bench trace {shlex.quote(str(run.path))} {shlex.quote(vid)}",
            status=f"{steps} steps traced; analysis {analysed}"
                   + ("" if kept else "; the files were dropped by `bench prune`")))
    return rows


@dataclass(frozen=True)
class ProblemRow:
    variant_id: str
    status: str
    reason: str
    error: str
    log: str | None


def problem_rows(run: RunView, page_dir: Path) -> list[ProblemRow]:
    rows = []
    for rec in run.records:
        if rec.ok:
            continue
        vid = str(rec.variant_id)
        log = run.path / results.LOGS_DIR / f"{vid}.log"
        error = rec.error.to_json() if rec.error is not None else None
        rows.append(ProblemRow(vid, str(rec.status), str(rec.reason or ""), str(error or ""),
                               relative_link(log, page_dir) if log.exists() else None))
    return rows


def flatten(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested dicts as dotted key/value rows (the environment fingerprint)."""
    if isinstance(obj, dict):
        rows: list[tuple[str, str]] = []
        for key, value in obj.items():
            rows.extend(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return rows
    if isinstance(obj, list):
        return [(prefix, ", ".join(map(str, obj)))]
    return [(prefix, "–" if obj is None else str(obj))]


def device_rows(run: RunView) -> list[tuple[str, str]]:
    """What each variant's worker saw, once per distinct device set."""
    seen: dict[str, list[str]] = {}
    for rec in run.ok:
        dev = rec.devices
        key = f"{rec.device_kind}: {', '.join((dev.physical if dev else None) or [])}"
        seen.setdefault(key, []).append(str(rec.variant_id))
    return [(key, f"{len(ids)} variant(s)") for key, ids in seen.items()]


@dataclass(frozen=True)
class DetailTable:
    """One variant's rows of a detail table (its workers, or its trace's top ops)."""

    variant_id: str
    rows: list[list[Cell]]
    note: str = ""


WORKER_COLUMNS = ("worker", "median step ms", "p5 ms", "p95 ms", "spread %", "× fastest",
                  "compute %", "collective %")


def worker_tables(run: RunView) -> list[DetailTable]:
    """Each cluster variant's workers, and which one was slowest against the fastest."""
    out = []
    for rec in run.ok:
        rows = worker_rows(rec)
        if not rows:
            continue
        out.append(DetailTable(str(rec.variant_id), [
            [_txt(r["task"]), _num(r["median_ms"], ".2f"), _num(r["p5_ms"], ".2f"),
             _num(r["p95_ms"], ".2f"), _num(r["spread_pct"], ".1f"), _num(r["vs_fastest"], ".3f"),
             _num(r["compute_share"], ".0f", 100), _num(r["collective_share"], ".0f", 100)]
            for r in rows], straggler_note(rows)))
    return out


OP_COLUMNS = ("op", "type", "% of step", "ms of the untraced step", "occurrences")


def top_op_tables(run: RunView) -> list[DetailTable]:
    """Each traced variant's top ops as shares of the step (bench.report.records.op_shares)."""
    out = []
    for rec in run.ok:
        ops = op_shares(rec)
        if not ops:
            continue
        split = step_breakdown(rec)
        note = (f"tracing slowed these steps {split['profiler_ratio']:.1f}×: read the shares"
                if split and split["inflated"] else "")
        out.append(DetailTable(str(rec.variant_id), [
            [_txt(op["name"]), _txt(op["type"]), _num(op["share"], ".1f", 100),
             _num(op["untraced_ms"], ".3f"), _num(op["occurrences"], "d")] for op in ops], note))
    return out


def checkpoint_table(run: RunView) -> list[list[Cell]]:
    """The "checkpoint cost" table (bench.report.checkpoints), one row per variant that saved."""
    out = []
    for row in checkpoint_rows(run.records):
        if row.status != "ok":
            out.append([_txt(row.variant_id), _txt(f"{row.status}: {row.reason}"),
                        *(_num(None, "") for _ in range(9))])
            continue
        match = None if row.weights_match is None else ("yes" if row.weights_match else "NO")
        out.append([_txt(row.variant_id), _txt(row.api), _num(row.every, "d"),
                    _num(row.saves, "d"), _num(row.save_ms, ".1f"), _num(row.save_p95_ms, ".1f"),
                    Cell(format_size(row.size_bytes), row.size_bytes or 0.0, True),
                    _num(row.restore_ms, ".1f"), _txt(match), _num(row.ratio, ".2f"),
                    _num(row.blocked_share, ".1f", 100.0)])
    return out
