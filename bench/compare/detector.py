"""Regression detection between two runs: pure functions over records (no TensorFlow import).

A variant regresses only when its slowdown is both statistically real and large enough to
matter: Mann-Whitney U on the timed step samples must reject "same distribution" AND the
bootstrap confidence interval of the ratio of median step times must lie entirely above 1, AND
the point estimate must exceed the minimum effect size (default 5%). On a shared machine any one
of these alone cries wolf: per-step samples are autocorrelated, so p-values alone overstate
certainty, and a fixed threshold alone flags noise.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bench.compare.caveats import measured_differently, why_unchanged
from bench.compare.convergence import (
    Convergence,
    convergence_verdict,
    examples_text,
    joined_status,
)
from bench.compare.figures import RunFigures, identity, run_figures
from bench.compare.tdist import t_quantile
from bench.compare.yardstick import round_medians
from bench.record.model import VariantRecord

DEFAULT_MIN_EFFECT = 0.05
DEFAULT_ALPHA = 0.01
BOOTSTRAP_ROUNDS = 2000


def timed_windows(record: VariantRecord, rounds: Sequence[float] | None = None
                  ) -> list[np.ndarray]:
    """The record's non-empty timed windows; divided by the yardstick's median step of each
    round when `rounds` are given (bench.compare.yardstick)."""
    windows = record.timed_windows
    if windows and len({len(w) for w in windows}) == 1 and len(windows[0]):  # one array
        steps = np.asarray(windows, dtype=float)
        if rounds is not None:
            steps = steps / np.asarray(rounds, dtype=float)[:, None]
        return list(steps)
    if rounds is None:
        return [np.asarray(w, dtype=float) for w in windows if len(w)]
    return [np.asarray(w, dtype=float) / median
            for w, median in zip(windows, rounds, strict=True) if len(w)]


def _has_timed(record: VariantRecord) -> bool:
    return any(len(w) for w in record.timed_windows)


def mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value, normal approximation with tie and continuity
    corrections: scipy.stats.mannwhitneyu's asymptotic test (tests hold them equal), without
    the second scipy.stats takes to import in every `bench compare`."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return math.nan
    values = np.concatenate([a, b])
    order = values.argsort(kind="mergesort")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    # average ranks for ties
    _, first, counts = np.unique(sorted_values, return_index=True, return_counts=True)
    average = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(average, counts)
    u1 = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    mean_u = n1 * n2 / 2.0
    n = n1 + n2
    tie_term = (counts ** 3 - counts).sum() / (n * (n - 1)) if n > 1 else 0.0
    var_u = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if var_u <= 0:
        return 1.0
    z = (abs(u1 - mean_u) - 0.5) / math.sqrt(var_u)
    return float(math.erfc(max(z, 0.0) / math.sqrt(2.0)))


def _bootstrap_medians(windows: list[np.ndarray], rounds: int, rng: np.random.Generator
                       ) -> np.ndarray:
    """Median step time of hierarchical resamples: windows (repeats) first, then steps in each."""
    k = len(windows)
    lengths = {len(w) for w in windows}
    if len(lengths) == 1:  # the usual case (equal repeats): vectorised
        n = lengths.pop()
        stacked = np.stack(windows)
        chosen = rng.integers(0, k, size=(rounds, k, 1))
        steps = rng.integers(0, n, size=(rounds, k, n))
        return np.median(stacked[chosen, steps].reshape(rounds, k * n), axis=1)
    medians = np.empty(rounds)
    for i in range(rounds):
        chosen = rng.integers(0, k, size=k)
        parts = [windows[j][rng.integers(0, len(windows[j]), size=len(windows[j]))]
                 for j in chosen]
        medians[i] = np.median(np.concatenate(parts))
    return medians


@dataclass
class Verdict:
    """The comparison of one variant. ratio > 1 means the candidate's steps are slower."""

    key: str
    status: str  # regression | improvement | unchanged | missing | new | now-failing | fixed | skipped
    baseline_median_s: float | None = None
    candidate_median_s: float | None = None
    ratio: float | None = None  # candidate median step time / baseline median step time
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    min_effect: float = DEFAULT_MIN_EFFECT
    note: str = ""
    history_runs: int = 0  # baseline runs behind the run-to-run check (0: single-run compare)
    between_run_cv: float | None = None
    # examples to target ([target]) in both runs, and their judgement (convergence.Convergence)
    baseline_examples: float | None = None
    candidate_examples: float | None = None
    examples_ratio: float | None = None
    convergence: str = ""  # regression | improvement | unchanged | lost; "" without a target

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def add_note(self, more: str) -> None:
        self.note = f"{self.note}; {more}" if self.note else more

    @property
    def examples_text(self) -> str:
        """Examples to target in both runs and their ratio, for every table of verdicts."""
        return examples_text(self.baseline_examples, self.candidate_examples,
                             self.examples_ratio, self.convergence)


