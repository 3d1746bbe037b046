"""How often the run's intervals leave out "no difference" for its A/A twins, on stored runs.

The baseline and its control twin run the same code in the same rounds, so a 95% interval of
their difference should leave out zero about once in 20 (more where a process keeps a speed of
its own, which longer stretches show). The script cuts every stored run's twins into stretches
of `--rounds` consecutive rounds (and takes each whole run), every run directory under the
STOREs (a nightly store's runs, their confirmations, loose runs), and counts the stretches where

- the noise floor's interval (`bench.compare.noise.paired_difference`) leaves out 0%;
- the interval of the median of the paired ratios (`bench.timing.ratio_interval`, what the
  observation and profiler checks use) leaves out 1.

Usage:
    python tests/benchmarks/interval_calibration.py STORE [STORE ...] [--rounds 12 24 48]
        [--min-rounds 12]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the tests package

from bench import results  # noqa: E402
from bench.compare.noise import control_pair, paired_difference  # noqa: E402
from bench.timing import ratio_interval  # noqa: E402
from tests.fixtures.report_runs import control_records  # noqa: E402


def twin_rates(run_dir: Path) -> tuple[list[float], list[float]] | None:
    """The control baseline's and twin's window rates over the rounds both ran."""
    pair = control_pair(results.read_records(run_dir))
    if pair is None:
        return None
    base, twin = (list(r.window_rates or []) for r in pair)
    rounds = min(len(base), len(twin))
    return base[:rounds], twin[:rounds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, nargs="+", default=[12, 24, 48])
    parser.add_argument("--min-rounds", type=int, default=12,
                        help="leave out runs of fewer rounds (--quick runs, tests' runs)")
    args = parser.parse_args()
    run_dirs = sorted({found.parent for store in args.stores
                       for found in store.rglob(results.RECORDS_FILE)})
    runs = [rates for run_dir in run_dirs
            if (rates := twin_rates(run_dir)) and len(rates[0]) >= max(2, args.min_rounds)]
    print(f"{len(runs)} runs with both twins")
    for size in [*args.rounds, 0]:
        floor_missed = median_missed = stretches = 0
        for base, twin in runs:
            step = size or len(base)
            for start in range(0, len(base) - step + 1, step):
                b, t = base[start:start + step], twin[start:start + step]
                interval = paired_difference(*control_records(b, t))["interval_pct"]
                if interval is None:
                    continue
                stretches += 1
                floor_missed += interval[0] > 0 or interval[1] < 0
                _, low, high = ratio_interval(t, b)
                median_missed += low > 1 or high < 1
        if stretches:
            print(f"{f'{size} rounds' if size else 'whole runs'}: {stretches} stretches; the noise "
                  f"floor's interval left out 0 in {floor_missed / stretches:.1%}, the median "
                  f"ratio's left out 1 in {median_missed / stretches:.1%}")


if __name__ == "__main__":
    main()
