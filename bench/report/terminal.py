"""Terminal rendering of records: one line per finished variant and the end-of-run table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.checks.verdicts import KINDS
from bench.compare.noise import describe as describe_noise_floor
from bench.compare.noise import noise_floor, within_noise
from bench.record.model import VariantRecord, scenario_data_sources
from bench.report import environments
from bench.report.backends import render_backend_pairs
from bench.report.checkpoints import COLUMNS as CHECKPOINT_COLUMNS
from bench.report.checkpoints import checkpoint_rows, format_size
from bench.report.derived import (
    api_label,
    batch_rule_label,
    describe_epoch_ends,
    describe_two_speeds,
    describe_warming_up,
    keras_pairs,
    model_label,
    problems_by_reason,
    step_breakdown,
    two_speeds,
    warming_up,
)
from bench.report.runs import find_baselines, versus_baseline
from bench.report.targets import render_targets

if TYPE_CHECKING:
    from bench.compare.detector import Comparison

CONTROL_LABELS = {"baseline": "control baseline", "twin": "control twin", "yardstick": "yardstick"}
_STATUS_STYLE = {"ok": "green", "skipped": "yellow", "failed": "red"}


def format_throughput(record: VariantRecord) -> str:
    """THE examples/s (the headline: wall clock of the timed windows) ± the step time's spread."""
    if not record.throughput or record.headline is None:
        return "-"
    return f"{record.headline:,.0f} ± {record.spread_pct:.1f}%"


def format_typical_step(record: VariantRecord) -> str:
    """The typical-step rate: global batch ÷ the median step."""
    rate = record.typical_step_rate
    return f"{rate:,.0f}" if record.throughput and rate is not None else "-"


def format_versus_baseline(record: VariantRecord, base: VariantRecord | None,
                           floor: dict[str, Any] | None) -> str:
    """Headline ratio to the variant's baseline in this run, "~" where the control twins
    differed as much (within the noise floor)."""
    ratio = versus_baseline(record, base)
    if ratio is None:
        return "-"
    return f"~{ratio:.2f}" if within_noise(ratio, floor) else f"{ratio:.2f}"


def format_efficiency(record: VariantRecord) -> str:
    eff = record.scaling_efficiency
    return f"{eff:.2f} ({record.scaling_kind})" if eff is not None else "-"


def format_breakdown(record: VariantRecord) -> str | None:
    """One line on where the step time goes, as shares of the step scaled to the untraced step,
    or None without a usable analysis."""
    split = step_breakdown(record)
    if split is None:
        error = record.trace_analysis.error if record.trace_analysis else None
        return f"trace analysis failed: {escape(error)}" if error else None
    shares, scaled = split["shares"], split["scaled_ms"]
    text = ("trace: " + " + ".join(f"{part} {shares[part]:.0%}" for part in shares)
            + f" of the step; on the untraced {split['untraced_step_ms']:.2f} ms step: "
            + " + ".join(f"{part} {scaled[part]:.2f}" for part in scaled) + " ms")
    if split["inflated"]:
        text += (f"; [yellow]tracing slowed the traced steps {split['profiler_ratio']:.1f}×, "
                 "so only the shares are telling[/]")
    return text


def format_checks(record: VariantRecord) -> str:
    """Each check's verdict: a failing one in red capitals, a holding one in green."""
    text = ""
    for kind in KINDS:
        check = kind.verdict(record)
        if check is None:
            continue
        detail = escape(kind.detail(check))
        if check.status == kind.bad:
            text += f"  [red]{kind.label}: {kind.bad.upper()} ({detail})[/]"
        else:
            text += f"  [green]{kind.label} {kind.good} ({detail})[/]"
    return text


def render_outcome_line(record: VariantRecord) -> str:
    status = record.status
    style = _STATUS_STYLE.get(status, "white")
    head = f"[{style}]{status:>7}[/] {escape(str(record.variant_id))}"
    if status == "ok":
        line = f"{head}  {format_throughput(record)} examples/s"
        use = record.utilization
        if use is not None and use.status == "ok":
            line += f", {(use.achieved_flops_per_s or 0) / 1e9:,.1f} GFLOP/s = {use.mfu:.1%} MFU"
            if use.above_peak:
                line += "  [yellow](above the measured peak, which read low)[/]"
        line += format_checks(record)
        breakdown = format_breakdown(record)
        if breakdown:
            line += f"\n          [dim]{breakdown}[/]"
        return line
    return f"{head}  {escape(str(record.reason or ''))}"


