"""Commands that run benchmarks: `bench run`, `bench nightly` and `bench perf`."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from bench.cli.common import EnvCacheOption, ScenarioArg, console
from bench.scenario.quick import quick_summary

# Nightly runs take 4x the scenario's rounds: a variant's run figure moved 4-9% between runs of
# unchanged code with 6 windows here (bench.compare.runlevel), and 4x the windows halves that,
# which a 10% slowdown needs to stand out. It costs about a minute per night for the default set.
NIGHTLY_ROUNDS_FACTOR = 4

LAUNCHERS = ("local", "slurm")


class StartMethod(enum.StrEnum):
    forkserver = "forkserver"
    spawn = "spawn"


def run(
    scenario: ScenarioArg,
    results_dir: Annotated[Path, typer.Option("--results-dir", "-o",
                                              help="Where run directories are created.")
                           ] = Path("results"),
    quick: Annotated[bool, typer.Option(help=f"Smoke test: {quick_summary()}.")] = False,
    warmup: Annotated[Optional[int], typer.Option(min=0, help="Override measure.warmup_steps."
                                                  )] = None,
    steps: Annotated[Optional[int], typer.Option(min=1, help="Override measure.steps.")] = None,
    repeats: Annotated[Optional[int], typer.Option(min=1, help="Override measure.repeats.")
                       ] = None,
    timeout: Annotated[Optional[float], typer.Option(min=1, help="Override measure.timeout_s "
                                                     "(wall-clock budget per variant).")] = None,
    only: Annotated[Optional[list[str]], typer.Option(help="Run only variants whose id matches "
                                                      "this glob (repeatable).")] = None,
    report: Annotated[bool, typer.Option(help="Render the HTML report into "
                                              "REPORTS_DIR/<run name>/ at the end.")] = True,
    reports_dir: Annotated[Path, typer.Option(help="Where --report writes.")] = Path("reports"),
    start_method: Annotated[StartMethod, typer.Option(
        help="forkserver: fork each variant's process from a server that imported TensorFlow "
             "once (fast); spawn: a new interpreter per variant.")] = StartMethod.forkserver,
    interleave: Annotated[Optional[bool], typer.Option(
        "--interleave/--no-interleave",
        help="Interleave the variants' timed windows in shuffled rounds, so machine drift hits "
             "every variant alike (default: measure.interleave, on); --no-interleave runs them "
             "one after another.")] = None,
    control: Annotated[Optional[bool], typer.Option(
        "--control/--no-control",
        help="Add an A/A twin of the baseline variant and print the run's noise floor "
             "(default: measure.control, on).")] = None,
    launcher: Annotated[str, typer.Option(
        help="local: run every variant on this host; slurm: submit each variant as a Slurm "
             "job (sbatch) and gather its record (the run directory must be on a filesystem "
             "the compute nodes share).")] = "local",
    partition: Annotated[Optional[str], typer.Option(
        help="Slurm partition for --launcher slurm (default: Slurm's default).")] = None,
    sbatch_arg: Annotated[Optional[list[str]], typer.Option(
        help="Another #SBATCH option for --launcher slurm, e.g. --sbatch-arg=--gres=gpu:8 "
             "(repeatable).")] = None,
    env_cache: EnvCacheOption = None,
) -> None:
    """Run every variant of SCENARIO, each in its own process, and write a run directory.

    Exit code: 0 when every variant is ok or skipped, 1 when any failed, 2 on bad input (also
    a --results-dir or, with --report, a --reports-dir that cannot be written: refused before
    anything runs), 130 when interrupted (finished records are kept).
    """
    from bench.errors import BenchError
    from bench.interrupts import ignore_interrupts
    from bench.launch.slurm import SlurmOptions
    from bench.runner import RunOptions
    from bench.runner import run as run_scenario

    if launcher not in LAUNCHERS:  # checked here for a one-line error, not typer's usage box
        raise BenchError(f"--launcher: unknown launcher {launcher!r} (choose from: "
                         f"{', '.join(LAUNCHERS)})")
    if launcher == "local" and (partition or sbatch_arg):
        raise BenchError("--partition and --sbatch-arg need --launcher slurm")
    slurm = SlurmOptions(partition, tuple(sbatch_arg or ())) if launcher == "slurm" else None
    opts = RunOptions(results_dir=results_dir, quick=quick, warmup_steps=warmup, steps=steps,
                      repeats=repeats, timeout_s=timeout, only=only or [], report=report,
                      reports_dir=reports_dir, start_method=start_method.value,
                      interleave=interleave, control=control, slurm=slurm, env_cache=env_cache)
    outcome = run_scenario(scenario, opts, console)
    if outcome.interrupted:
        ignore_interrupts()  # leaving with 130: a further signal must not change how it ends
    raise typer.Exit(code=outcome.exit_code)


def nightly(
    scenarios: Annotated[Optional[list[Path]], typer.Argument(
        help="Scenario files (default: the nightly set, scenarios/mnist_mirrored.toml).",
        show_default=False)] = None,
    store: Annotated[Path, typer.Option(help="Baseline store: every nightly run is kept here.")
                     ] = Path("results/nightly"),
    reports_dir: Annotated[Path, typer.Option(help="The store's HTML site and each night's "
                                                   "comparison (Markdown, JSON).")
                           ] = Path("reports/nightly"),
    quick: Annotated[bool, typer.Option(help="Few steps (smoke test of the job itself).")] = False,
    confirm: Annotated[int, typer.Option(min=0, help="Re-runs of each suspected regression; it "
                                                     "counts only if every re-run regresses.")
                       ] = 2,
    only: Annotated[Optional[list[str]], typer.Option(help="Run and gate only variants whose id "
                                                      "matches this glob (repeatable).")] = None,
    rounds_factor: Annotated[int, typer.Option(min=1, help="Run N times the scenario's rounds "
                                                         "(repeats): the gate judges whole runs, "
                                                         "each as steady as its windows are many.")
                             ] = NIGHTLY_ROUNDS_FACTOR,
    candidate_env: Annotated[Optional[list[str]], typer.Option(
        help="Also run every variant, in the same rounds, in an upgrade candidate's environment, "
             "given as fields of an environment table (repeatable, e.g. --candidate-env "
             "tensorflow=2.22.*), and judge it against the pinned one (reported, not gating)."
    )] = None,
    env_cache: EnvCacheOption = None,
    keep_traces: Annotated[Optional[int], typer.Option(
        min=0, help="After gating, drop the profiler traces of all but the newest N runs of "
                    "each scenario in the store (records are kept; see `bench prune`). "
                    "Default: keep every trace.")] = None,
) -> None:
    """Run SCENARIOS into the store, gate each new run against the store, render the report.

    Exit code: 1 when a run regressed against the store (statistically real slowdown beyond the
    minimum effect and outside run-to-run variation, or a variant that vanished or now fails),
    0 otherwise (also on the first night, which starts the store), 2 on bad input or a file
    that cannot be read or written (never 1), 130 when interrupted.
    """
    from bench.nightly import NIGHTLY_SCENARIOS
    from bench.nightly import nightly as run_nightly
    from bench.runner import RunOptions

    outcome = run_nightly(scenarios or list(NIGHTLY_SCENARIOS), store, reports_dir,
                          RunOptions(quick=quick, only=only or [], rounds_factor=rounds_factor,
                                     candidate_env=candidate_env or [], env_cache=env_cache),
                          console,
                          confirm_runs=confirm, keep_traces=keep_traces)
    raise typer.Exit(code=outcome.exit_code)


def perf(
    scenario: Annotated[Path, typer.Argument(help="Scenario to time (default: the main job).")
                        ] = Path("scenarios/mnist_mirrored.toml"),
    runs: Annotated[int, typer.Option(min=1, help="bench run repeats per start method (the "
                                                  "command timings need two runs in all).")] = 3,
    start_method: Annotated[Optional[list[StartMethod]], typer.Option(
        help="Start method(s) to time (repeatable; default forkserver).")] = None,
    cli_repeats: Annotated[int, typer.Option(min=1, help="Repeats per quick command.")] = 5,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Also write the figures "
                                                     "here as JSON.")] = None,
) -> None:
    """Bench timing itself: wall time per phase and variant, duty cycle, command start-up and
    memory, as medians over repeated real runs of SCENARIO."""
    from bench.perf.self_benchmark import render, self_benchmark
    from bench.scenario.loading import load_scenario

    load_scenario(scenario)  # bad input fails here, before the status spinner
    methods = [m.value for m in start_method or [StartMethod.forkserver]]
    with console.status(f"timing {len(methods) * runs} run(s) of {scenario}..."):
        result = self_benchmark(scenario, runs, methods, cli_repeats)
    render(console, result)
    if json_out:
        from bench.results import write_text_atomic

        write_text_atomic(json_out, json.dumps(result, indent=1))
        console.print(f"figures: {json_out}")
