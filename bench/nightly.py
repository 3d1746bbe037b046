"""`bench nightly`: run the nightly scenarios into a baseline store, gate, report.

Each scenario's new run is compared with the store's earlier runs of the same scenario on the same
machine (bench.fingerprint.machine; a new machine starts its own baseline in the store). Once the
store holds a few runs, each variant is judged by whole runs (bench.compare.runlevel): one figure
per run, in yardstick steps, and suspected regressions are re-run so the test has several
candidate runs against the store's. Before that, as `bench compare STORE RUN` would, and a
suspect must regress in every re-run (bursts of interference on a shared machine rarely hit the
same variant twice; a real slowdown always does). The store then keeps the
new run, so tomorrow's gate has one more run of history. The HTML site
of the whole store (with the trend and its detected steps) is rendered at the end, and each
comparison is written beside it as Markdown and JSON for CI artefacts.

With `--candidate-env` (e.g. `tensorflow=2.22.*`) every variant also runs, in the same
interleaved rounds, in that upgrade candidate's environment: the store gate leaves the candidate
out (adding or dropping one never trips it), and the upgrade gate (bench.compare.environments)
judges each candidate variant against its pinned twin of the same run. Its verdict is printed and
written beside the night's comparison; the exit code stays the pinned gate's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from bench import results
from bench.compare import runlevel, stores
from bench.compare.detector import DEFAULT_ALPHA, Comparison, compare_records
from bench.compare.figures import RunFigures, run_figures
from bench.compare.stores import Store, candidate, load_store, prune_traces, write_reports
from bench.errors import BenchError
from bench.record.model import VariantRecord
from bench.report.manifest import Manifest, run_stamp
from bench.report.site import prepare_out_dir
from bench.report.terminal import render_comparison
from bench.runner import RunOptions, prepare, render_report
from bench.runner import run as run_scenario

# The nightly scenario set (relative to the repository root): what the gate watches every night,
# for `bench nightly` without arguments, `nox -s nightly` and tests/benchmarks.
NIGHTLY_SCENARIOS = (Path("scenarios/mnist_mirrored.toml"),)


@dataclass
class NightlyOutcome:
    regressed: list[str] = field(default_factory=list)  # run names that regressed
    upgrade_regressed: list[str] = field(default_factory=list)  # their candidate did (no exit 1)
    interrupted: bool = False
    report: Path | None = None

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.regressed else 0


def stored_figures(store: Store, site: Path) -> list[RunFigures]:
    """Each stored run's figures: from the nightly site's manifest where the run is unchanged
    since the last render (bench.report.manifest), else from its records, read once."""
    kept = Manifest.load(site)
    out = []
    for run_dir in store.dirs:
        summary = kept.summary(run_dir, run_stamp(run_dir))
        out.append(summary.figures if summary else run_figures(results.read_records(run_dir)))
    return out


def gate(run_dir: Path, store: Path, out_dir: Path, console: Console,
         rerun: Callable[[list[str]], Path] | None = None, confirm_runs: int = 2
         ) -> bool | None:
    """Compare one new run with the store; True on regression, None without a baseline yet.

    With a store of `runlevel.MIN_STORE_RUNS` runs or more, each variant is judged by whole runs
    (`bench.compare.runlevel`): suspects are re-run `confirm_runs` times (`rerun(variant ids)` →
    a run dir) and every re-run adds a candidate run to the test. With a smaller store, a
    suspect must regress in every re-run (`bench.compare.reruns.confirm`).
    """
    stored, scenario = candidate(run_dir)
    records = pinned(stored)
    baseline = load_store(store, scenario, exclude=run_dir, select=pinned,
                          machine=stores.run_machine(run_dir))
    if baseline is None:
        console.print(f"[yellow]{scenario}: no earlier run in {store}; this run starts the "
                      "baseline store[/]")
        return None
    if not baseline.dirs:
        why = stores.no_baseline_here(store, scenario, run_dir, baseline)
        console.print(f"[yellow]{escape(why)}; this run starts this machine's baseline[/]")
        return None
    if baseline.elsewhere:
        console.print(f"{len(baseline.elsewhere)} stored run(s) of {scenario} ran on another "
                      "machine: set aside")
    confirming = rerun is not None and confirm_runs > 0
    by_runs = runlevel.usable(baseline.history)
    figures = stored_figures(baseline, out_dir)

    def judge(candidate_records: list[VariantRecord]) -> Comparison:
        # Re-runs stand in for the run-to-run interval, whose t-quantile for a few stored runs
        # would hide all but huge slowdowns (bench.compare.simulation.nightly_rates).
        result = compare_records(baseline.history[-1], candidate_records,
                                 history=baseline.history, history_figures=figures,
                                 run_to_run=not confirming and not by_runs)
        if result.refused:
            raise BenchError(f"{run_dir}: {result.refused}")
        return result

    result = judge(records)
    if by_runs:
        suspects = runlevel.suspects(result, figures, records)
    else:
        suspects = [v.key for v in result.verdicts if v.status == "regression"]
    reruns: list[list[dict]] = []
    if suspects and confirming:
        console.print(f"[yellow]suspected: {', '.join(suspects)}; re-running them "
                      f"{confirm_runs} time(s) to confirm[/]")
        reruns = [pinned(results.read_records(rerun(suspects))) for _ in range(confirm_runs)]
    result = runlevel.decide_night(result, figures, records, reruns, judge)
    results.make_dirs(out_dir)
    write_reports(result, baseline, run_dir, out_dir / f"compare-{run_dir.name}.md",
                  out_dir / f"compare-{run_dir.name}.json")
    render_comparison(console, result, baseline.label, run_dir.name, DEFAULT_ALPHA)
    stores.refuse_damaged(run_dir, stored)
    return result.regressed


def pinned(records: list[VariantRecord]) -> list[VariantRecord]:
    """The records the store gate judges: all but an upgrade candidate's (--candidate-env)."""
    return [r for r in records if not (r.variant.environment and r.variant.environment.candidate)]


