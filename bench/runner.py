"""`bench run`: expand a scenario, launch each variant in isolation, record, summarise.

The parent never imports TensorFlow; it only spawns workers, watches their budgets and writes
records as each finishes, so Ctrl-C or a crash keeps everything already measured.
"""

from __future__ import annotations

import fnmatch
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench import fingerprint, results
from bench.checks.verdicts import ParityJudge
from bench.errors import BenchError
from bench.launch import launcher_for
from bench.launch.forkserver import ForkServer
from bench.launch.local import data_cache_dir, worker_env
from bench.perf import overhead
from bench.report.terminal import render_outcome_line, render_summary
from bench.scaling import add_scaling_efficiency
from bench.scenario.loading import load_scenario
from bench.scenario.matrix import expand
from bench.scenario.schema import BASELINE_STRATEGIES, Scenario, Variant
from bench.timing import round_up
from bench.trace.attach import attach_trace_analysis

QUICK_MEASURE = {"warmup_steps": 3, "steps": 20, "repeats": 2, "trace_steps": 0}


@dataclass
class RunOptions:
    results_dir: Path = Path("results")
    quick: bool = False
    warmup_steps: int | None = None
    steps: int | None = None
    repeats: int | None = None
    timeout_s: float | None = None
    only: list[str] = field(default_factory=list)
    report: bool = True  # render the HTML report at the end
    reports_dir: Path = Path("reports")
    # forkserver: fork each single-process variant from a server that imported TensorFlow once;
    # spawn: a new interpreter per variant (slower, for comparison or when fork is unwanted)
    start_method: str = "forkserver"


@dataclass
class RunOutcome:
    run_dir: Path
    records: list[dict[str, Any]]
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if any(r["status"] == "failed" for r in self.records) else 0


def apply_overrides(scenario: Scenario, opts: RunOptions) -> Scenario:
    """Command-line measurement overrides (--quick, --steps, ...) on top of the file's values."""
    # --quick never makes a run longer than the scenario itself asks for (ResNet50 scenarios
    # already take few steps).
    update: dict[str, Any] = ({k: min(v, getattr(scenario.measure, k))
                               for k, v in QUICK_MEASURE.items()} if opts.quick else {})
    for key in ("warmup_steps", "steps", "repeats", "timeout_s"):
        if getattr(opts, key) is not None:
            update[key] = getattr(opts, key)
    k = scenario.train.steps_per_execution
    for key in ("warmup_steps", "steps"):
        if key in update:
            update[key] = round_up(update[key], k)
    if not update:
        return scenario
    measure = scenario.measure.model_validate({**scenario.measure.model_dump(), **update})
    return scenario.model_copy(update={"measure": measure})


def select(variants: list[Variant], patterns: list[str], source: str) -> list[Variant]:
    if not patterns:
        return variants
    chosen = [v for v in variants if any(fnmatch.fnmatch(v.id, p) for p in patterns)]
    if not chosen:
        raise BenchError(f"{source}: --only {' '.join(patterns)} matches no variant "
                         f"(have: {', '.join(v.id for v in variants)})")
    return chosen


def prepare(path: Path, opts: RunOptions) -> tuple[Scenario, list[Variant]]:
    scenario = apply_overrides(load_scenario(path), opts)
    variants = select(expand(scenario, str(path)), opts.only, str(path))
    if scenario.check.loss_parity:  # baselines first: every other variant is judged against one
        variants.sort(key=lambda v: v.strategy not in BASELINE_STRATEGIES)
    return scenario, variants


def _progress_display(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=True)


