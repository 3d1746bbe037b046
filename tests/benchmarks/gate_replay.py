"""The nightly gate replayed on stored runs: each run judged, as `bench nightly` judges it, against
the runs before it, by the yardstick as a covariate and by the yardstick as a divisor.

A store of consecutive runs of unchanged code (a nightly campaign's, or `bench nightly --confirm
0` run in a loop) holds the machine's real noise. Replaying the gate on it compares two gates on
the very same runs, which a campaign cannot: each night is run once. Every run from the
`--from`-th on is a night: its store is the runs before it, its confirmation re-runs are its own
(`confirmations/`, if the campaign made them) or else the two runs after it (taken straight after
it, as the gate's re-runs are). `--slowdown 1.10` multiplies every variant's timed steps in the
night and its re-runs by 1.10 (the yardstick's are left alone, as a slower model leaves it):
a slowdown injected into the real noise, the same for both gates.

Usage:
    python tests/benchmarks/gate_replay.py STORE [--slowdown 1.10] [--from 3] [--suspect 0.8]
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from rich.console import Console

from bench import results
from bench.compare import runlevel
from bench.nightly import gate

COPIED = (results.VARIANTS_FILE, results.SCENARIO_FILE, results.ENVIRONMENT_FILE,
          results.TIMING_FILE)


def slowed(run: Path, factor: float, into: Path) -> Path:
    """A copy of `run`'s records with every timed step but the yardstick's times `factor`."""
    out = into / run.name
    out.mkdir(parents=True)
    for name in COPIED:
        if (run / name).exists():
            shutil.copy(run / name, out / name)
    lines = []
    for line in (run / results.RECORDS_FILE).read_text().splitlines():
        record = json.loads(line)
        timed = (record.get("samples") or {}).get("timed")
        if timed and record["variant"].get("control") != "yardstick":
            record["samples"]["timed"] = [[s * factor for s in w] for w in timed]
        lines.append(json.dumps(record))
    (out / results.RECORDS_FILE).write_text("\n".join(lines) + "\n")
    return out


@contextmanager
def divisor_only() -> Iterator[None]:
    """The gate as it was before the covariate: the yardstick only ever divides."""
    kept = runlevel.FOLLOW_STORE_RUNS
    runlevel.FOLLOW_STORE_RUNS = sys.maxsize
    try:
        yield
    finally:
        runlevel.FOLLOW_STORE_RUNS = kept


def judge_night(runs: list[Path], i: int, factor: float, work: Path) -> dict | None:
    """Night `i` against the runs before it; its comparison (as the gate writes it), or None
    when it has no re-runs to stand for a confirmation."""
    reruns = results.confirmation_dirs(runs[i]) or runs[i + 1:i + 3]
    if len(reruns) < 2:
        return None
    store = work / "store"
    store.mkdir()
    for run in runs[max(0, i - runlevel.STORE_RUNS):i]:
        (store / run.name).symlink_to(run.resolve())
    night = slowed(runs[i], factor, work / "night")
    again = iter([slowed(r, factor, work / f"again{k}") for k, r in enumerate(reruns)])
    gate(night, store, work / "out", Console(file=io.StringIO()), lambda _ids: next(again), 2)
    found = sorted((work / "out").glob("compare-*.json"))
    return json.loads(found[-1].read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", type=Path, help="a folder of consecutive runs of one scenario")
    parser.add_argument("--slowdown", type=float, default=1.0, help="1.0: unchanged code (A/A)")
    parser.add_argument("--from", dest="start", type=int, default=runlevel.MIN_STORE_RUNS,
                        help="the first night's index (the runs before it are its store)")
    parser.add_argument("--suspect", type=float, default=runlevel.SUSPECT[0],
                        help="the one-sided level that earns a night's variant its re-runs")
    args = parser.parse_args()
    runlevel.SUSPECT = (args.suspect, runlevel.SUSPECT[1])
    runs = [r for r in results.find_run_dirs([args.store])
            if (r / results.TIMING_FILE).exists() and (r / results.RECORDS_FILE).exists()]
    flagged = {"covariate": 0, "divisor": 0}
    verdicts = {name: [0, 0] for name in flagged}  # regression verdicts, verdicts judged
    nights = 0
    for i in range(args.start, len(runs)):
        line = []
        for name in flagged:
            gate_as = divisor_only() if name == "divisor" else nullcontext()
            with tempfile.TemporaryDirectory() as tmp, gate_as:
                result = judge_night(runs, i, args.slowdown, Path(tmp))
            if result is None:
                break
            flagged[name] += bool(result["regressed"])
            judged = [v for v in result["verdicts"] if v.get("ratio")]
            verdicts[name][0] += sum(v["status"] == "regression" for v in judged)
            verdicts[name][1] += len(judged)
            line.append(f"{name}: " + ", ".join(
                f"{v['key'].split('-float32')[0]} {v['status'][:3]} x{v['ratio']:.3f}"
                for v in result["verdicts"] if v.get("ratio")))
        if len(line) == len(flagged):
            nights += 1
            print(f"{runs[i].name}\n    " + "\n    ".join(line), flush=True)
    what = "false alarms" if args.slowdown == 1.0 else f"nights caught (x{args.slowdown})"
    print(f"{nights} nights; {what}: " + ", ".join(f"{k} {v}" for k, v in flagged.items())
          + "; regression verdicts: " + ", ".join(f"{k} {a} of {b}"
                                                  for k, (a, b) in verdicts.items()))


if __name__ == "__main__":
    main()
