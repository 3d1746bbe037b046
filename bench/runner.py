"""`bench run`: expand a scenario, launch each variant in isolation, record, summarise.

The parent never imports TensorFlow; it only spawns workers, watches their budgets and writes
records as each finishes, so Ctrl-C or a crash keeps everything already measured.
"""

from __future__ import annotations

import fnmatch
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench import fingerprint, interrupts, results
from bench.checks.verdicts import ParityJudge
from bench.errors import BenchError
from bench.launch import env_prepare, launcher_for, rounds
from bench.launch.forkserver import ForkServer, ForkServers
from bench.launch.local import data_cache_dir, temp_dir, worker_env
from bench.launch.slurm import SlurmOptions, slurm_problem
from bench.perf import overhead
from bench.placement import flavour_env, forks, is_legacy_keras
from bench.protocol import ProgressFn
from bench.record.measured import ParentTiming
from bench.record.model import VariantRecord
from bench.report.terminal import OutcomeLines, render_summary
from bench.scaling import add_scaling_efficiency
from bench.scenario.environment import candidate_point, interpreter
from bench.scenario.loading import load_scenario, with_overrides
from bench.scenario.matrix import block_steps, expand, with_candidate
from bench.scenario.quick import QUICK_MEASURE
from bench.scenario.schema import (
    CheckConfig,
    DataConfig,
    ModelConfig,
    Scenario,
    TrainConfig,
    Variant,
)
from bench.scenario.size import check_run_size
from bench.timing import round_up
from bench.trace.attach import attach_trace_analysis

# The command-line option that overrides each measure field.
_OVERRIDE_OPTIONS = {"warmup_steps": "--warmup", "steps": "--steps", "repeats": "--repeats",
                     "timeout_s": "--timeout"}


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
    interleave: bool | None = None  # None: the scenario's measure.interleave
    # Multiplies the rounds (repeats) and the budget after the other overrides: `bench nightly`
    # judges whole runs, and a run's figure is only as steady as its number of windows.
    rounds_factor: int = 1
    control: bool | None = None  # None: the scenario's measure.control
    # Submit every variant as a Slurm job (bench.launch.slurm) instead of running it here;
    # jobs run one after another (a job cannot wait at an interleaving gate).
    slurm: SlurmOptions | None = None
    env_cache: Path | None = None  # where [environment] virtualenvs are cached (None: default)
    # `--candidate-env FIELD=VALUE...`: every variant again in this upgrade candidate's environment
    candidate_env: list[str] = field(default_factory=list)


@dataclass
class RunOutcome:
    run_dir: Path
    records: list[VariantRecord]
    interrupted_by: str | None = None  # the signal that interrupted the run (SIGINT, SIGTERM)

    @property
    def interrupted(self) -> bool:
        return self.interrupted_by is not None

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if any(r.status == "failed" for r in self.records) else 0


def apply_overrides(scenario: Scenario, opts: RunOptions) -> Scenario:
    """Command-line measurement overrides (--quick, --steps, ...) on top of the file's values."""
    # --quick never makes a run longer than the scenario itself asks for (ResNet50 scenarios
    # already take few steps).
    update: dict[str, Any] = ({k: min(v, getattr(scenario.measure, k))
                               for k, v in QUICK_MEASURE.items()} if opts.quick else {})
    for key in ("warmup_steps", "steps", "repeats", "timeout_s"):
        if getattr(opts, key) is not None:
            update[key] = getattr(opts, key)
    if opts.quick:  # a smoke test's short epoch is no longer than its window
        update["epoch_steps"] = min(update["epoch_steps"],
                                    update.get("steps", scenario.measure.steps))
    k = block_steps(scenario.train)
    for key in ("warmup_steps", "steps"):
        if key in update:
            update[key] = round_up(update[key], k)
    if not update and opts.rounds_factor == 1:
        return scenario
    measure = with_overrides(scenario.measure, update, _OVERRIDE_OPTIONS)
    if opts.rounds_factor > 1:  # after the bounds: they hold what a scenario may ask for
        measure = measure.model_copy(update={key: getattr(measure, key) * opts.rounds_factor
                                             for key in ("repeats", "timeout_s")})
    return scenario.model_copy(update={"measure": measure})