def upgrade_gate(run_dir: Path, out_dir: Path, console: Console) -> bool | None:
    """The upgrade candidate's variants against their pinned twins of the same run; True on a
    regression, None when the run has no candidate variant."""
    from bench.compare.environments import NO_ENVIRONMENT
    from bench.compare.environments import gate as environment_gate
    from bench.compare.stores import Store

    records = results.read_records(run_dir)
    kept = pinned(records)
    labels = sorted({str(r.variant.environment.label) for r in records
                     if r not in kept and r.variant.environment})
    if not labels:
        return None
    regressed = False
    for label in labels:
        result = environment_gate([records], records, NO_ENVIRONMENT, label,
                                  (str(run_dir), str(run_dir)), same_run=True)
        write_reports(result, Store([run_dir], [records]), run_dir,
                      out_dir / f"compare-{run_dir.name}-{label}.md",
                      out_dir / f"compare-{run_dir.name}-{label}.json")
        render_comparison(console, result, f"{run_dir.name} (pinned)",
                          f"{run_dir.name} ({label}, upgrade candidate)", DEFAULT_ALPHA)
        regressed = regressed or result.regressed
    return regressed


def nightly(scenarios: list[Path], store: Path, reports_dir: Path, opts: RunOptions,
            console: Console, confirm_runs: int = 2, keep_traces: int | None = None
            ) -> NightlyOutcome:
    """Run, gate and render (see the module's docstring); with `keep_traces`, the store keeps
    the traces of its newest runs only, and every run's records. The render is incremental
    (bench.report.manifest): tonight's page, its scenario's page and the index."""
    outcome = NightlyOutcome()
    run_opts = RunOptions(**{**vars(opts), "results_dir": store, "report": False})
    for path in scenarios:  # every file valid before anything runs
        prepare(path, run_opts)
    results.check_writable(store)  # both ours to write (or refused) before an hour of running
    prepare_out_dir(reports_dir)
    for path in scenarios:
        ran = run_scenario(path, run_opts, console)
        if ran.interrupted:
            outcome.interrupted = True
            break

        def rerun(variant_ids: list[str], path: Path = path, night: Path = ran.run_dir) -> Path:
            """The suspects again, in fresh processes, into the night's own run directory (the
            report's trend judges the night with them, as the gate does)."""
            again = RunOptions(**{**vars(run_opts), "only": variant_ids,
                                  "results_dir": night / results.CONFIRMATIONS_DIR})
            return run_scenario(path, again, console).run_dir

        if gate(ran.run_dir, store, reports_dir, console, rerun, confirm_runs):
            outcome.regressed.append(ran.run_dir.name)
        if upgrade_gate(ran.run_dir, reports_dir, console):
            outcome.upgrade_regressed.append(ran.run_dir.name)
    if keep_traces is not None and store.is_dir():
        pruned = prune_traces(store, keep_traces)
        console.print(f"store: dropped the traces of {len(pruned)} older run(s), keeping the "
                      f"newest {keep_traces} runs' traces and every run's records")
    outcome.report = render_report(store, reports_dir, console)
    if outcome.upgrade_regressed:
        console.print(f"[yellow]nightly: the upgrade candidate regressed in "
                      f"{', '.join(outcome.upgrade_regressed)} (reported, not gating)[/]")
    if outcome.regressed:
        console.print(f"[red]nightly: REGRESSION in {', '.join(outcome.regressed)}[/]")
    elif not outcome.interrupted:
        console.print("[green]nightly: no regression[/]")
    return outcome
