"""What an epoch's end costs a loop that starts a fresh input iterator every epoch.

A plain `fit(dataset, epochs=N)` over a finite dataset, and the tutorials' `for batch in
dist_dataset`, destroy the finished iterator as the next epoch begins. Destroying it joins
tf.data's autotune thread, which sleeps between its optimisations for a period that doubles from
10 ms up to a minute. The destructor's cancellation wakes it, but TensorFlow marks its
cancellation manager cancelled only after running the callbacks: a thread that looks before
that sees no cancellation, sleeps again, and the destructor waits out the rest of the period,
up to about as long again as the iterator has lived. Other ends take milliseconds.

bench's measured turns keep their iterators (an epoch's end is no step's cost). After them, at the
variant's finish, it runs a few short epochs of the variant's own loop, each on a fresh iterator
used without a pause as an epoch uses it, and ends each at once as such a loop does: the record
holds each epoch's steps and its end, and a run tells how often an end waits. Each end runs in a
thread of its own, so a wait past `cap_s` (an iterator that lived long, an old TensorFlow) is
recorded as at least that and costs the run no more.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

# An end longer than this waited for tf.data's autotune thread: destroying an iterator otherwise
# takes milliseconds (a few tens for Keras' own under a strategy).
WAITED_S = 0.1
CAP_S = 5.0


def end_now(iterator_holder: list[Any], cap_s: float = CAP_S) -> tuple[float, bool]:
    """Drop the one reference `iterator_holder` holds (its destructor runs in a thread of its own)
    and wait for it up to `cap_s`: (seconds, finished)."""
    done = threading.Event()

    def destroy() -> None:
        iterator_holder.clear()
        done.set()

    began = time.perf_counter()
    threading.Thread(target=destroy, name="bench-epoch-end", daemon=True).start()
    finished = done.wait(cap_s)  # past it, the thread waits on alone until the worker exits
    return time.perf_counter() - began, finished


def measure(run_epoch: Callable[[int], Any], epochs: int, steps: int,
            cap_s: float = CAP_S) -> list[dict[str, Any]]:
    """`epochs` short epochs of `steps` steps, each on a fresh iterator (`run_epoch(steps)` runs
    one to its last step's result on the host and returns its iterator), each ended at once."""
    out = []
    for _ in range(epochs):
        began = time.perf_counter()
        holder = [run_epoch(steps)]
        steps_s = time.perf_counter() - began
        end_s, finished = end_now(holder, cap_s)
        out.append({"steps": steps, "steps_s": steps_s, "end_s": end_s, "finished": finished,
                    "waited": end_s >= WAITED_S})
    return out