def compare_samples(base: list[np.ndarray], cand: list[np.ndarray], *, key: str = "",
                    min_effect: float = DEFAULT_MIN_EFFECT, alpha: float = DEFAULT_ALPHA,
                    rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0, always_ci: bool = True
                    ) -> Verdict:
    """Decide regression / improvement / unchanged from two sets of timed windows.

    With `always_ci=False` the bootstrap (the costly part) runs only when the test and the effect
    size leave a regression or improvement possible; the verdict is the same, the CI is None.
    """
    rng = np.random.default_rng(seed)
    pooled_base, pooled_cand = np.concatenate(base), np.concatenate(cand)
    base_median, cand_median = float(np.median(pooled_base)), float(np.median(pooled_cand))
    p_value = mann_whitney_p(pooled_base, pooled_cand)
    ratio = cand_median / base_median
    significant = p_value < alpha
    if not always_ci and not (significant and abs(ratio - 1.0) > min_effect):
        return Verdict(key, "unchanged", base_median, cand_median, ratio, None, None, p_value,
                       min_effect, why_unchanged(p_value, alpha, ratio, None, None, min_effect))
    ratios = _bootstrap_medians(cand, rounds, rng) / _bootstrap_medians(base, rounds, rng)
    low, high = (float(x) for x in np.quantile(ratios, [alpha / 2, 1 - alpha / 2]))
    if significant and low > 1.0 and ratio - 1.0 > min_effect:
        status = "regression"
    elif significant and high < 1.0 and 1.0 - ratio > min_effect:
        status = "improvement"
    else:
        status = "unchanged"
    note = why_unchanged(p_value, alpha, ratio, low, high, min_effect) if status == "unchanged" else ""
    return Verdict(key, status, base_median, cand_median, ratio, low, high, p_value, min_effect,
                   note)


def t99(df: int) -> float:
    return t_quantile(df, 0.99)


def run_to_run_check(verdict: Verdict, history_medians: list[float]) -> Verdict:
    """Demote a within-run "regression"/"improvement" that stays inside run-to-run variation.

    A single run's samples cannot see how much whole runs drift on a shared machine (11% CV was
    measured here between runs of the same code). With k >= 2 stored baseline runs, the
    candidate's log median must fall outside the one-sided 99% prediction interval of a new
    run: mean + t(k-1) * sd * sqrt(1 + 1/k), in log space.
    """
    k = len(history_medians)
    if k < 2 or verdict.candidate_median_s is None or verdict.status not in (
            "regression", "improvement"):
        return verdict
    logs = np.log(np.asarray(history_medians))
    sd = float(logs.std(ddof=1))
    bound = t99(k - 1) * sd * math.sqrt(1 + 1 / k)
    shift = math.log(verdict.candidate_median_s) - float(logs.mean())
    verdict.history_runs = k
    verdict.between_run_cv = sd
    beyond = shift > bound if verdict.status == "regression" else -shift > bound
    if not beyond:
        verdict.note = (f"within run-to-run variation of {k} baseline runs "
                        f"(between-run CV {sd:.1%}); within-run test said {verdict.status}")
        verdict.status = "unchanged"
    return verdict


RELATIVE_NOTE = ("step times are judged relative to the yardstick each run measured in its own "
                 "rounds, so a slow spell of the machine that hit a whole run cancels")


