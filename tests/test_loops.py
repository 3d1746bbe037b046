"""Both training paths hand back the input iterator they trained on, still usable, and run short
epochs on fresh iterators whose ends the worker times.

Destroying a tf.data iterator can wait for tf.data's autotune thread (an epoch's cost, no step's),
so workers keep the measured turns' iterators until os._exit. For Keras fit that iterator is
Keras's own; bench reaches it through a one-shot wrapper of `train_function` that must not stay in
the timed steps. An epoch's end is timed where its iterator's last reference goes: one that Keras
still held would end later, unmeasured, so the tests check that nothing else holds it.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.slow

STEPS, BATCH = 6, 8


@pytest.fixture(scope="module")
def workload() -> dict[str, Any]:
    import numpy as np
    import tensorflow as tf

    from bench.training import models
    rng = np.random.default_rng(0)
    x = rng.random((64, 4, 4, 1), dtype=np.float32)
    y = rng.integers(0, 3, 64)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH).prefetch(2)
    strategy = tf.distribute.get_strategy()

    def fresh_model() -> Any:
        return models.build_model("mlp", (4, 4, 1), 3)

    return {"dataset": dataset, "strategy": strategy, "model": fresh_model}


def _no_progress(done: int, total: int) -> None:
    pass


def epochs_end_alone(result: Any) -> None:
    """Short epochs through the loop's run_epoch, as the worker runs them: each is a fresh
    iterator that its ending destroys (no other reference survives), timed."""
    import weakref

    from bench.training import epoch_ends
    iterator = result.run_epoch(3)
    assert iterator is not result.iterators[0]  # a fresh one
    witness = weakref.ref(iterator)
    holder = [iterator]
    del iterator
    seconds, finished = epoch_ends.end_now(holder, cap_s=10.0)
    assert finished and witness() is None, "the epoch's iterator outlived its end"
    assert 0 < seconds < 10.0
    (row,) = epoch_ends.measure(result.run_epoch, epochs=1, steps=3, cap_s=10.0)
    assert row["steps"] == 3 and row["steps_s"] > 0 and row["finished"]
    assert row["waited"] == (row["end_s"] >= epoch_ends.WAITED_S)


def one_window() -> Any:
    """STEPS sampled steps, no gate (as a worker started by hand)."""
    from bench.training.gate import Gate
    from bench.training.schedule import Schedule

    return Schedule(warmup_steps=STEPS, window_steps=0, repeats=0, gate=Gate(None, 1.0))


def test_fit_returns_keras_own_iterator_and_restores_train_function(workload: dict) -> None:
    from bench.training import loops
    from bench.training.objectives import CLASSIFIER, make_optimizer
    model = workload["model"]()
    result = loops.run_fit(model, make_optimizer("adam", {}, 1e-3),
                           loops.FitInput(workload["dataset"]), objectives=CLASSIFIER, metrics=[],
                           schedule=one_window(), steps_per_execution=1, jit_compile=False,
                           progress=_no_progress)
    assert len(result.samples["warmup"][0]) == STEPS
    # The iterator fit consumed is alive after fit returned and yields the next global batch.
    assert len(result.iterators) == 1
    x, y = next(result.iterators[0])
    assert tuple(x.shape) == (BATCH, 4, 4, 1)
    # The wrapper ran for the first step only: every later step called Keras's own function.
    assert "keep_iterator" not in model.train_function.__qualname__
    epochs_end_alone(result)


def test_custom_loop_returns_its_iterator(workload: dict) -> None:
    from bench.training import loops
    from bench.training.objectives import CLASSIFIER, make_optimizer
    strategy = workload["strategy"]
    with strategy.scope():
        model = workload["model"]()
        optimizer = make_optimizer("adam", {}, 1e-3)
    dist = strategy.experimental_distribute_dataset(workload["dataset"])
    result = loops.run_custom_loop(strategy, model, optimizer, dist, objectives=CLASSIFIER,
                                   metrics=[], global_batch=BATCH,
                                   precision="float32", schedule=one_window(), steps_per_execution=1,
                                   jit_compile=False, progress=_no_progress)
    assert len(result.samples["warmup"][0]) == STEPS
    assert len(result.iterators) == 1
    x, _ = next(result.iterators[0])
    assert tuple(x.shape) == (BATCH, 4, 4, 1)
    epochs_end_alone(result)