def run(path: Path, opts: RunOptions, console: Console) -> RunOutcome:
    started = time.perf_counter()
    scenario, variants = prepare(path, opts)
    run_dir = results.create_run_dir(opts.results_dir, scenario.name)
    results.init_run(run_dir, path, [v.model_dump(mode="json", by_alias=True) for v in variants],
                     fingerprint.environment(scenario.digest()))
    console.print(f"[bold]{scenario.name}[/]: {len(variants)} variant(s) → {run_dir}")
    outcome = RunOutcome(run_dir, [])
    forkserver = _start_forkserver(opts, variants, run_dir)
    try:
        _run_variants(variants, run_dir, outcome, forkserver, console)
    except KeyboardInterrupt:
        outcome.interrupted = True
        console.print(f"[yellow]interrupted: kept {len(outcome.records)} finished record(s) in "
                      f"{run_dir}[/]")
    finally:
        if forkserver is not None:
            forkserver.close()
        shutil.rmtree(data_cache_dir(run_dir), ignore_errors=True)
    conclude(run_dir, outcome.records, opts, console, started, {
        "forkserver_ready_s": forkserver.ready_s if forkserver else None,
        "start_method": opts.start_method})
    return outcome


def conclude(run_dir: Path, records: list[dict[str, Any]], opts: RunOptions, console: Console,
             started: float, extra: dict[str, Any]) -> dict[str, Any]:
    """The end of a run, once every record is in: summary table, report, time breakdown (with
    the runner's peak RSS, which this part drives when there are many variants)."""
    render_summary(console, add_scaling_efficiency(records))
    console.print(f"results: {run_dir / results.RECORDS_FILE}")
    report_started = time.perf_counter()
    if opts.report:
        render_report(run_dir, opts.reports_dir / run_dir.name, console)
    breakdown = overhead.run_breakdown(records, time.perf_counter() - started, {
        "report_s": time.perf_counter() - report_started, **extra,
        "runner_peak_rss_mb": overhead.peak_rss_mb()})
    results.write_json(run_dir / results.TIMING_FILE, breakdown)
    console.print(overhead.describe(breakdown))
    return breakdown


def _start_forkserver(opts: RunOptions, variants: list[Variant], run_dir: Path
                      ) -> ForkServer | None:
    """Start importing TensorFlow at once, while the run is set up; None if nothing will fork."""
    if opts.start_method != "forkserver" or all(v.is_cluster for v in variants):
        return None
    return ForkServer(worker_env(), run_dir / "logs" / "forkserver.log", str(run_dir)).start()


def _run_variants(variants: list[Variant], run_dir: Path, outcome: RunOutcome,
                  forkserver: ForkServer | None, console: Console) -> None:
    parity = ParityJudge()
    with _progress_display(console) as progress:
        overall = progress.add_task("variants", total=len(variants))
        for n, variant in enumerate(variants, 1):
            progress.update(overall, description=f"variant {n}/{len(variants)}")
            steps = progress.add_task(f"  {variant.id}: starting", total=None)

            def on_progress(done: int, total: int, task: Any = steps, vid: str = variant.id
                            ) -> None:
                progress.update(task, completed=done, total=total, description=f"  {vid}")

            variant_started = time.perf_counter()
            record = launcher_for(variant, forkserver).run(variant, run_dir, on_progress)
            analysis_started = time.perf_counter()
            if (record.get("trace") or {}).get("status") == "captured":
                progress.update(steps, description=f"  {variant.id}: analysing trace")
                record = attach_trace_analysis(record, run_dir / "logs", forkserver)
            record = parity.judge(record)
            record.setdefault("timing", {})["parent"] = {
                "analysis_s": time.perf_counter() - analysis_started,
                "total_s": time.perf_counter() - variant_started}
            results.append_record(run_dir, record)
            outcome.records.append(record)
            progress.remove_task(steps)
            progress.advance(overall)
            console.print(render_outcome_line(record))


def render_report(run_dir: Path, out_dir: Path, console: Console) -> Path | None:
    """The run's HTML report; a report that cannot be written never costs the measured records."""
    from bench.report.site import render_site

    try:
        index = render_site([run_dir], out_dir)
    except (BenchError, OSError) as exc:
        console.print(f"[yellow]report not written: {exc}[/]")
        return None
    console.print(f"report: {index}")
    return index
