"""A user's model written with TensorFlow ops, met on the JAX backend: one line naming the op
and the builder, instead of the traceback JAX or Keras would end in.

Keras on JAX hands a TensorFlow op a KerasTensor (a functional model, as it is built) or a JAX
array or tracer (a subclassed model's `call`, as it runs or is jitted); either way the error
surfaces below a line of the user's own code that calls `tf.<something>`. That line names it.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from bench.errors import WorkloadError

T = TypeVar("T")
# `tf.keras` is Keras itself (Keras 3 under TensorFlow 2.16+), which runs on JAX too
_TF_CALL = re.compile(r"\b(tf\.(?!keras\b)[A-Za-z_][\w.]*)\s*\(")
_LIBRARY_PARTS = ("site-packages", "dist-packages", f"{Path('bench', 'backends')}",
                  f"{Path('bench', 'training')}", f"{Path('bench', 'data')}")


def tf_op_in(exc: BaseException) -> str | None:
    """The TensorFlow op a user's line called on the way to `exc` (innermost first), with where
    it is: "tf.nn.relu (workload.py:12)"; None when no such line is on the traceback, nor on
    those of the errors it was raised from (a builder's error, told in one line, keeps the
    original as its context)."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        for frame in reversed(traceback.extract_tb(error.__traceback__)):
            if any(part in frame.filename for part in _LIBRARY_PARTS):
                continue
            if frame.line and (found := _TF_CALL.search(frame.line)):
                return f"{found.group(1)} ({Path(frame.filename).name}:{frame.lineno})"
        error = error.__cause__ or error.__context__
    return None


def checked(build: Callable[[], T], builder: str) -> T:
    """`build()`, a TensorFlow op met on the way being one line that names it and `builder`."""
    try:
        return build()
    except Exception as exc:
        if (op := tf_op_in(exc)) is None:
            raise
        raise WorkloadError(f"model '{builder}' uses TensorFlow ops ({op}): write it with "
                            "keras.ops to run on JAX") from None
