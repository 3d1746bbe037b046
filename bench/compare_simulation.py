"""Simulated false-alarm and detection rates of the regression detector.

`python -m bench.compare_simulation` runs two noise models, both with log-normal per-step jitter
(~15% CV, as seen on small steps here): `iid` only that, and `bursty` adding interference bursts
that slow 10-30 consecutive steps by 20-100% about once per window, as on this shared machine.
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.compare import compare_samples


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--shift", type=float, default=0.10)
    args = parser.parse_args()
    for bursty in (False, True):
        false_alarm, detection = rates(args.trials, args.shift, bursty)
        print(f"{'bursty' if bursty else 'iid':>6} noise, {args.trials} trials: A/A false alarms "
              f"{false_alarm:.1%}, {args.shift:.0%} slowdown detected {detection:.1%}")


if __name__ == "__main__":
    main()
