"""The "still warming up" judgment replayed on stored runs: how many ok records each way names.

A store of runs of unchanged code holds the machine's real noise, and whatever warm-up its
variants really had. For every ok record the script counts three judgments:

- `as recorded`: the record's own `steady_state_start`, as the bench that wrote it judged it;
- `own windows`: `bench.timing.steady_state_start` on the record's windows alone, as a worker
  judges now;
- `against the rounds`: `bench.report.derived.warming_up`, the record's windows less the
  machine's speed in each round from its batch-mates, as the terminal and the report judge.

`--slow F --windows N` multiplies the first N windows of the first ok non-control record of each
run by F before judging: a warm-up injected into the real noise, to see how often each judgment
finds it.

Usage:
    python tests/benchmarks/warmup_replay.py STORE [STORE ...] [--slow 1.5 --windows 3]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench import results
from bench.record.model import VariantRecord
from bench.report.derived import warming_up
from bench.timing import steady_state_start


def slowed(run: list[VariantRecord], factor: float, windows: int) -> tuple[list[VariantRecord],
                                                                             str | None]:
    """The run with the first ok non-control record's first `windows` windows `factor` slower."""
    target = next((r for r in run if r.ok and r.counts_as_variant and r.timed_windows), None)
    if target is None or factor == 1.0:
        return run, None
    timed = [[s * factor for s in w] if i < windows else list(w)
             for i, w in enumerate(target.timed_windows)]
    assert target.samples is not None
    samples = target.samples.model_copy(update={"timed": timed})
    changed = target.model_copy(update={"samples": samples,
                                        "steady_state_start": steady_state_start(timed)})
    return [changed if r is target else r for r in run], str(target.variant_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+", type=Path)
    parser.add_argument("--slow", type=float, default=1.0)
    parser.add_argument("--windows", type=int, default=3)
    args = parser.parse_args()
    counts = {"records": 0, "as recorded": 0, "own windows": 0, "against the rounds": 0}
    found = {"own windows": 0, "against the rounds": 0, "runs": 0}
    for run_dir in results.find_run_dirs(args.stores):
        run, target = slowed(results.read_records(run_dir), args.slow, args.windows)
        ok = [r for r in run if r.ok and r.timed_windows]
        against = warming_up(run)
        counts["records"] += len(ok)
        counts["as recorded"] += sum(bool(r.steady_state_start) for r in ok)
        counts["own windows"] += sum(bool(steady_state_start(r.timed_windows)) for r in ok)
        counts["against the rounds"] += sum(str(r.variant_id) in against for r in ok)
        if target is not None:
            found["runs"] += 1
            own = next(r for r in run if str(r.variant_id) == target)
            found["own windows"] += bool(steady_state_start(own.timed_windows))
            found["against the rounds"] += target in against
    print("ok records named still warming up: " + ", ".join(
        f"{name} {n}" if name == "records" else f"{name} {n} ({n / max(1, counts['records']):.1%})"
        for name, n in counts.items()))
    if found["runs"]:
        print(f"first {args.windows} windows x{args.slow} of one variant a run, found in "
              f"{found['runs']} runs: own windows {found['own windows']}, "
              f"against the rounds {found['against the rounds']}")


if __name__ == "__main__":
    main()
