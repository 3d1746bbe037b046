"""Step timer and statistics. Pure Python (no TensorFlow) so the parent and tests use it freely.

The timer records the wall time between consecutive step *completions*: a step is complete when
its result is on the host, so the caller must synchronise (e.g. `float(loss)`) before `lap()`.
Timing completion-to-completion includes the input pipeline's hand-off, i.e. what a user waits for.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

MAD_TO_SIGMA = 1.4826  # scales the median absolute deviation to a normal standard deviation


@dataclass
class StepTimer:
    """Collects per-step durations; with k steps per lap (steps_per_execution) each sample is lap/k."""

    clock: Callable[[], float] = time.perf_counter
    samples: list[float] = field(default_factory=list)
    steps_per_sample: list[int] = field(default_factory=list)
    # sum(steps_per_sample), kept as a running count (lap() runs every step, so no sum over a
    # growing list); not a constructor argument, so it cannot disagree with the list.
    steps: int = field(default=0, init=False)
    _last: float | None = None

    def start(self) -> None:
        self._last = self.clock()

    def skip(self) -> float:
        """Restart the current block without a sample (settling steps): return how long it ran."""
        now = self.clock()
        skipped = now - self._last if self._last is not None else 0.0
        self._last = now
        return skipped

    def lap(self, steps: int = 1) -> float:
        """Close the current block of `steps` steps; return its per-step duration in seconds."""
        if self._last is None:
            raise RuntimeError("StepTimer.lap() before start()")
        now = self.clock()
        per_step = (now - self._last) / steps
        self._last = now
        self.samples.append(per_step)
        self.steps_per_sample.append(steps)
        self.steps += steps
        return per_step


@dataclass
class Phases:
    """Wall time per named phase of a worker, so a run can say where its time went."""

    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


@dataclass(frozen=True)
class Stats:
    n: int
    mean: float
    median: float
    stdev: float
    stderr: float
    mad: float
    p5: float
    p95: float
    min: float
    max: float

    @property
    def robust_cv(self) -> float:
        """Spread as a fraction of the median, from the MAD: outliers do not inflate it."""
        return MAD_TO_SIGMA * self.mad / self.median if self.median else math.nan

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def round_up(value: int, multiple: int) -> int:
    """Step counts must be whole blocks of steps_per_execution (or of a PS scheduling block)."""
    return -(-value // multiple) * multiple


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method) of already sorted values."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples: Sequence[float]) -> Stats:
    if not samples:
        raise ValueError("no samples to summarize")
    ordered = sorted(samples)
    n = len(ordered)
    median = statistics.median(ordered)
    stdev = statistics.stdev(ordered) if n > 1 else 0.0
    return Stats(
        n=n,
        mean=statistics.fmean(ordered),
        median=median,
        stdev=stdev,
        stderr=stdev / math.sqrt(n),
        mad=statistics.median(abs(v - median) for v in ordered),
        p5=percentile(ordered, 5),
        p95=percentile(ordered, 95),
        min=ordered[0],
        max=ordered[-1],
    )


# A variant still warms up in its timed windows when its leading windows run this much slower
# than its second half, beyond what the windows' own spread explains at this level.
WARMUP_TOLERANCE = 0.10
WARMUP_ALPHA = 0.01


def _order_explains(statistic: Callable[[Any], Any], values: Any, alpha: float,
                    resamples: int, seed: int, batch: int = 200) -> bool:
    """Whether the order of `values` explains their `statistic`: a one-sided permutation test,
    p = (1 + the shuffles whose statistic reaches its value on `values` as they came) ÷
    (resamples + 1), below `alpha`. `statistic` takes a row of values or a (rows, n) array of
    them, one shuffle a row. The shuffles come in batches, and the test stops once more of them
    reached it than `alpha` allows: the same draws and the same answer as all of them, for a
    tenth of the cost where the order explains nothing, as it mostly does not."""
    import numpy as np

    rng = np.random.default_rng(seed)
    observed = statistic(values)
    reached = 0
    for start in range(0, resamples, batch):
        shuffled = rng.permuted(np.tile(values, (min(batch, resamples - start), 1)), axis=1)
        reached += int(np.count_nonzero(statistic(shuffled) >= observed))
        if (1 + reached) / (resamples + 1) >= alpha:  # p can only grow from here
            return False
    return True


def warm_windows(log_steps: Sequence[float], tolerance: float = WARMUP_TOLERANCE,
                 alpha: float = WARMUP_ALPHA, resamples: int = 2000, seed: int = 0) -> int:
    """How many leading windows still ran warming up (0: none), from each window's log step time.

    For every k up to half the windows, the first k windows' mean excess over the second half's
    median, in standard errors of a mean of k (the excess times sqrt(k)); the k with the largest
    is the candidate. It counts when its excess is above `tolerance` and the windows' order
    explains it: a permutation test of the order, with the same largest-over-k statistic, gives
    p < `alpha`. The window is the unit because steps within one share the machine's speed of
    that moment; a slow spell of a few windows anywhere else is a spell, not a warm-up."""
    import numpy as np

    logs = np.asarray(log_steps, dtype=float)
    half = len(logs) // 2
    if half < 2:
        return 0
    counts = np.arange(1, half + 1)

    def excess(x: Any) -> Any:
        late = np.median(x[..., half:], axis=-1, keepdims=True)
        return np.cumsum(x[..., :half], axis=-1) / counts - late

    def largest_score(x: Any) -> Any:
        return (excess(x) * np.sqrt(counts)).max(axis=-1)

    observed = excess(logs)
    k = int(np.argmax(observed * np.sqrt(counts)))
    if observed[k] <= math.log1p(tolerance):
        return 0
    return k + 1 if _order_explains(largest_score, logs, alpha, resamples, seed) else 0


def steady_state_start(windows: Sequence[Sequence[float]],
                       reference: Sequence[float] | None = None) -> int:
    """Timed steps still warming up, from the first (0: steady from the start): the steps of
    the leading windows `warm_windows` finds slow, judged on each window's median step, less
    `reference` (log; the machine's speed in that window's round, from the variants beside it)
    where given. Without one a slow spell of the machine early in a run reads as a warm-up.

    A fixed warmup count does not always cover warmup (epochs 2-3 of the seed run were twice as
    slow as steady state), so the record says where the series actually settles."""
    kept = [(w, r) for w, r in zip(windows, reference or [0.0] * len(windows), strict=True) if w]
    logs = [math.log(statistics.median(w)) - r for w, r in kept]
    warm = warm_windows(logs)
    return sum(len(w) for w, _ in kept[:warm])


@dataclass(frozen=True)
class Throughput:
    """Examples per second of the timed windows, two ways.

    `headline` is what tf_cnn_benchmarks, tf-models' TimeHistory and Keras' benchmark callback
    report: every example of the timed windows ÷ the windows' wall-clock time, taken by a clock
    around each window. `median` is the typical step (global batch ÷ median step time): robust
    to a stray slow step, and higher than what a user's training gets whenever steps vary.
    """

    headline: float  # examples / wall-clock seconds of the timed windows
    median: float  # global_batch / median step time: the typical step
    mean_rate: float  # examples / the sum of the per-step laps (agrees with headline)
    spread_pct: float  # robust CV of step time, in percent
    per_repeat: list[float]  # examples / wall time of each timed window

    def to_dict(self) -> dict[str, float | list[float]]:
        return asdict(self)


def throughput(repeats: Sequence[Sequence[float]], global_batch: int,
               window_s: Sequence[float] | None = None, steps_per_sample: int = 1,
               window_steps: int | None = None) -> Throughput:
    """The headline from the windows' wall-clock seconds (`window_s`, each of `window_steps`
    steps: the unobserved windows), the typical step and the spread from the per-step samples
    (`repeats`, a list per observed window). Without `window_s`, each window of samples stands
    in for its own clock. Each sample is the per-step time of a call of `steps_per_sample`
    steps (steps_per_execution, parameter-server blocks)."""
    pooled = [s for window in repeats for s in window]
    stats = summarize(pooled)
    k = steps_per_sample
    walls = list(window_s) if window_s else [k * sum(w) for w in repeats]
    if window_steps is None and len(walls) != len(repeats):
        raise ValueError(f"{len(walls)} window clocks for {len(repeats)} windows")
    examples = ([global_batch * window_steps] * len(walls) if window_steps is not None
                else [global_batch * len(w) * k for w in repeats])
    return Throughput(
        headline=sum(examples) / sum(walls),
        median=global_batch / stats.median,
        mean_rate=global_batch * len(pooled) / sum(pooled),
        spread_pct=100.0 * stats.robust_cv,
        per_repeat=[n / wall for n, wall in zip(examples, walls, strict=True) if wall],
    )


def block_length(rounds: int) -> int:
    """Consecutive rounds per batch of the noise floor's interval (bench.compare.noise): the
    usual n^(1/3) of a moving-block bootstrap (5 for 120 rounds, 2 for 12), long enough to keep
    together drift that lasts a few rounds, where a machine's speed drifts so."""
    return max(1, round(rounds ** (1.0 / 3.0)))


