"""`bench perf`: bench measuring itself: where a run's wall time goes, CLI start-up, memory.

Everything runs as the user would run it, in subprocesses: `bench run SCENARIO` a few times per
start method (wall time, per-phase breakdown from the run's timing.json, duty cycle, fixed cost
per variant, the runner's and the workers' peak RSS), and the quick commands (`--help`,
`validate`, `list --no-devices`, `report`, `compare`) for their start-up time and peak RSS.
Medians over the runs, because this machine is shared and single runs wander.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import results
from bench.errors import BenchError
from bench.perf import overhead

TARGETS = {"wall_s": 60.0, "fixed_cost_median_s": 6.0, "duty_cycle": 0.5, "cli_start_s": 1.0,
           "runner_peak_rss_mb": 300.0, "harness_share_max": 0.02}


@dataclass(frozen=True)
class Timed:
    wall_s: float
    peak_rss_mb: float
    returncode: int


def bench_command() -> list[str]:
    """The installed `bench` script when there is one (what users start), else `python -m`."""
    script = shutil.which("bench")
    return [script] if script else [sys.executable, "-m", "bench"]


def timed_command(args: list[str], cwd: Path | None = None, ok_codes: tuple[int, ...] = (0,)
                  ) -> Timed:
    """Wall time and peak RSS of one child, from os.wait4. Linux carries a parent's peak over
    exec into the child's ru_maxrss, so the figure is max(the child's own, this process's peak
    so far): exact as long as `bench perf` itself stays smaller than what it times (about
    40 MB, the size of `bench --help`)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode not in ok_codes:
        tail = stderr.strip().splitlines()[-1:] or ["no output"]
        raise BenchError(f"{' '.join(args)} exited with {proc.returncode}: {tail[0]}")
    return Timed(wall, usage.ru_maxrss / 1024.0, proc.returncode)


def scenario_runs(scenario: Path, runs: int, start_method: str, workdir: Path,
                  extra_args: list[str] | None = None) -> list[dict[str, Any]]:
    """`bench run` `runs` times; each result is the run's timing.json plus worker memory."""
    out = []
    for n in range(runs):
        results_dir = workdir / f"{start_method}-{n}" / "results"
        timed = timed_command([*bench_command(), "run", str(scenario), "--results-dir",
                               str(results_dir), "--reports-dir", str(results_dir.parent /
                                                                      "reports"),
                               "--start-method", start_method, *(extra_args or [])])
        (run_dir,) = [p for p in results_dir.iterdir() if p.is_dir()]
        breakdown = results.read_json(run_dir / results.TIMING_FILE)
        records = results.read_records(run_dir)
        breakdown["process_wall_s"] = timed.wall_s
        breakdown["worker_peak_rss_mb"] = max((r.peak_rss_mb or 0.0 for r in records),
                                              default=0.0)
        breakdown["run_dir"] = str(run_dir)
        out.append(breakdown)
    return out


def cli_start_times(scenario: Path, run_dir: Path, baseline_dir: Path, repeats: int,
                    workdir: Path) -> dict[str, dict[str, float]]:
    """Median wall time and peak RSS of the commands that must start instantly."""
    commands = {
        "bench --help": ["--help"],
        "bench validate": ["validate", str(scenario)],
        "bench list --no-devices": ["list", "--no-devices"],
        "bench report": ["report", str(run_dir), "--out", str(workdir / "report-{n}")],
        "bench compare": ["compare", str(baseline_dir), str(run_dir)],
    }
    out = {}
    for label, args in commands.items():
        ok_codes = (0, 1) if label == "bench compare" else (0,)  # 1: it found a regression
        samples = [timed_command([*bench_command(), *[a.replace("{n}", str(n)) for a in args]],
                                 ok_codes=ok_codes)
                   for n in range(repeats)]
        out[label] = {"median_s": statistics.median(s.wall_s for s in samples),
                      "max_s": max(s.wall_s for s in samples),
                      "peak_rss_mb": max(s.peak_rss_mb for s in samples)}
    return out