def select(variants: list[Variant], patterns: list[str], source: str) -> list[Variant]:
    if not patterns:
        return variants
    chosen = [v for v in variants if any(fnmatch.fnmatch(v.id, p) for p in patterns)]
    if not chosen:
        raise BenchError(f"{source}: --only {' '.join(patterns)} matches no variant "
                         f"(have: {', '.join(v.id for v in variants)})")
    return chosen


def interleave_asked(scenario: Scenario, opts: RunOptions) -> bool:
    """Interleaving as asked: the command line's choice, else the scenario's."""
    return opts.interleave if opts.interleave is not None else scenario.measure.interleave


def prepare(path: Path, opts: RunOptions) -> tuple[Scenario, list[Variant]]:
    scenario = apply_overrides(load_scenario(path), opts)
    variants = expand(scenario, str(path))
    if opts.candidate_env:
        if scenario.environment is not None:
            raise BenchError(f"--candidate-env: {path} has an [environment] table of its own; "
                             "add the candidate to its lists instead")
        try:
            variants = with_candidate(variants, candidate_point(opts.candidate_env))
        except ValueError as exc:
            raise BenchError(f"--candidate-env: {exc}") from None
    variants = select(variants, opts.only, str(path))
    check_run_size(scenario, len(variants), str(path))
    if scenario.check.loss_parity:  # baselines first: every other variant is judged against one
        variants.sort(key=lambda v: not v.kind.baseline)
    # a [fault] variant's recovery is what it measures, one at a time: no twin to pair it with
    control = opts.control if opts.control is not None else scenario.measure.control
    if control and scenario.fault is None:
        variants = with_control_twin(variants)
        if interleave_asked(scenario, opts) and any(not v.is_cluster for v in variants):
            # beside the control pair, so it shares the first batch of live variants with them
            variants = [*variants[:2], yardstick(variants[0], 2), *variants[2:]]
            variants = [v.model_copy(update={"index": i}) for i, v in enumerate(variants)]
    return scenario, variants


def yardstick(template: Variant, index: int = 0) -> Variant:
    """The fixed calibration workload, the same in every run of every scenario: the seed MLP on
    synthetic MNIST-shaped data, default strategy, Keras fit, float32, global batch 64.

    It runs in the same interleaved rounds as the variants, so a comparison across runs can
    judge each variant relative to it (bench.compare.detector): a slow spell of the machine
    slows both and cancels, a slower model (the code under test) does not touch it.
    """
    return template.model_copy(update={
        "id": "yardstick", "index": index, "strategy": "default", "replicas": 1,
        "devices": "auto", "cross_device_ops": "auto", "workers": 1, "devices_per_worker": 1,
        "ps": 0, "collective": "auto", "partitioner": "none", "api": "fit",
        "precision": "float32", "distribute_dataset": None, "batch_rule": "weak",
        "per_replica_batch": 64, "global_batch": 64, "learning_rate": 1e-3, "lr_scaling": "none",
        "model": ModelConfig(), "data": DataConfig(name="synthetic"), "train": TrainConfig(),
        "measure": template.measure.model_copy(update={"trace_steps": 0, "checkpoint": None}),
        "check": CheckConfig(), "control": "yardstick"})


def with_control_twin(variants: list[Variant]) -> list[Variant]:
    """The run's baseline (its first default/one_device variant, else its first variant of any
    strategy, a cluster's too) and a twin of it, marked as the A/A control, first; the rest
    after them. Every run so states its own noise floor."""
    if not variants:
        return variants
    baseline = next((v for v in variants if v.kind.baseline), variants[0])
    base = baseline.model_copy(update={"control": "baseline"})
    twin = baseline.model_copy(update={"id": f"{baseline.id}-control", "control": "twin"})
    rest = [v for v in variants if v is not baseline]
    return [
        v.model_copy(update={"index": i})
        for i, v in enumerate([base, twin, *rest])
    ]


def _progress_display(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=True)


