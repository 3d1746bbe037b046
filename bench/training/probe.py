"""`python -m bench.training.probe`: print the devices TensorFlow sees here, as JSON.

Run in a child process so that `bench list` and `bench env` never import TensorFlow themselves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any


def probe() -> dict[str, Any]:
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return {
        "tensorflow": tf.__version__,
        "built_with_cuda": tf.test.is_built_with_cuda(),
        "physical": [f"{d.device_type}:{d.name}" for d in tf.config.list_physical_devices()],
        "gpus": len(gpus),
        "tpus": len(tf.config.list_logical_devices("TPU")),
    }


def probe_in_subprocess(timeout_s: float = 120.0) -> dict[str, Any]:
    """Probe devices in a child; on failure return the reason instead of raising."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    try:
        out = subprocess.run([sys.executable, "-m", "bench.training.probe"], capture_output=True,
                             text=True, timeout=timeout_s, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"error": f"device probe timed out after {timeout_s:g} s"}
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"device probe failed: {tail}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(probe()))
