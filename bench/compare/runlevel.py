"""The nightly gate's test: a variant judged by whole runs, the candidate's against the store's.

Step samples of one run cannot say how whole runs of the same code differ, and the window-to-window
spread of one run understates nothing but also averages nothing: on this machine a window of 50
steps lasts ~0.15 s, windows of one variant (in yardstick steps) spread 7-20%, and a variant's
figure moved 4-9% between nightly runs of unchanged code, about what 6 such windows predict.

So each run gives one figure per variant: the trimmed mean of its windows' log median step (in
yardstick steps when every run compared has the yardstick; bench.compare.yardstick). The nightly
run and its re-runs are the candidate's sample, the store's recent runs the baseline's, and a
pooled-variance t-test on the figures decides. A slowdown counts when t is beyond the one-sided
99% critical value and the shift exceeds the minimum effect; a looser bar (90%, half the effect)
picks the suspects worth re-running. Each re-run adds a candidate figure, so confirmation adds
power instead of asking three noisy runs to clear a strict bar each.

Dividing by the yardstick round by round assumes a variant feels a spell that lasts a whole run
as the one-threaded yardstick does. Not always: in one hour's runs here, two-replica variants
followed the yardstick's run figure by about 0.6, so a fast spell of the yardstick read as their
slowdown, and the re-runs, sharing the spell, confirmed it. Once the store holds
`FOLLOW_STORE_RUNS` runs the yardstick's run figure is therefore also a covariate (analysis of
covariance): one fit estimates, from the stored and candidate runs alike, how far the figure in
yardstick steps still moves with it, and judges the candidate's shift with that taken out. Where
a variant follows the yardstick exactly, that slope is about 0 and the test is the one before.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bench.compare.detector import Comparison
from bench.compare.figures import RunFigures, run_figure, run_figures  # noqa: F401 (the gate's figure)
from bench.compare.reruns import confirm
from bench.compare.tdist import t_quantile
from bench.record.model import VariantRecord

Run = list[VariantRecord]

STORE_RUNS = 10  # the store's most recent runs that make the baseline sample
MIN_STORE_RUNS = 3  # fewer stored runs give no usable spread; the gate falls back
FOLLOW_STORE_RUNS = 6  # stored runs before the gate estimates how a variant follows the yardstick
SD_FLOOR = 0.01  # a lucky quiet store must not make 1% look significant

# How far, in the stored runs' own SDs, the candidate's yardstick may move before its verdicts
# say they extrapolate. Each of 28 nights of one speed against the 10 before it moved at most
# 2.6 SDs, the 30% speed-up of 2026-11-28 5.5-5.9; with 10 stored runs of normal noise, 4 SDs
# are passed about once in 240 nights (t, 9 degrees of freedom).
MOVED_SDS = 4.0

SUSPECT = (0.90, 0.5)  # (one-sided level, share of the minimum effect) that earns a re-run
DECIDE = (0.99, 1.0)  # what a regression must clear with every candidate run counted


@dataclass
class RunTest:
    """Candidate runs vs stored runs of one variant, in log space."""

    shift: float  # mean candidate figure - mean stored figure (less what follows the yardstick)
    sd: float  # pooled run-to-run standard deviation (floored)
    df: int
    store_runs: int
    candidate_runs: int
    unit: float  # the shift's standard error per unit of sd
    slope: float | None = None  # of the figure on the yardstick's run figure, if estimated

    @property
    def se(self) -> float:
        return self.sd * self.unit

    @property
    def t(self) -> float:
        return self.shift / self.se

    def status(self, min_effect: float, bar: tuple[float, float]) -> str:
        level, effect_share = bar
        effect = math.log1p(min_effect * effect_share)
        critical = t_quantile(self.df, level)
        if self.t > critical and self.shift > effect:
            return "regression"
        if -self.t > critical and -self.shift > effect:
            return "improvement"
        return "unchanged"

    def interval(self, level: float = 0.99) -> tuple[float, float]:
        """The ratio's two-sided interval at `level` of each side."""
        half = t_quantile(self.df, level) * self.se
        return math.exp(self.shift - half), math.exp(self.shift + half)


def run_test(stored: list[float], candidate: list[float]) -> RunTest | None:
    """The pooled-variance comparison, or None when the store is too small to give a spread."""
    k, n = len(stored), len(candidate)
    if k < MIN_STORE_RUNS or n < 1:
        return None
    squares = sum((x - np.mean(stored)) ** 2 for x in stored) + \
        sum((y - np.mean(candidate)) ** 2 for y in candidate)
    df = k + n - 2
    sd = max(math.sqrt(squares / df), SD_FLOOR)
    return RunTest(float(np.mean(candidate) - np.mean(stored)), sd, df, k, n,
                   math.sqrt(1 / k + 1 / n))


