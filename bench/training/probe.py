"""`python -m bench.training.probe`: print the devices TensorFlow sees here, as JSON.

Run in a child process so that `bench list` and `bench env` never import TensorFlow themselves.
"""

from __future__ import annotations

import json
from typing import Any

from bench.training import devices


def probe() -> dict[str, Any]:
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return {
        "tensorflow": tf.__version__,
        "built_with_cuda": tf.test.is_built_with_cuda(),
        "physical": [f"{d.device_type}:{d.name}" for d in tf.config.list_physical_devices()],
        "gpus": len(gpus),
        "tpus": len(tf.config.list_logical_devices("TPU")),
        "gpu": devices.gpu_facts(),
    }


def main(argv: list[str] | None = None) -> int:
    print(json.dumps(probe()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