@dataclass
class Comparison:
    verdicts: list[Verdict] = field(default_factory=list)
    refused: str | None = None
    baseline_runs: int = 1  # runs behind the run-to-run check (1: a single baseline run)
    confirmations: int = 0  # re-runs of suspect variants behind `confirm`
    relative: bool = False  # step times judged relative to each run's yardstick
    machine_moved: str | None = None  # the candidate's machine ran at a speed no stored run did
    measured_differently: str | None = None  # how the two runs' protocols differ, if they do

    @property
    def regressed(self) -> bool:
        return any(v.status in ("regression", "now-failing", "missing") for v in self.verdicts)

    @property
    def has_targets(self) -> bool:
        """Whether examples to target were judged for any variant (a column of their own)."""
        return any(v.convergence for v in self.verdicts)

    @property
    def caveat(self) -> str | None:
        """What a reader must know before trusting the verdicts, if anything."""
        if self.baseline_runs >= 2 or self.confirmations:
            return self.machine_moved
        return ("the baseline is a single run, so run-to-run variation is unknown: on a shared "
                "machine whole variants drift 10-20% between runs of the same code, and a "
                "within-run verdict may be that drift. Give a baseline store of 2 or more runs.")

    def to_dict(self) -> dict[str, Any]:
        return {"regressed": self.regressed, "refused": self.refused,
                "baseline_runs": self.baseline_runs, "confirmations": self.confirmations,
                "relative_to_yardstick": self.relative,
                "caveat": self.caveat, "measured_differently": self.measured_differently,
                "verdicts": [v.to_dict() for v in self.verdicts]}


def _environment_mismatch(base: list[VariantRecord], cand: list[VariantRecord]) -> str | None:
    """Runs on different device kinds or data sources measure different things."""
    def kinds(records: list[VariantRecord], pick: Any) -> set[Any]:
        return {pick(r) for r in records if r.ok}

    for what, pick in (("device kind", lambda r: r.device_kind),
                       ("data source", lambda r: r.data_source)):
        b, c = kinds(base, pick), kinds(cand, pick)
        if b and c and b != c:
            return f"{what} differs: baseline {sorted(map(str, b))}, candidate {sorted(map(str, c))}"
    return None


def _history_medians(figures: Sequence[RunFigures], relative: bool
                     ) -> dict[tuple[Any, ...], list[float]]:
    medians: dict[tuple[Any, ...], list[float]] = {}
    for run in figures:
        for key, variant in run.variants.items():
            if (median := variant.median_in(relative)) is not None:
                medians.setdefault(key, []).append(median)
    return medians


Rounds = list[float] | None  # the yardstick's median step per round of a record's run