def covariate_test(stored: list[tuple[float, float]], candidate: list[tuple[float, float]]
                   ) -> RunTest | None:
    """The comparison with the yardstick's run figure as a covariate: each run is (the variant's
    figure, the yardstick's), and one least-squares fit gives the candidate's shift and the
    figure's slope on the yardstick, shared by both groups. None with fewer than
    `FOLLOW_STORE_RUNS` stored runs or a yardstick that did not move within the runs."""
    k, n = len(stored), len(candidate)
    if k < FOLLOW_STORE_RUNS or n < 1:
        return None
    figure = np.asarray([f for f, _ in [*stored, *candidate]])
    stick = np.asarray([y for _, y in [*stored, *candidate]])
    design = np.column_stack([np.ones(k + n), np.r_[np.zeros(k), np.ones(n)], stick])
    if np.linalg.matrix_rank(design) < 3:  # the yardstick did not move within the groups
        return None
    solve = np.linalg.pinv(design)  # (X'X)^-1 X': the fit, and (X'X)^-1 as solve @ solve.T
    coef = solve @ figure
    residual = figure - design @ coef
    df = k + n - 3
    sd = max(math.sqrt(float(residual @ residual) / df), SD_FLOOR)
    unit = math.sqrt(float(solve[1] @ solve[1]))
    return RunTest(float(coef[1]), sd, df, k, n, unit, float(coef[2]))


def _figures(runs: Sequence[RunFigures], name: str, relative: bool) -> list[float]:
    found = (run.named(name) for run in runs)
    return [f for v in found if v is not None and (f := v.figure_in(relative)) is not None]


def _with_yardstick(runs: Sequence[RunFigures], name: str) -> list[tuple[float, float]]:
    """(the variant's figure in yardstick steps, the yardstick's own in seconds) of each run that
    has both."""
    out = []
    for run in runs:
        found = run.named(name)
        figure = found.figure_in(True) if found is not None else None
        if figure is not None and run.yardstick is not None:
            out.append((figure, run.yardstick))
    return out


def _test(stored: Sequence[RunFigures], candidates: Sequence[RunFigures], name: str,
          relative: bool) -> tuple[RunTest | None, list[float], list[float]]:
    """The variant's test, by covariate where the store allows, and the stored and candidate
    figures it judged; by covariate, each as it would read at the stored runs' mean yardstick."""
    if relative:
        base, cand = _with_yardstick(stored, name), _with_yardstick(candidates, name)
        test = covariate_test(base, cand)
        if test is not None and test.slope is not None:
            slope, at = test.slope, float(np.mean([y for _, y in base]))
            return (test, [f - slope * (y - at) for f, y in base],
                    [f - slope * (y - at) for f, y in cand])
    base_f, cand_f = _figures(stored, name, relative), _figures(candidates, name, relative)
    return run_test(base_f, cand_f), base_f, cand_f


def usable(history: Sequence[Run | RunFigures]) -> bool:
    return len(history) >= MIN_STORE_RUNS


def run_level(first: Comparison, history: Sequence[Run | RunFigures],
              candidate_runs: Sequence[Run | RunFigures], bar: tuple[float, float] = DECIDE
              ) -> Comparison:
    """A copy of `first` (the nightly run's comparison with the store) with its ok-vs-ok
    verdicts decided by `covariate_test` or `run_test` at `bar`; variants with too few stored runs
    keep theirs. Step figures become run figures (judged against the yardstick when every run has
    it: as a covariate once the store allows, in yardstick steps before). Runs may
    be given as records or as their figures (bench.compare.figures), computed once per run."""
    stored = [_figures_of(run) for run in history[-STORE_RUNS:]]
    candidates = [_figures_of(run) for run in candidate_runs]
    relative = all(run.relative for run in [*stored, *candidates])
    result = copy.deepcopy(first)
    for verdict in result.verdicts:
        if verdict.status not in ("regression", "improvement", "unchanged"):
            continue
        test, stored_figures, candidate_figures = _test(stored, candidates, verdict.key, relative)
        if test is None:
            continue
        each = ", ".join(f"×{math.exp(f - np.mean(stored_figures)):.3f}" for f in candidate_figures)
        effect = verdict.min_effect
        verdict.status = test.status(effect, bar)
        verdict.baseline_median_s = math.exp(float(np.mean(stored_figures)))
        verdict.candidate_median_s = verdict.baseline_median_s * math.exp(test.shift)
        verdict.ratio = math.exp(test.shift)
        verdict.ci_low, verdict.ci_high = test.interval()
        verdict.p_value = None
        verdict.history_runs = test.store_runs
        verdict.between_run_cv = test.sd
        following = (f"following the yardstick by {1 + test.slope:.2f}, "
                     if test.slope is not None else "")
        verdict.note = (f"run-level: {test.candidate_runs} candidate run(s) vs "
                        f"{test.store_runs} stored, {following}run-to-run sd {test.sd:.1%}, "
                        f"t = {test.t:.2f} (a regression needs "
                        f"{t_quantile(test.df, bar[0]):.2f} and > +{effect * bar[1]:.1%}); "
                        f"each candidate run {each}")
    result.relative = relative
    result.machine_moved = machine_moved(stored, candidates) if relative else None
    return result