def run(path: Path, opts: RunOptions, console: Console) -> RunOutcome:
    scenario, variants = prepare(path, opts)
    if opts.slurm is not None and (problem := slurm_problem(opts.slurm)):
        raise BenchError(problem)
    if opts.slurm is not None and scenario.fault is not None:
        raise BenchError(f"{path}: [fault] is injected by bench's local cluster supervisor; "
                         "run it without --launcher slurm")
    # where its results go is writable before anything is built or run
    results.check_writable(opts.results_dir)
    if opts.report:
        results.check_writable(opts.reports_dir)
    envs = env_prepare.prepare(variants, str(path), console, opts.env_cache)
    started = time.perf_counter()  # the run's own time: building environments is not in it
    variants = envs.variants
    run_dir = results.create_run_dir(opts.results_dir, scenario.name)
    results.init_run(run_dir, path, [v.model_dump(mode="json", by_alias=True) for v in variants],
                     {**fingerprint.environment(scenario.digest()),
                      **({"environments": envs.environments} if envs.environments else {})})
    console.print(f"[bold]{scenario.name}[/]: {len(variants)} variant(s) → {run_dir}")
    outcome = RunOutcome(run_dir, [])
    runnable = envs.runnable()
    forkservers = ForkServers()
    interleave = interleave_asked(scenario, opts)
    if scenario.fault is not None:
        interleave = False  # the recovery is what is measured, on a cluster left to itself
    interleave = interleave and opts.slurm is None
    with interrupts.terminate_as_interrupt():
        try:
            temp_dir(run_dir).mkdir()
            _start_forkservers(opts, runnable, run_dir, forkservers)
            _run_variants(runnable, run_dir, outcome, forkservers, console,
                          interleave, scenario.measure.max_live,
                          opts.slurm, envs.failed_records())
        except KeyboardInterrupt as interrupt:
            outcome.interrupted_by = interrupts.signal_name(interrupt)
        finally:
            interrupts.ignore_interrupts()  # a second signal must not cut the teardown short
            forkservers.close()
            envs.release()
            for scratch in (data_cache_dir(run_dir), temp_dir(run_dir)):
                shutil.rmtree(scratch, ignore_errors=True)
            if outcome.interrupted_by is not None:
                said = interrupts.mark_interrupted(run_dir, outcome.interrupted_by,
                                                   len(outcome.records), len(variants))
                console.print(f"[yellow]{said}[/]")
    # the records are in: a signal now cuts only the summary and the report
    if cut := interrupts.interruptible(lambda: conclude(
            run_dir, outcome.records, opts, console, started, {
                "forkserver_ready_s": forkservers.ready_s, "start_method": opts.start_method,
                "environments_s": envs.seconds if envs.environments else None},
            untimed_width=rounds.untimed_width() if interleave else 1)):
        outcome.interrupted_by = outcome.interrupted_by or cut
        console.print(f"[yellow]interrupted ({cut}) while summing up: the records are in "
                      f"{run_dir}[/]")
    return outcome


def conclude(run_dir: Path, records: list[VariantRecord], opts: RunOptions, console: Console,
             started: float, extra: dict[str, Any], untimed_width: int = 1) -> dict[str, Any]:
    """The end of a run, once every record is in: summary table, report, time breakdown (with
    the runner's peak RSS, which this part drives when there are many variants)."""
    render_summary(console, add_scaling_efficiency(records))
    console.print(f"results: {run_dir / results.RECORDS_FILE}")
    report_started = time.perf_counter()
    write_tensorboard_events(run_dir, console)
    if opts.report:
        render_report(run_dir, opts.reports_dir / run_dir.name, console, open_run=run_dir.name)
    breakdown = overhead.run_breakdown(records, time.perf_counter() - started, {
        "report_s": time.perf_counter() - report_started, **extra,
        "runner_peak_rss_mb": overhead.peak_rss_mb()}, untimed_width)
    results.write_json(run_dir / results.TIMING_FILE, breakdown)
    console.print(overhead.describe(breakdown))
    return breakdown


def _start_forkservers(opts: RunOptions, variants: list[Variant], run_dir: Path,
                       servers: ForkServers) -> None:
    """One fork server per environment and Keras flavour whose variants fork (its own
    TensorFlow imported once, with tf-keras where TF_USE_LEGACY_KERAS asks for it), each
    starting at once, while the run is set up, into `servers`; none for a run where nothing
    forks."""
    if opts.start_method != "forkserver" or opts.slurm is not None:
        return
    for v in variants:
        python, keras = interpreter(v.environment), v.train.keras
        if not forks(v) or servers.get(python, keras) is not None:
            continue
        name = ["forkserver"]
        if python != sys.executable and v.environment:
            name.append(v.environment.label)
        if is_legacy_keras(v):
            name.append("tf_keras")
        log = run_dir / results.LOGS_DIR / ".".join([*name, "log"])
        servers.add(ForkServer(worker_env(flavour_env(v)), log, str(run_dir),
                               python=python).start(), keras)


