"""What `bench run --quick` sets: the `[measure]` values of a smoke test, and the same in words.

The values cap the scenario's own (`bench.runner.apply_overrides` takes the smaller of each), so
a smoke test is never longer than the scenario. The words are what `bench run --help` and the
docs say of it, made from the values, so that neither can drift from what a run does
(tests/test_docs_samples.py holds the hand-written pages to them).
"""

from __future__ import annotations

QUICK_MEASURE = {"warmup_steps": 3, "steps": 20, "repeats": 2, "settle_steps": 1, "trace_steps": 0,
                 "epochs": 1, "epoch_steps": 20, "min_window_s": 0.0, "settle_s": 0.0}


def quick_summary() -> str:
    """`--quick` in words, e.g. "at most 3 warmup, 1 settling and 20 timed steps a window, 2
    repeats, windows not lengthened, one short epoch no longer than a window, and no trace"."""
    q = QUICK_MEASURE
    epochs = ("no short epochs" if not q["epochs"] else "one short epoch" if q["epochs"] == 1
              else f"{q['epochs']} short epochs")
    windows = ("windows not lengthened" if not q["min_window_s"]
               else f"windows of at least {q['min_window_s']:g} s")
    settling = ("" if not q["settle_s"] else f", at least {q['settle_s']:g} s")
    trace = "no trace" if not q["trace_steps"] else f"{q['trace_steps']} traced steps"
    return (f"at most {q['warmup_steps']} warmup, {q['settle_steps']} settling{settling} and {q['steps']} "
            f"timed steps a window, {q['repeats']} repeats, {windows}, {epochs} no longer than "
            f"a window, and {trace}")