def machine_moved(stored: Sequence[RunFigures], candidates: Sequence[RunFigures]) -> str | None:
    """Why the verdicts may mislead when the candidate runs' yardstick ran further from the
    stored runs' than `MOVED_SDS` of their SDs, else None. A machine that changes its speed
    changes a variant's by its own share, not the yardstick's (one thread, 30% faster, against
    a variant's 16-27% on the 2-core AMD on 2026-11-28): the figures in yardstick steps then
    move with the machine, and the covariate's slope, fitted on the stored runs' narrower
    spread, extrapolates."""
    sticks = [run.yardstick for run in stored if run.yardstick is not None]
    tonight = [run.yardstick for run in candidates if run.yardstick is not None]
    if len(sticks) < MIN_STORE_RUNS or not tonight:
        return None
    mean, sd = float(np.mean(sticks)), max(float(np.std(sticks, ddof=1)), SD_FLOOR)
    moved = float(np.mean(tonight)) - mean
    if abs(moved) <= MOVED_SDS * sd:
        return None
    return (f"the yardstick's steps took ×{math.exp(moved):.2f} of the stored runs' (they "
            f"ranged ×{math.exp(min(sticks) - mean):.2f}–×{math.exp(max(sticks) - mean):.2f}): "
            "the machine ran at a speed no stored run did, and a variant need not follow it as "
            "the yardstick does, so these verdicts extrapolate. A real slowdown may read "
            "unchanged, or the machine's change as a slowdown; once nights at this speed are "
            "stored, the store spans it.")


def decided(history: Sequence[RunFigures], candidate: RunFigures) -> set[str]:
    """The candidate's variants that `run_level` decides by whole runs against `history`:
    their step-sample verdicts are replaced, so a caller need not compute them."""
    stored = history[-STORE_RUNS:]
    relative = all(run.relative for run in [*stored, candidate])
    return {v.variant_id for v in candidate.variants.values()
            if run_test(_figures(stored, v.variant_id, relative),
                        _figures([candidate], v.variant_id, relative)) is not None}


def _figures_of(run: Run | RunFigures) -> RunFigures:
    return run if isinstance(run, RunFigures) else run_figures(run)


def suspects(first: Comparison, history: list[Run], run: Run) -> list[str]:
    """The variants of the nightly run worth re-running: past the looser `SUSPECT` bar."""
    return [v.key for v in run_level(first, history, [run], SUSPECT).verdicts
            if v.status == "regression"]


def decide(first: Comparison, history: Sequence[Run | RunFigures],
           runs: Sequence[Run | RunFigures]) -> Comparison:
    """The verdicts with every candidate run (the nightly run first, then its re-runs)."""
    result = run_level(first, history, runs, DECIDE)
    result.confirmations = len(runs) - 1
    return result


def decide_night(first: Comparison, history: Sequence[RunFigures], night: Run | RunFigures,
                 reruns: Sequence[Run], rejudge: Callable[[Run], Comparison]) -> Comparison:
    """A night's verdicts with its confirmation re-runs: what the nightly gate decides, and so
    what the report's trend marks. With `MIN_STORE_RUNS` stored runs or more, by whole runs,
    every re-run a candidate run more; before that, a suspect of `first` (the night's
    comparison) stays a regression only if every re-run, judged by `rejudge`, regresses too."""
    if usable(history):
        return decide(first, history, [night, *reruns])
    return confirm(first, [rejudge(run) for run in reruns])