def _run_variants(variants: list[Variant], run_dir: Path, outcome: RunOutcome,
                  forkservers: ForkServers, console: Console, interleave: bool,
                  max_live: int | str, slurm: SlurmOptions | None = None,
                  unbuilt: list[VariantRecord] | None = None) -> None:
    """Variants in interleaved rounds (batches of at most `max_live` alive at once; a cluster
    variant is one participant), or one after another. Each record is analysed, judged,
    appended and printed as it arrives; `unbuilt` (variants whose environment did not build)
    first."""
    parity = ParityJudge()
    pythons = {v.id: interpreter(v.environment) for v in variants}
    with _progress_display(console) as progress:
        overall = progress.add_task("variants", total=len(variants) + len(unbuilt or []))

        def progress_for(variant: Variant) -> ProgressFn:
            steps = progress.add_task(f"  {variant.id}: starting", total=None)
            tasks[variant.id] = steps

            def on_progress(done: int, total: int) -> None:
                progress.update(steps, completed=done, total=total, description=f"  {variant.id}")
            return on_progress

        tasks: dict[str, Any] = {}
        outcome_line = OutcomeLines()

        def take(record: VariantRecord, started: float) -> None:
            analysis_started = time.perf_counter()
            if record.trace is not None and record.trace.status == "captured":
                python = pythons.get(str(record.variant_id), sys.executable)
                record = attach_trace_analysis(record, run_dir / results.LOGS_DIR,
                                               forkservers.get(python), python)
            record = parity.judge(record)
            analysis_s = time.perf_counter() - analysis_started
            # interleaved: its own running time (the batch's wall time is every variant's)
            total_s = ((record.wall_s or 0.0) + analysis_s if record.interleave
                       else time.perf_counter() - started)
            record.section("timing").parent = ParentTiming(analysis_s=analysis_s, total_s=total_s)
            results.append_record(run_dir, record)
            outcome.records.append(record)
            if (task := tasks.pop(str(record.variant_id), None)) is not None:
                progress.remove_task(task)
            progress.advance(overall)
            console.print(outcome_line(record))

        for record in unbuilt or []:
            take(record, time.perf_counter())
        if interleave:
            live = rounds.max_live_for(len(variants)) if max_live == "auto" else int(max_live)
            for batch in rounds.batches(variants, live):
                started = time.perf_counter()
                progress.update(overall, description=f"{len(batch)} variants, interleaved")
                for record in rounds.play(batch, run_dir, forkservers, progress_for):
                    take(record, started)
            return
        for variant in variants:
            progress.update(overall, description=f"variant {len(outcome.records) + 1}/"
                                                 f"{len(variants)}")
            started = time.perf_counter()
            if variant.control == "twin" and not any(r.ok and r.control_role == "baseline"
                                                     for r in outcome.records):
                take(VariantRecord.skipped(variant, rounds.NOTHING_TO_CALIBRATE["twin"]), started)
                continue
            record = launcher_for(variant, forkservers, slurm).run(variant, run_dir,
                                                                   progress_for(variant))
            take(record, started)


def write_tensorboard_events(run_dir: Path, console: Console) -> None:
    """TensorBoard's view of the run beside each variant's profile (bench.report.tensorboard_events);
    without tensorboard installed, one line says how to get it and the run goes on."""
    from bench.report.tensorboard_events import write_run_events

    try:
        written = write_run_events(run_dir)
    except (BenchError, OSError) as exc:
        console.print(f"[yellow]TensorBoard events not written: {exc}[/]")
        return
    if written:
        console.print(f"tensorboard: bench tensorboard {run_dir}")


def render_report(run_dir: Path, out_dir: Path, console: Console,
                  open_run: str | None = None) -> Path | None:
    """The HTML report of `run_dir` (a run or a store); a report that cannot be written never
    costs the measured records. The path printed is run `open_run`'s page where one is named
    (what the user of a single run opens first), else the site's index."""
    from bench.report.site import render_site, run_page_name

    try:
        index = render_site([run_dir], out_dir)
    except (BenchError, OSError) as exc:
        console.print(f"[yellow]report not written: {exc}[/]")
        return None
    console.print(f"report: {index.parent / run_page_name(open_run) if open_run else index}")
    return index
