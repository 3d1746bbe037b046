"""The nightly gate on real runs: false alarms on unchanged code, and injected slowdowns caught.

Nights are real `bench nightly` runs of a scenario into a baseline store on this machine:
1. two nights seed the store (or `--store DIR`: a copy of an earlier store of the same scenario,
   on this machine, is the start, so the first A/A nights already meet a grown store);
2. `--aa` nights of unchanged code, each gated against the store (which grows as a real
   nightly store does): any regression verdict is a false alarm;
3. for each slowdown (`--slowdown N:LABEL`, an `extra_matmul` of N x N in every step), nights
   gated against a copy of the store (an injected run never becomes a baseline): a regression
   verdict is a catch.

Prints one line per night and a table at the end. Usage (about 30 s per night here):
    python tests/benchmarks/nightly_campaign.py --aa 10 --slowdown 224:10% --slowdown 160:5% \
        --nights 10 --only 'default-r1-*-float32*' --only 'mirrored-r2-*'
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def night(scenario: Path, store: Path, reports: Path, only: list[str], quick: bool) -> int:
    """One `bench nightly`; its exit code (0 no regression, 1 regression)."""
    args = [sys.executable, "-m", "bench", "nightly", str(scenario), "--store", str(store),
            "--reports-dir", str(reports)]
    for pattern in only:
        args += ["--only", pattern]
    if quick:
        args.append("--quick")
    proc = subprocess.run(args, capture_output=True, text=True, cwd=REPO, stdin=subprocess.DEVNULL,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, timeout=3600)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"bench nightly failed ({proc.returncode}): {proc.stderr[-2000:]}")
    print(f"    exit {proc.returncode}; {verdicts(reports)}", flush=True)
    return proc.returncode


def verdicts(reports: Path) -> str:
    """Each variant's verdict and ratio in the night's comparison (none on the first night)."""
    found = sorted(reports.glob("compare-*.json"))
    if not found:
        return "no comparison"
    result = json.loads(found[-1].read_text())
    return ", ".join(f"{v['key']} {v['status']} x{v['ratio']:.3f}" if v.get("ratio") else
                     f"{v['key']} {v['status']}" for v in result["verdicts"])


def with_extra_matmul(scenario: Path, n: int, out_dir: Path) -> Path:
    """The scenario with `[model] extra_matmul = n` (same name, so the same store and ids)."""
    text = scenario.read_text()
    text = re.sub(r"(?m)^\[model\]\n", f"[model]\nextra_matmul = {n}\n", text, count=1)
    path = out_dir / f"{scenario.stem}-matmul{n}.toml"
    path.write_text(text)
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", type=Path, default=REPO / "scenarios" / "mnist_mirrored.toml")
    parser.add_argument("--aa", type=int, default=10, help="nights of unchanged code")
    parser.add_argument("--slowdown", action="append", default=[],
                        help="N:LABEL, an extra N x N matmul per step (repeatable)")
    parser.add_argument("--nights", type=int, default=10, help="nights per slowdown")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--store", type=Path, help="start from a copy of this store (no seed nights)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-nightly-campaign-"))
    store, reports = work / "store", work / "reports"
    started = time.time()
    print(f"work dir {work}", flush=True)
    if args.store:
        shutil.copytree(args.store, store)
        print(f"store: a copy of {args.store} ({len(list(store.iterdir()))} runs)", flush=True)
    for k in range(0 if args.store else 2):
        print(f"seed night {k + 1}", flush=True)
        night(args.scenario, store, reports / f"seed{k}", args.only, args.quick)
    alarms = 0
    for k in range(args.aa):
        print(f"A/A night {k + 1}", flush=True)
        alarms += night(args.scenario, store, reports / f"aa{k}", args.only, args.quick)
    caught: dict[str, int] = {}
    (work / "injected").mkdir()
    for spec in args.slowdown:
        n, _, label = spec.partition(":")
        injected = with_extra_matmul(args.scenario, int(n), work)
        caught[label or n] = 0
        for k in range(args.nights):
            print(f"slowdown {label} (extra_matmul {n}) night {k + 1}", flush=True)
            copy = work / f"store-{n}-{k}"
            shutil.copytree(store, copy)
            caught[label or n] += night(injected, copy, reports / f"inj{n}-{k}", args.only,
                                        args.quick)
            # keep the injected run (with its re-runs, in its confirmations/) for analysis
            injected_run = max(set(copy.iterdir()) - {copy / d.name for d in store.iterdir()})
            shutil.move(injected_run, work / "injected" / f"{n}-{k}-{injected_run.name}")
            shutil.rmtree(copy)
    print(f"\n| nights | what | flagged |\n| --- | --- | --- |\n| {args.aa} | unchanged code (A/A) "
          f"| {alarms} false alarm(s) |")
    for spec in args.slowdown:
        n, _, label = spec.partition(":")
        print(f"| {args.nights} | {label or n} slowdown (extra_matmul {n}) | caught "
              f"{caught[label or n]} of {args.nights} |")
    print(f"\n{time.time() - started:.0f} s in all; work dir {work}")


if __name__ == "__main__":
    main()