def typical_baseline(base: list[VariantRecord], history: Sequence[list[VariantRecord]],
                     last: int = 5, figures: Sequence[RunFigures] | None = None,
                     relative: bool = False, base_rounds: Rounds = None
                     ) -> list[tuple[VariantRecord, Rounds]]:
    """Per variant, the record of the store's last `last` runs with the median step time (the
    upper median: the slower of two), instead of the newest run's: a burst of interference or a
    lucky fast process in one stored run then does not become the bar every candidate is held to.

    `figures` (one per run of `history`, computed once per run) choose the run; only the chosen
    runs' records are read. Each record comes with its run's yardstick rounds when `relative`
    (the base's are `base_rounds`).
    """
    figures = figures if figures is not None else [run_figures(run) for run in history]
    recent = range(max(0, len(history) - last), len(history))
    rounds_of: dict[int, Rounds] = {}  # each chosen run's rounds, computed once
    chosen: list[tuple[VariantRecord, Rounds]] = []
    for rec in base:
        key = identity(rec)
        candidates = [(median, j) for j in recent if (v := figures[j].variants.get(key))
                      and (median := v.median_in(relative)) is not None]
        if len(candidates) < 2:
            chosen.append((rec, base_rounds))
            continue
        candidates.sort(key=lambda pair: pair[0])
        j = candidates[len(candidates) // 2][1]
        run = history[j]
        typical = next(r for r in run if r.counts_as_variant and identity(r) == key)
        if relative and j not in rounds_of:
            rounds_of[j] = round_medians(run)
        chosen.append((typical, rounds_of.get(j)))
    return chosen


def compare_records(base: list[VariantRecord], cand: list[VariantRecord], *,
                    min_effect: float | None = None, alpha: float = DEFAULT_ALPHA,
                    force: bool = False, seed: int = 0,
                    history: Sequence[list[VariantRecord]] | None = None,
                    always_ci: bool = True, run_to_run: bool = True,
                    use_yardstick: bool = True,
                    history_figures: Sequence[RunFigures] | None = None,
                    decided_elsewhere: Collection[str] = ()) -> Comparison:
    """Match records by identity and judge each pair; report vanished and newly failing ones.

    `history`: the records of several baseline runs (a baseline store); with two or more, each
    variant is judged against its typical stored run (`typical_baseline`), and, with
    `run_to_run`, a within-run verdict must also stand out from run-to-run variation (`bench
    nightly` turns that off and re-runs suspects instead: see `confirm`). When every run has a
    yardstick measured in its own rounds, step times are judged relative to it
    (`bench.compare.yardstick`), so a machine-wide slow spell cancels. `history_figures`, when
    given, are the stored runs' figures computed before (bench.compare.figures): then only the
    typical runs' records are read from `history`. Variants named in `decided_elsewhere` (which
    a later test decides, such as the run-level one) get a placeholder "unchanged" verdict
    instead of the step-sample test.
    """
    history = history if history is not None else []
    figures = (history_figures if history_figures is not None
               else [run_figures(run) for run in history])
    base_rounds, cand_rounds = round_medians(base), round_medians(cand)
    relative = (use_yardstick and base_rounds is not None and cand_rounds is not None
                and all(run.relative for run in figures))
    if not relative:
        base_rounds = cand_rounds = None
    base = [r for r in base if r.counts_as_variant]  # controls measure the machine
    cand = [r for r in cand if r.counts_as_variant]
    mismatch = _environment_mismatch(base, cand)
    if mismatch and not force:
        return Comparison(refused=f"{mismatch}; refusing to compare (use --force to override)")
    if len(history) >= 2:
        typical = typical_baseline(base, history, figures=figures, relative=relative,
                                   base_rounds=base_rounds)
    else:
        typical = [(r, base_rounds) for r in base]
    history_medians = _history_medians(figures, relative) if run_to_run else {}
    base_by_key = {identity(r): (r, rounds) for r, rounds in typical}
    cand_by_key = {identity(r): r for r in cand}
    comparison = Comparison(baseline_runs=max(1, len(history)), relative=relative)
    judged: list[tuple[VariantRecord, VariantRecord]] = []  # the pairs whose steps are compared
    for key in list(base_by_key) + [k for k in cand_by_key if k not in base_by_key]:
        b, rounds = base_by_key.get(key, (None, None))
        c = cand_by_key.get(key)
        either = c or b
        name = either.variant_id if either and either.variant_id is not None else str(key)
        effect = min_effect if min_effect is not None else (
            (either.variant.min_effect if either else None) or DEFAULT_MIN_EFFECT)
        if c is None:
            comparison.verdicts.append(Verdict(name, "missing", note="variant disappeared"))
        elif b is None:
            comparison.verdicts.append(Verdict(name, "new", note="not in the baseline"))
        elif b.ok and not c.ok:
            comparison.verdicts.append(Verdict(name, "now-failing",
                                               note=f"{c.status}: {c.reason}"))
        elif not b.ok and c.ok:
            comparison.verdicts.append(Verdict(name, "fixed", note=f"was {b.status}"))
        elif not b.ok:
            comparison.verdicts.append(Verdict(name, "skipped", note=f"{c.reason}"))
        else:
            if not _has_timed(b) or not _has_timed(c):
                comparison.verdicts.append(Verdict(name, "skipped", note="no timed samples"))
                continue
            if name in decided_elsewhere:
                comparison.verdicts.append(Verdict(name, "unchanged", min_effect=effect))
                continue
            judged.append((b, c))
            bw, cw = timed_windows(b, rounds), timed_windows(c, cand_rounds)
            verdict = compare_samples(bw, cw, key=name, min_effect=effect, alpha=alpha, seed=seed,
                                      always_ci=always_ci)
            comparison.verdicts.append(run_to_run_check(verdict, history_medians.get(key, []))
                                       if run_to_run else verdict)
            if moved := convergence_verdict(b, c, effect):  # examples to target, [target]
                _judge_convergence(comparison.verdicts[-1], moved)
    if mismatch:
        for verdict in comparison.verdicts:
            verdict.add_note(f"forced: {mismatch}")
    comparison.measured_differently = measured_differently(judged)
    return comparison


def _judge_convergence(verdict: Verdict, moved: Convergence) -> None:
    """A change in examples to target joins the speed verdict (convergence.joined_status)."""
    verdict.baseline_examples, verdict.candidate_examples = (moved.baseline_examples,
                                                             moved.candidate_examples)
    verdict.examples_ratio, verdict.convergence = moved.ratio, moved.status
    if moved.status != "unchanged":
        verdict.status = joined_status(verdict.status, moved)
        verdict.add_note(moved.words)