def ratio_interval(numerators: Sequence[float], denominators: Sequence[float],
                   confidence: float = 0.95) -> tuple[float, float, float]:
    """The median of the pairwise ratios numerator / denominator over paired rounds, with the
    distribution-free interval of a median (`median_interval`): (ratio, low, high). The median,
    because a stall of the machine that hits one window of one pair (a 200 ms pause amid 5 ms
    windows was seen here) says nothing of what the pairs differ in. A bootstrap of the median
    over a dozen rounds is too narrow for the confidence it states
    (measurements.md#noise-floor-interval)."""
    import numpy as np

    ratios = np.asarray(numerators, dtype=float) / np.asarray(denominators, dtype=float)
    low, high = median_interval(ratios.tolist(), confidence)
    return float(np.median(ratios)), low, high


def median_interval_holds(count: int, confidence: float = 0.95) -> bool:
    """Whether `count` independent values are enough for `median_interval` to hold the median
    with `confidence`: even the smallest and the largest value miss it with chance 2 / 2^count
    (six values at 95%)."""
    return count > 0 and 2.0 / 2.0 ** count <= 1.0 - confidence


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The order statistics that hold the median of independent values with at least
    `confidence` (the binomial interval scipy.stats.quantile_test gives: the k-th smallest and
    the k-th largest, k as large as the binomial tail allows); the smallest and largest value
    where no k reaches it (fewer than six values at 95%). Here and not scipy.stats: a worker
    would pay about 1.2 s to import it."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return math.nan, math.nan
    tail, k, below = (1.0 - confidence) / 2.0, 0, 0.0
    while k < n // 2 and below + math.comb(n, k) / 2.0 ** n <= tail:
        below += math.comb(n, k) / 2.0 ** n  # P(fewer than k + 1 values below the median)
        k += 1
    k = max(k, 1)
    return float(ordered[k - 1]), float(ordered[n - k])


