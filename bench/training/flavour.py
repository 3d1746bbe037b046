"""Which Keras a variant trains with: Keras 3 (`keras`) or tf-keras 2.x (`tf_keras`).

tf-keras is what runs `fit` under MultiWorkerMirrored and ParameterServer (Keras 3 cannot), and it
must be chosen before TensorFlow is imported (`TF_USE_LEGACY_KERAS=1`, which also makes `tf.keras`
tf-keras). So a tf_keras variant runs in a process started with that variable (bench.placement
sets it): a fresh interpreter, or a child of the run's tf-keras fork server, which imported
TensorFlow with it; never a child of the Keras 3 server. The worker calls `use` before anything
imports TensorFlow; every builder then asks `keras()` for the module, so one code path serves
both flavours.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
from types import ModuleType, SimpleNamespace
from typing import Any

from bench.errors import VariantSkipped
from bench.placement import LEGACY_KERAS_ENV

_chosen = "keras3"


def install_hint() -> str:
    """The command that adds tf-keras without pulling the full `tensorflow` wheel (tf-keras
    declares `tensorflow` as its only dependency, which next to tensorflow-cpu would add the
    572 MB GPU build): --no-deps, the version matching the installed TensorFlow."""
    for dist in ("tensorflow", "tensorflow-cpu", "tf-nightly", "tensorflow-macos"):
        try:
            major, minor = importlib.metadata.version(dist).split(".")[:2]
            return f"pip install --no-deps \"tf-keras~={major}.{minor}.0\""
        except (importlib.metadata.PackageNotFoundError, ValueError):
            continue
    return "pip install --no-deps tf-keras  (the tf-keras release matching your TensorFlow)"


def use(flavour: str) -> None:
    """Make this process train with `flavour`: set TF_USE_LEGACY_KERAS for tf_keras (refused
    once TensorFlow is imported, as TensorFlow reads it only then); a missing tf-keras is a
    skip with the install command, not a crash."""
    global _chosen
    if flavour == "tf_keras":
        if os.environ.get(LEGACY_KERAS_ENV) != "1":
            if "tensorflow" in sys.modules:
                raise RuntimeError(f"a tf_keras variant needs {LEGACY_KERAS_ENV}=1 before "
                                   "TensorFlow is imported, and this process has imported it "
                                   "already (it must be a fresh interpreter or a child of the "
                                   "tf-keras fork server)")
            os.environ[LEGACY_KERAS_ENV] = "1"
        try:
            importlib.import_module("tf_keras")
        except ImportError as exc:
            raise VariantSkipped(f"train.keras = \"tf_keras\" but tf-keras cannot be imported "
                                 f"({exc}); install it without pulling the full tensorflow "
                                 f"wheel: {install_hint()}") from None
    _chosen = flavour


def chosen() -> str:
    return _chosen


def keras() -> ModuleType:
    """The Keras module of this process's flavour."""
    return importlib.import_module("tf_keras" if _chosen == "tf_keras" else "keras")


def describe() -> dict[str, str]:
    """The flavour and its version, for the record."""
    return {"flavour": _chosen, "version": str(keras().__version__)}


def ops() -> Any:
    """Keras 3's `keras.ops`, or the TensorFlow functions of the same meaning for tf-keras (which
    has no ops module): only what bench's own layers use."""
    module = keras()
    if hasattr(module, "ops"):
        return module.ops
    import tensorflow as tf

    return SimpleNamespace(minimum=tf.minimum, abs=tf.abs, sum=tf.reduce_sum, cast=tf.cast,
                           matmul=tf.matmul, expand_dims=tf.expand_dims, arange=tf.range)
