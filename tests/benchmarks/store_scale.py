"""How `bench report` and `bench nightly`'s gate and render scale with the size of a nightly store.

A store like a year of nightlies is built from ONE real run of the default scenario: each night
is a copy of it (records, variants, environment, logs and traces, the last two as hard links)
with each variant's step samples scaled by a factor drawn from 0.97-1.03, a start time one day
later and a run name of its own. For each store size the script prints

- `bench report STORE --out SITE` from cold (a fresh site), in a fresh process;
- the same command again after one more night joined the store (the site already there);
- the peak memory (VmHWM) of those processes and the site's size on disk;

and, on the largest store, what `bench nightly` spends beyond its own runs: the gate of a new
night against the store (its suspects' re-runs stood in for by copies of the night, so no
TensorFlow runs) and the render of the store's site, timed directly in a fresh process.

    python tests/benchmarks/store_scale.py --source RUN_DIR --sizes 10 100 1000 --work DIR

Without --source it makes the real run first (`bench run scenarios/mnist_mirrored.toml
--no-report`, about a minute). `test_store_scale.py` runs it as a benchmark with targets.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIRST_NIGHT = datetime(2027, 1, 1, 3, 17, tzinfo=UTC)
SCALE = (0.97, 1.03)

# Runs in a fresh interpreter: prints its peak resident memory (VmHWM) on exit, whatever the
# code does (typer exits through SystemExit).
_PEAK = ("import atexit, sys\n"
         "def _peak():\n"
         "    for line in open('/proc/self/status'):\n"
         "        if line.startswith('VmHWM:'):\n"
         "            sys.stderr.write('PEAK_KB ' + line.split()[1] + '\\n')\n"
         "atexit.register(_peak)\n")

_BENCH_CLI = _PEAK + "sys.argv = ['bench', *sys.argv[1:]]\nfrom bench.cli import main\nmain()\n"

# The gate and the render of `bench nightly`, timed apart, without running any scenario: the
# suspects' re-runs are copies of tonight's run.
_NIGHTLY = _PEAK + """
import shutil, time, json
from pathlib import Path
from rich.console import Console
from bench.nightly import gate
from bench.runner import render_report
night, store, reports, spare = map(Path, sys.argv[1:5])
console = Console(file=open('/dev/null', 'w'))
reruns = iter(range(100))
def rerun(ids):
    target = night / 'confirmations' / f'{night.name}-{next(reruns)}'
    shutil.copytree(spare, target, dirs_exist_ok=True)
    return target
t0 = time.perf_counter()
regressed = gate(night, store, reports, console, rerun, 2)
t1 = time.perf_counter()
render_report(store, reports, console)
t2 = time.perf_counter()
print(json.dumps({'gate_s': t1 - t0, 'render_s': t2 - t1, 'regressed': regressed}))
"""


def scaled(record: dict[str, Any], factor: float) -> dict[str, Any]:
    """The record as if every step of the variant took `factor` times as long."""
    rec = json.loads(json.dumps(record))
    samples = rec.get("samples") or {}
    for key, value in samples.items():
        if isinstance(value, list) and value and isinstance(value[0], list):
            samples[key] = [[s * factor for s in window] for window in value]
        elif isinstance(value, list):
            samples[key] = [s * factor if isinstance(s, (int, float)) else s for s in value]
    for key, value in (rec.get("step_time") or {}).items():
        if isinstance(value, (int, float)) and key != "n":
            rec["step_time"][key] = value * factor
    for key, value in (rec.get("throughput") or {}).items():
        if key == "per_repeat" and isinstance(value, list):
            rec["throughput"][key] = [v / factor for v in value]
        elif isinstance(value, (int, float)) and key != "spread_pct":
            rec["throughput"][key] = value / factor
    return rec


def _link_tree(source: Path, target: Path) -> None:
    """Hard links: a thousand copies of a run's traces cost no disk and no time."""
    shutil.copytree(source, target, copy_function=os.link)


def write_night(source: Path, store: Path, night: int, rng: random.Random) -> Path:
    """Night `night` of the store: a copy of `source` with scaled samples, one day later."""
    when = FIRST_NIGHT + timedelta(days=night)
    records = [json.loads(line) for line in (source / "records.jsonl").read_text().splitlines()
               if line.strip()]
    name = f"{records[0]['variant']['scenario_name']}-{when.strftime('%Y%m%dT%H%M%SZ')}"
    run = store / name
    run.mkdir(parents=True)
    for item in source.iterdir():
        if item.name in ("records.jsonl", "environment.json"):
            continue
        if item.is_dir():
            _link_tree(item, run / item.name)
        else:
            shutil.copyfile(item, run / item.name)
    environment = json.loads((source / "environment.json").read_text())
    environment["started_at"] = when.isoformat(timespec="seconds")
    (run / "environment.json").write_text(json.dumps(environment, indent=2))
    with open(run / "records.jsonl", "w", encoding="utf-8") as out:
        for rec in records:
            out.write(json.dumps(scaled(rec, rng.uniform(*SCALE))) + "\n")
    return run


def build_store(source: Path, store: Path, nights: int, seed: int = 0) -> list[Path]:
    rng = random.Random(seed)
    return [write_night(source, store, n, rng) for n in range(nights)]


def timed(code: str, *args: str, timeout: float) -> dict[str, Any]:
    """Run `code` in a fresh interpreter: wall seconds, peak MB, its stdout; None on timeout."""
    start, used = time.perf_counter(), _children_cpu()
    with subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, cwd=REPO) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            peak_so_far = _peak_of(proc.pid)  # how much it held when stopped
            proc.kill()
            proc.communicate()
            return {"seconds": None, "peak_mb": peak_so_far, "stdout": "", "timeout": timeout}
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"failed ({proc.returncode}): {stderr[-2000:]}")
    peak = [int(line.split()[1]) for line in stderr.splitlines() if line.startswith("PEAK_KB")]
    return {"seconds": seconds, "cpu_s": _children_cpu() - used,
            "peak_mb": peak[-1] / 1024 if peak else None, "stdout": stdout}


