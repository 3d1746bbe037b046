"""Simulated false-alarm and detection rates of the regression detector.

`python -m bench.compare.simulation` runs two noise models, both with log-normal per-step jitter
(~15% CV, as seen on small steps here): `iid` only that, and `bursty` adding interference bursts
that slow 10-30 consecutive steps by 20-100% about once per window, as on this shared machine.
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.compare.detector import compare_records, compare_samples
from bench.compare.reruns import confirm
from bench.record.model import VariantRecord, load_all


def synthetic_run(rng: np.random.Generator, scale: float = 1.0, windows: int = 3,
                  steps: int = 100, base_s: float = 0.005, bursty: bool = False
                  ) -> list[np.ndarray]:
    out = []
    for _ in range(windows):
        jitter = rng.lognormal(0.0, 0.15, size=steps)
        slow = np.ones(steps)
        for _ in range(rng.poisson(1.0) if bursty else 0):  # 10-30 steps slowed by 20-100%
            start, length = rng.integers(0, steps), rng.integers(10, 30)
            slow[start:start + length] *= 1 + rng.uniform(0.2, 1.0)
        out.append(base_s * scale * jitter * slow)
    return out


def rates(trials: int, shift: float, bursty: bool = False, seed: int = 0) -> tuple[float, float]:
    """(false-alarm rate on A/A, detection rate at `shift` slowdown)."""
    rng = np.random.default_rng(seed)
    alarms = detections = 0
    for i in range(trials):
        base = synthetic_run(rng, bursty=bursty)
        same = synthetic_run(rng, bursty=bursty)
        slower = synthetic_run(rng, 1 + shift, bursty=bursty)
        alarms += compare_samples(base, same, seed=i).status == "regression"
        detections += compare_samples(base, slower, seed=i).status == "regression"
    return alarms / trials, detections / trials


def _records(windows: list[np.ndarray]) -> list[VariantRecord]:
    return load_all([{"status": "ok", "variant_id": "v", "variant": {"scenario_name": "sim"},
                      "samples": {"timed": [w.tolist() for w in windows]}}])


def drift_rates(trials: int, shift: float, runs: int = 5, drift_cv: float = 0.10,
                seed: int = 0) -> dict[str, float]:
    """Whole runs drift too (run-level factor, `drift_cv`): alarm rates without and with a
    baseline store of `runs` runs, and the detection rate of `shift` with the store."""
    rng = np.random.default_rng(seed)
    counts = {"aa_single": 0, "aa_store": 0, "detect_store": 0}

    def run(scale: float = 1.0) -> list[np.ndarray]:
        return synthetic_run(rng, scale * rng.lognormal(0.0, drift_cv))

    for i in range(trials):
        history = [_records(run()) for _ in range(runs)]
        same, slower = _records(run()), _records(run(1 + shift))
        status = lambda result: result.verdicts[0].status  # noqa: E731
        counts["aa_single"] += status(compare_records(history[-1], same, seed=i)) == "regression"
        counts["aa_store"] += status(compare_records(history[-1], same, seed=i,
                                                     history=history)) == "regression"
        counts["detect_store"] += status(compare_records(history[-1], slower, seed=i,
                                                         history=history)) == "regression"
    return {k: v / trials for k, v in counts.items()}


def nightly_rates(trials: int, shift: float, reruns: int = 2, store: int = 5,
                  burst_p: float = 0.3, process_cv: float = 0.05, min_effect: float = 0.05,
                  seed: int = 0) -> dict[str, float]:
    """Per-variant rates when whole variant runs are hit by interference bursts (probability
    `burst_p`, slowed 20-100%, as seen here) on top of `process_cv` process-to-process noise:
    - `single`: `bench compare` against one baseline run;
    - `store`: `bench compare` against a store of `store` runs (typical baseline + run-to-run
      prediction interval);
    - `nightly`: `bench nightly`: the store's typical baseline, and a regression must hold in
      `reruns` re-runs of the candidate (no prediction interval)."""
    rng = np.random.default_rng(seed)
    counts: dict[str, int] = {}

    def run(scale: float = 1.0) -> list[VariantRecord]:
        burst = rng.uniform(1.2, 2.0) if rng.random() < burst_p else 1.0
        return _records(synthetic_run(rng, scale * burst * rng.lognormal(0.0, process_cv)))

    def judge(base: list[VariantRecord], cand: list[VariantRecord], history: list | None,
              r2r: bool, i: int):
        return compare_records(base, cand, history=history, run_to_run=r2r, seed=i,
                               min_effect=min_effect, always_ci=False)

    for i in range(trials):
        history = [run() for _ in range(store)]
        for kind, scale in (("aa", 1.0), ("detect", 1 + shift)):
            cand, again = run(scale), [run(scale) for _ in range(reruns)]
            results = {
                "single": judge(history[-1], cand, None, True, i),
                "store": judge(history[-1], cand, history, True, i),
                "nightly": confirm(judge(history[-1], cand, history, False, i),
                                   [judge(history[-1], a, history, False, i) for a in again]),
            }
            for mode, result in results.items():
                counts[f"{kind}_{mode}"] = counts.get(f"{kind}_{mode}", 0) + result.regressed
    return {k: v / trials for k, v in sorted(counts.items())}


def interleaved_run(rng: np.random.Generator, rounds: int, scale: float = 1.0,
                    window_sd: float = 0.10, run_sd: float = 0.02, burst_p: float = 0.05,
                    machine_speed: float = 1.0) -> list[VariantRecord]:
    """One interleaved run of a variant beside the yardstick, as measured here: the machine's
    speed drifts from round to round (both slowed alike), each window of each process has its own
    noise (`window_sd`, log scale; 7-20% was seen between windows of 50 small steps), a window is
    now and then hit by a burst (+20-100%), and each process has a lasting speed of its own
    (`run_sd`). `machine_speed` divides every step of the run (both alike)."""
    machine = rng.lognormal(0.0, 0.15, rounds) / machine_speed

    def windows(step_s: float) -> list[list[float]]:
        own = rng.lognormal(0.0, run_sd)
        noise = rng.lognormal(0.0, window_sd, rounds)
        bursts = np.where(rng.random(rounds) < burst_p, rng.uniform(1.2, 2.0, rounds), 1.0)
        return [[float(step_s * own * m * n * b)] for m, n, b in zip(machine, noise, bursts,
                                                                     strict=True)]

    batch = ["yardstick", "v"]
    common = {"status": "ok", "interleave": {"batch": batch}, "devices": {"kind": "cpu"}}
    variant = {"scenario_name": "sim", "strategy": "default", "min_effect": 0.05}
    return load_all([
        {**common, "variant_id": "yardstick", "samples": {"timed": windows(0.003)},
         "variant": {**variant, "model": {"name": "yardstick"}, "control": "yardstick"}},
        {**common, "variant_id": "v", "samples": {"timed": windows(0.005 * scale)},
         "variant": {**variant, "model": {"name": "v"}}}])


def runlevel_rates(trials: int, shift: float, rounds: int = 24, store: int = 7,
                   reruns: int = 2, seed: int = 0, **noise: float) -> dict[str, float]:
    """`bench nightly`'s run-level gate (bench.compare.runlevel) on simulated interleaved runs:
    the share of A/A nights that flag the variant, and of nights with a `shift` slowdown."""
    from bench.compare import runlevel

    rng = np.random.default_rng(seed)
    counts = {"aa": 0, "detect": 0, "aa_suspected": 0, "detect_suspected": 0}
    for _ in range(trials):
        history = [interleaved_run(rng, rounds, **noise) for _ in range(store)]
        for kind, scale in (("aa", 1.0), ("detect", 1 + shift)):
            cand = interleaved_run(rng, rounds, scale, **noise)
            first = compare_records(history[-1], cand, history=history, run_to_run=False,
                                    always_ci=False)
            if not runlevel.suspects(first, history, cand):
                continue
            counts[f"{kind}_suspected"] += 1
            again = [interleaved_run(rng, rounds, scale, **noise) for _ in range(reruns)]
            counts[kind] += runlevel.decide(first, history, [cand, *again]).regressed
    return {k: v / trials for k, v in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--shift", type=float, default=0.10)
    args = parser.parse_args()
    for bursty in (False, True):
        false_alarm, detection = rates(args.trials, args.shift, bursty)
        print(f"{'bursty' if bursty else 'iid':>6} noise, {args.trials} trials: A/A false alarms "
              f"{false_alarm:.1%}, {args.shift:.0%} slowdown detected {detection:.1%}")
    drift = drift_rates(args.trials // 5, 0.30)
    print(f"runs drifting 10% CV, {args.trials // 5} trials: A/A false alarms {drift['aa_single']:.1%} "
          f"against one run, {drift['aa_store']:.1%} against a store of 5 runs; 30% slowdown "
          f"detected {drift['detect_store']:.1%} with the store")
    for shift in (0.15, 0.30):
        rates_ = nightly_rates(args.trials // 5, shift)
        print(f"bursts in 30% of variant runs + 5% process noise, {args.trials // 5} trials, "
              f"{shift:.0%} slowdown: " + ", ".join(
                  f"{mode}: A/A {rates_[f'aa_{mode}']:.0%} / detected "
                  f"{rates_[f'detect_{mode}']:.0%}" for mode in ("single", "store", "nightly")))


if __name__ == "__main__":
    main()