def summarize_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over repeated runs of one start method."""
    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    phases = {p: statistics.median(r["phases_s"][p] for r in runs) for p in overhead.PHASES}
    variants = sorted(runs[0]["variants"])
    per_variant = {
        vid: {"fixed_s": statistics.median(overhead.fixed_cost_s(r["variants"][vid])
                                           for r in runs if vid in r["variants"]),
              "timed_s": statistics.median(r["variants"][vid]["timed"]
                                           for r in runs if vid in r["variants"])}
        for vid in variants}
    return {"runs": len(runs), "wall_s": med("wall_s"), "process_wall_s": med("process_wall_s"),
            "timed_s": med("timed_s"), "settling_s": phases["settling"],
            "duty_cycle": med("duty_cycle"),
            "duty_cycle_ceiling": med("duty_cycle_ceiling"),
            "fixed_cost_median_s": med("fixed_cost_median_s"),
            "runner_peak_rss_mb": med("runner_peak_rss_mb"),
            "harness_share_max": max(r.get("harness_share_max") or 0.0 for r in runs),
            "worker_peak_rss_mb": med("worker_peak_rss_mb"),
            "forkserver_ready_s": statistics.median(r.get("forkserver_ready_s") or 0.0
                                                    for r in runs),
            "phases_s": phases, "variants": per_variant,
            "run_dirs": [r["run_dir"] for r in runs]}


def self_benchmark(scenario: Path, runs: int, start_methods: list[str], cli_repeats: int,
                   workdir: Path | None = None) -> dict[str, Any]:
    workdir = workdir or Path(tempfile.mkdtemp(prefix="bench-perf-"))
    by_method = {m: summarize_runs(scenario_runs(scenario, runs, m, workdir))
                 for m in start_methods}
    run_dirs = [Path(d) for m in by_method.values() for d in m["run_dirs"]]
    cli = (cli_start_times(scenario, run_dirs[-1], run_dirs[0], cli_repeats, workdir)
           if len(run_dirs) > 1 else {})  # compare needs two runs
    return {"scenario": str(scenario), "workdir": str(workdir), "targets": TARGETS,
            "start_methods": by_method, "cli": cli}


def _target(value: float, key: str, lower_is_better: bool = True) -> str:
    goal = TARGETS[key]
    met = value <= goal if lower_is_better else value >= goal
    return "[green]met[/]" if met else "[red]missed[/]"


def render(console: Any, result: dict[str, Any]) -> None:
    """Tables for the terminal: per start method, per phase, per variant, then the CLI."""
    from rich.table import Table

    methods = result["start_methods"]
    summary = Table(title=f"bench run {result['scenario']} (median of runs)")
    summary.add_column("figure")
    for method, figures in methods.items():
        summary.add_column(f"{method} ×{figures['runs']}", justify="right")
    summary.add_column("target")
    rows = [("wall time, s", "wall_s", "{:.1f}", True), ("in timed windows, s", "timed_s",
                                                        "{:.1f}", None),
            ("in settling steps (untimed, after each gate), s", "settling_s", "{:.1f}", None),
            ("duty cycle", "duty_cycle", "{:.0%}", False),
            ("duty cycle with a harness that cost nothing", "duty_cycle_ceiling", "{:.0%}",
             None),
            ("fixed cost per variant (median), s", "fixed_cost_median_s", "{:.2f}", True),
            ("fork server ready after, s", "forkserver_ready_s", "{:.1f}", None),
            ("runner peak RSS, MB", "runner_peak_rss_mb", "{:.0f}", True),
            ("bench's per-step code ÷ median step (worst variant, any run)",
             "harness_share_max", "{:.2%}", True),
            ("largest worker peak RSS, MB", "worker_peak_rss_mb", "{:.0f}", None)]
    last = list(methods.values())[0]
    for label, key, fmt, lower in rows:
        goal = "" if lower is None else (f"{'≤' if lower else '≥'} {fmt.format(TARGETS[key])} "
                                         f"{_target(last[key], key, lower)}")
        summary.add_row(label, *(fmt.format(m[key]) for m in methods.values()), goal)
    console.print(summary)

    phases = Table(title="where the time went: seconds per phase, summed over variants")
    phases.add_column("phase")
    for method in methods:
        phases.add_column(method, justify="right")
    for phase in overhead.PHASES:
        phases.add_row(phase, *(f"{m['phases_s'][phase]:.2f}" for m in methods.values()))
    console.print(phases)

    variants = Table(title="per variant: fixed cost / timed window, seconds")
    variants.add_column("variant")
    for method in methods:
        variants.add_column(method, justify="right")
    for vid in last["variants"]:
        variants.add_row(vid, *(f"{m['variants'][vid]['fixed_s']:.2f} / "
                                f"{m['variants'][vid]['timed_s']:.2f}"
                                for m in methods.values() if vid in m["variants"]))
    console.print(variants)

    cli = Table(title="command start-up (median and slowest of repeats)")
    for column in ("command", "median s", "max s", "peak RSS MB", "target"):
        cli.add_column(column, justify="left" if column == "command" else "right")
    for label, figures in result["cli"].items():
        cli.add_row(label, f"{figures['median_s']:.2f}", f"{figures['max_s']:.2f}",
                    f"{figures['peak_rss_mb']:.0f}",
                    f"≤ 1 s {_target(figures['median_s'], 'cli_start_s')}")
    console.print(cli)