def _children_cpu() -> float:
    """User + system seconds of the finished child processes: the work itself, which a machine
    shared with other jobs stretches less than the wall clock."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _peak_of(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def site_mb(site: Path) -> float:
    return sum(p.stat().st_size for p in site.rglob("*") if p.is_file()) / 1e6


def run_page_kb(site: Path) -> float:
    pages = sorted(site.glob("run-*.html"))
    return pages[-1].stat().st_size / 1e3 if pages else 0.0


def measure_size(source: Path, work: Path, nights: int, timeout: float,
                 nightly: bool) -> dict[str, Any]:
    store, site = work / f"store{nights}", work / f"site{nights}"
    for path in (store, site):
        shutil.rmtree(path, ignore_errors=True)
    rng = random.Random(nights)
    build_store(source, store, nights, seed=nights)
    cold = timed(_BENCH_CLI, "report", str(store), "--out", str(site), timeout=timeout)
    row: dict[str, Any] = {"runs": nights, "cold_s": cold["seconds"], "cold_cpu_s": cold.get("cpu_s"),
                           "cold_peak_mb": cold["peak_mb"]}
    if cold["seconds"] is None:
        row["stopped_after_s"] = timeout
        return row
    write_night(source, store, nights, rng)
    again = timed(_BENCH_CLI, "report", str(store), "--out", str(site), timeout=timeout)
    row.update(plus_one_s=again["seconds"], plus_one_cpu_s=again.get("cpu_s"),
               plus_one_peak_mb=again["peak_mb"],
               site_mb=site_mb(site), run_page_kb=run_page_kb(site))
    if nightly and again["seconds"] is not None:
        # Tonight's run joins the store; yesterday's site is the nightly reports folder.
        reports = site
        night = write_night(source, store, nights + 1, rng)
        spare = work / "spare-night"
        shutil.rmtree(spare, ignore_errors=True)
        shutil.copytree(night, spare, symlinks=True)
        result = timed(_NIGHTLY, str(night), str(store), str(reports), str(spare),
                       timeout=timeout)
        figures = json.loads(result["stdout"].splitlines()[-1]) if result["stdout"] else {}
        row.update(nightly_gate_s=figures.get("gate_s"), nightly_render_s=figures.get("render_s"),
                   nightly_cpu_s=result.get("cpu_s"), nightly_peak_mb=result["peak_mb"])
    return row


def open_in_browser(page: Path, screenshot: Path, rounds: int = 3) -> dict[str, Any]:
    """The page opened in headless Chromium (tests/browser.py): the median seconds from
    navigation to every chart drawn, over `rounds` openings, and a screenshot."""
    sys.path.insert(0, str(REPO))
    from tests.browser import open_page

    times, report = [], None
    for i in range(rounds):
        report = open_page(page, screenshot=screenshot if i == 0 else None, wait_s=60)
        times.append(report.load_s)
    assert report is not None
    drawn = [t for t in times if t is not None]
    return {"page": str(page), "page_kb": page.stat().st_size / 1e3,
            "load_s": sorted(drawn)[len(drawn) // 2] if len(drawn) == rounds else None,
            "load_s_each": times, "js_errors": report.js_errors,
            "charts_drawn": all(report.charts.values()), "screenshot": str(screenshot)}


def real_run(work: Path) -> Path:
    """One real run of the default scenario (about a minute here)."""
    out = work / "source"
    subprocess.run([sys.executable, "-m", "bench", "run", "scenarios/mnist_mirrored.toml",
                    "--no-report", "-o", str(out)], cwd=REPO, check=True)
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run


def _cell(value: Any, fmt: str) -> str:
    return "stopped" if value is None else format(value, fmt)


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| runs | `bench report` cold (CPU) | after one more run (CPU) | peak memory "
             "| site on disk | newest run page | nightly gate + render |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        peak = max((v for k, v in r.items() if k.endswith("peak_mb") and v), default=None)
        nightly = ("-" if "nightly_gate_s" not in r else
                   f"{_cell(r['nightly_gate_s'], '.1f')} s + {_cell(r['nightly_render_s'], '.1f')} s")
        lines.append(f"| {r['runs']} | {_cell(r['cold_s'], '.1f')} s "
                     f"({_cell(r.get('cold_cpu_s'), '.1f')} s) "
                     f"| {_cell(r.get('plus_one_s'), '.1f')} s ({_cell(r.get('plus_one_cpu_s'), '.1f')} s) "
                     f"| {_cell(peak, '.0f')} MB "
                     f"| {_cell(r.get('site_mb'), '.0f')} MB | {_cell(r.get('run_page_kb'), '.0f')} KB "
                     f"| {nightly} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="a real run directory (default: make one)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--work", type=Path, required=True, help="where stores and sites go")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per command, seconds")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--browser", action="store_true",
                        help="open the largest store's scenario page in headless Chromium")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    source = args.source or real_run(args.work)
    rows = []
    for n in args.sizes:
        rows.append(measure_size(source, args.work, n, args.timeout, nightly=n == max(args.sizes)))
        print(json.dumps(rows[-1]), flush=True)
    print(table(rows))
    largest = max(args.sizes)
    if args.browser and rows[-1].get("plus_one_s") is not None:
        (page,) = (args.work / f"site{largest}").glob("scenario-*.html")
        rows[-1]["browser"] = open_in_browser(page, args.work / f"scenario-{largest}-runs.png")
        print(json.dumps(rows[-1]["browser"]))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