class OutcomeLines:
    """The line of each variant as it finishes, a reason once: a variant that failed (or was
    skipped) for the reason an earlier one gave names that one instead of repeating it, so a
    run whose variants all fail alike prints the error once, not once a variant."""

    def __init__(self) -> None:
        self.first: dict[tuple[str, str], str] = {}  # (status, reason) -> its first variant

    def __call__(self, record: VariantRecord) -> str:
        if record.ok or not record.reason:
            return render_outcome_line(record)
        key = (record.status, record.reason)
        if (earlier := self.first.setdefault(key, str(record.variant_id))) == record.variant_id:
            return render_outcome_line(record)
        style = _STATUS_STYLE.get(record.status, "white")
        return (f"[{style}]{record.status:>7}[/] {escape(str(record.variant_id))}  [dim](as "
                f"{escape(earlier)})[/]")


def _replicas_cell(record: VariantRecord) -> str:
    """Replicas in sync, with the process shape for cluster strategies (e.g. "2 (2w x 2)", or
    "1 (1ps 2w)": each role's count, as its strategy names them)."""
    variant, kind = record.variant, record.variant.kind
    text = str(record.replicas)
    if kind is not None and kind.replicas_per_process == "devices_per_worker":
        text += f" ({variant.workers}w x {variant.devices_per_worker})"
    elif kind is not None and kind.cluster:
        text += f" ({variant.ps}ps {variant.workers}w)"
    return text


def render_keras_pairs(console: Console, records: list[VariantRecord]) -> None:
    """Keras 3 against tf-keras for each variant that ran with both."""
    pairs = keras_pairs(records)
    if not pairs:
        return
    table = Table(title="Keras 3 vs tf-keras (examples/s, same strategy, API and precision)")
    for column in ("variant (Keras 3)", "Keras 3", "tf-keras", "tf-keras / Keras 3"):
        table.add_column(column, justify="left" if column.startswith("variant") else "right")
    for k3, tfk in pairs:
        ratio = tfk.headline_ratio(k3)
        table.add_row(escape(str(k3.variant_id)), format_throughput(k3), format_throughput(tfk),
                      f"×{ratio:.2f}")
    console.print(table)


def render_environment_pairs(console: Console, records: list[VariantRecord],
                             floor: dict[str, Any] | None) -> None:
    """Each variant against itself in the run's first environment (bench.report.environments)."""
    pairs = environments.environment_pairs(records)
    if not pairs:
        return
    table = Table(title="Environments (examples/s of the same variant; ± the 95% interval over "
                        "the rounds both ran; ~ within the noise floor)")
    for column in ("variant", "what changed", "before", "after", "after / before"):
        table.add_column(column, justify="left" if column in ("variant", "what changed")
                         else "right")
    for ref, other in pairs:
        c = environments.change(ref, other, floor)
        ratio = f"{'~' if c['within_noise'] else ''}×{c['ratio']:.2f}" + (
            f" ±{c['plus_minus_pct']:.0f}%" if c["plus_minus_pct"] is not None else "")
        table.add_row(escape(str(ref.variant_id)), escape(c["what"]), format_throughput(ref),
                      format_throughput(other), ratio)
    console.print(table)


def render_checkpoint_costs(console: Console, records: list[VariantRecord]) -> None:
    """The checkpoint-cost table (measure.checkpoint), where variants saved checkpoints."""
    rows = checkpoint_rows(records)
    if not rows:
        return
    table = Table(title="Checkpoint cost (save: blocking time seen by the loop; throughput: "
                        "examples/s saving ÷ not saving, alternating blocks)")
    for column in CHECKPOINT_COLUMNS:
        table.add_column(column, justify="left" if column in ("variant", "saved with") else "right")
    for r in rows:
        if r.status != "ok":
            table.add_row(escape(r.variant_id), f"[yellow]{r.status}[/]: {escape(r.reason)}",
                          *("-" * 9))
            continue
        match = {True: "yes", False: "[red]NO[/]", None: "-"}[r.weights_match]
        table.add_row(escape(r.variant_id), r.api or "-", str(r.every), str(r.saves),
                      f"{r.save_ms:.1f}", f"{r.save_p95_ms:.1f}", format_size(r.size_bytes),
                      "-" if r.restore_ms is None else f"{r.restore_ms:.1f}", match,
                      f"×{r.ratio:.2f}",
                      "-" if r.blocked_share is None else f"{r.blocked_share:.1%}")
    console.print(table)