def turn_iterator(turn: int, iterators: int, repeats: int) -> int:
    """The fresh input iterator a loop's turn runs on, the turns spread over the iterators in
    order (warmup on the first, the traced turn past the last on the last)."""
    count = max(1, min(iterators, repeats))
    return min(count - 1, max(0, turn) * count // repeats) if repeats else 0


# An input iterator whose windows run below this share of the fastest iterator's rate runs in
# another mode, when its windows and the fast ones barely overlap: under MirroredStrategy some
# fresh iterators run every step at half speed here, far beyond the few percent that iterators
# of one mode differ by.
SLOW_MODE_SHARE = 0.75


# Input iterators differ at this level: with three windows each of four iterators, one
# iterator's windows all slowest happen by chance with p = 4 / C(12, 3) = 1.8%, so a level of 1%
# could never name one slow iterator of four.
ITERATORS_ALPHA = 0.05


def iterators_differ(groups: Sequence[Sequence[float]], alpha: float = ITERATORS_ALPHA,
                     resamples: int = 2000, seed: int = 0) -> bool:
    """Whether windows grouped by input iterator (seconds) differ between the iterators beyond
    their spread within one: a permutation test of which window ran on which iterator, on the
    spread of the iterators' mean log times, at level `alpha`. Three windows an iterator on a
    machine whose windows move by ±20% fall apart by chance more often than a fixed split of
    their rates says."""
    import numpy as np

    logs = np.log(np.concatenate([np.asarray(g, dtype=float) for g in groups]))
    labels = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    if len(groups) < 2 or len(logs) <= len(groups):
        return False
    sizes = np.bincount(labels)

    def spread(assigned: Any) -> Any:  # sum over iterators of size x (its mean)^2
        sums = ((assigned[..., None] == np.arange(len(groups))) * logs[:, None]).sum(axis=-2)
        return (sums ** 2 / sizes).sum(axis=-1)

    return _order_explains(spread, labels, alpha, resamples, seed)


def iterator_speeds(window_s: Sequence[float], iterator_of: Sequence[int],
                    examples_per_window: int) -> dict[str, Any]:
    """Examples/s over each input iterator's windows, and the modes they fall into: one, or a
    fast and a slow one (each one's rate over its iterators' windows, and its share of the
    iterators). Two modes need the iterators' median rates apart by SLOW_MODE_SHARE, their
    windows' rates apart too (the slow ones' upper quartile below the fast ones' lower), and the
    iterators to differ beyond their windows' spread (`iterators_differ`)."""
    by_iterator: dict[int, list[float]] = {}
    for seconds, which in zip(window_s, iterator_of, strict=True):
        by_iterator.setdefault(which, []).append(seconds)
    groups = [seconds for _, seconds in sorted(by_iterator.items())]
    medians = [statistics.median(examples_per_window / s for s in g) for g in groups]
    fastest = max(medians, default=0.0)
    slow = [g for g, m in zip(groups, medians, strict=True) if m < SLOW_MODE_SHARE * fastest]
    fast = [g for g, m in zip(groups, medians, strict=True) if m >= SLOW_MODE_SHARE * fastest]

    def window_rates(part: list[list[float]]) -> list[float]:
        return sorted(examples_per_window / s for g in part for s in g)

    if (not slow or percentile(window_rates(slow), 75) >= percentile(window_rates(fast), 25)
            or not iterators_differ(groups)):
        fast, slow = groups, []  # one mode: the iterators' differences are the machine's

    def rate(part: list[list[float]]) -> float:
        return examples_per_window * sum(map(len, part)) / sum(map(sum, part))

    modes = [{"mode": name, "rate": rate(part), "iterators": len(part),
              "share": len(part) / len(groups)}
             for name, part in (("fast", fast), ("slow", slow)) if part]
    return {"per_iterator": [rate([g]) for g in groups], "modes": modes,
            "bimodal": len(modes) > 1}