def render_summary(console: Console, records: list[VariantRecord]) -> None:
    table = Table(title="Throughput (examples/s: examples ÷ wall clock of the timed windows ± "
                        "robust CV of step time; typical step: global batch ÷ median step)")
    models = [model_label(rec.variant) for rec in records]
    several_models = len(set(models)) > 1  # a column only where it tells variants apart
    envs = [str(rec.variant.axis("environment") or "-") for rec in records]
    several_envs = len(set(envs)) > 1
    rules = [batch_rule_label(rec.variant) for rec in records]
    several_rules = len(set(rules)) > 1
    for column, justify in (("strategy", "left"), *((("model", "left"),) if several_models else ()),
                            *((("environment", "left"),) if several_envs else ()),
                            ("replicas", "right"), *((("batch rule", "left"),) if several_rules
                                                     else ()), ("API", "left"),
                            ("precision", "left"), ("global batch", "right"),
                            ("examples/s", "right"), ("typical step", "right"),
                            ("vs baseline", "right"), ("scaling eff.", "right"),
                            ("status", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    floor = noise_floor(records)
    baselines = find_baselines(records)
    for rec, model, env, rule in zip(records, models, envs, rules, strict=True):
        v = rec.variant
        api = api_label(v)
        strategy = str(v.strategy) + ("" if v.cross_device_ops == "auto"
                                      else f" [{v.cross_device_ops}]")
        if rec.control_role:
            strategy += f" ({CONTROL_LABELS[rec.control_role]})"
        style = _STATUS_STYLE.get(rec.status, "white")
        table.add_row(escape(strategy), *((escape(model),) if several_models else ()),
                      *((escape(env),) if several_envs else ()),
                      _replicas_cell(rec), *((escape(rule),) if several_rules else ()),
                      api, str(v.precision),
                      str(rec.global_batch), format_throughput(rec),
                      format_typical_step(rec),
                      format_versus_baseline(rec, baselines.get(str(rec.variant_id)), floor),
                      format_efficiency(rec),
                      f"[{style}]{rec.status}[/]")
    console.print(table)
    render_keras_pairs(console, records)
    render_backend_pairs(console, records, floor)
    render_environment_pairs(console, records, floor)
    render_checkpoint_costs(console, records)
    render_targets(console, records)
    console.print(describe_noise_floor(floor))
    if ends := describe_epoch_ends(records):
        console.print(f"[dim]{escape(ends)}[/]")
    for note in (describe_two_speeds(two_speeds(records)),
                 describe_warming_up(warming_up(records))):
        if note:
            console.print(f"[yellow]{escape(note)}[/]")
    if floor is not None:
        console.print("  [dim]vs baseline: headline ratio to the same API and precision on one "
                      "device; ~ marks a ratio within the noise floor[/]")
    for status, reason, ids in problems_by_reason(records):
        console.print(f"  [{_STATUS_STYLE[status]}]{status}[/] {escape(', '.join(ids))}: "
                      f"{escape(reason)}")
    for source in scenario_data_sources(records):
        console.print(f"data: {escape(source)}")
    for reason in sorted({rec.data_fallback_reason for rec in records
                          if rec.data_fallback_reason}):
        console.print(f"[yellow]data fallback: {escape(reason)}[/]")


_VERDICT_STYLE = {"regression": "red", "now-failing": "red", "missing": "red",
                  "improvement": "green"}


def render_comparison(console: Console, result: Comparison, baseline: str, candidate: str,
                      alpha: float) -> None:
    """`bench compare`'s table and verdict line (also printed by `bench nightly`)."""
    table = Table(title=f"{escape(baseline)} → {escape(candidate)}")
    targets = result.has_targets
    for column in ("variant", "status", "step time ratio", f"{1 - alpha:.0%} CI", "p",
                   *(("examples to target",) if targets else ()), "note"):
        table.add_column(column)
    for v in result.verdicts:
        style = _VERDICT_STYLE.get(v.status, "white")
        table.add_row(escape(v.key), f"[{style}]{v.status}[/]",
                      f"{v.ratio:.3f}" if v.ratio is not None else "-",
                      f"{v.ci_low:.3f}–{v.ci_high:.3f}" if v.ci_low is not None else "-",
                      f"{v.p_value:.2g}" if v.p_value is not None else "-",
                      *((escape(v.examples_text),) if targets else ()), escape(v.note))
    console.print(table)
    if result.measured_differently:
        console.print(f"[bold yellow]warning: {escape(result.measured_differently)}[/]")
    if result.caveat:
        console.print(f"[yellow]caveat: {escape(result.caveat)}[/]")
    if result.relative:
        from bench.compare.detector import RELATIVE_NOTE

        console.print(f"[dim]{escape(RELATIVE_NOTE)}[/]")
    console.print("[red]REGRESSION[/]" if result.regressed else "[green]no regression[/]")
