"""Does TensorFlow's profiler crash a MultiWorkerMirrored worker as it stops? Without bench.

Two workers on localhost (fresh interpreters, TF_CONFIG each) train a small Keras MLP with a
custom loop for 60 steps, then trace `--sessions` windows of 8 steps as bench does
(`tf.profiler.experimental.start` with host tracer level 2, one `Trace("train", _r=1)` per step,
the loss on the host every step), 5 plain steps after each. `--trace` says which workers run
the profiler: `all`, `chief` (worker 0) or `other` (worker 1); the rest run the same steps
unprofiled. It prints how each run ended: both workers 0, or the codes and the line the dying
worker left (faulthandler's stack names `profiler_v2.py ... in stop`). bench traces the chief
only because `other` crashes and `chief` does not (docs/measuring/measurements.md).
Usage (about 25 s a run here):
    python tests/benchmarks/multi_worker_trace.py --trace other --runs 6 --sessions 15
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import subprocess
import sys
import tempfile

STEPS_BEFORE, TRACED, AFTER = 60, 8, 5


def worker(index: int, ports: list[int], logdir: str, traced: bool, sessions: int) -> None:
    """One task of the cluster: train, then trace `sessions` windows if `traced`."""
    import faulthandler

    faulthandler.enable()
    os.environ["TF_CONFIG"] = json.dumps({
        "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
        "task": {"type": "worker", "index": index}})
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    import keras
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(),
                                  keras.layers.Dense(128, activation="relu"),
                                  keras.layers.Dense(10)])
        optimizer = keras.optimizers.Adam()
    images = tf.random.uniform([6400, 28, 28, 1])
    labels = tf.random.uniform([6400], maxval=10, dtype=tf.int64)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(128).prefetch(2)
    batches = iter(strategy.experimental_distribute_dataset(dataset))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def replica_step(batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        x, y = batch
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_fn(y, model(x, training=True)),
                                              global_batch_size=128)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def step(batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        return strategy.reduce("SUM", strategy.run(replica_step, args=(batch,)), axis=None)

    for _ in range(STEPS_BEFORE):
        float(step(next(batches)))
    options = tf.profiler.experimental.ProfilerOptions(host_tracer_level=2, python_tracer_level=0,
                                                       device_tracer_level=1)
    for session in range(sessions):
        if traced:
            tf.profiler.experimental.start(f"{logdir}/{session}", options=options)
        for i in range(TRACED):
            with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
                float(step(next(batches)))
        if traced:
            tf.profiler.experimental.stop()
        for _ in range(AFTER):
            float(step(next(batches)))
    sys.stdout.flush()
    os._exit(0)  # TensorFlow's own teardown can end a worker with 1 after its work is done


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _last_telling_line(output: bytes) -> str:
    lines = output.decode(errors="replace").splitlines()
    telling = [ln for ln in lines if "free" in ln or "corrupt" in ln or " in stop" in ln
               or "Error" in ln]
    return (telling or lines or [""])[-1].strip()[:160]


def run_cluster(trace: str, sessions: int, timeout_s: float) -> tuple[tuple[int, ...], list[str]]:
    """One cluster: both workers' exit codes and the telling line of each that failed."""
    ports = [_free_port(), _free_port()]
    logdir = tempfile.mkdtemp(prefix="mwms-trace-")
    traced = {"all": (True, True), "chief": (True, False), "other": (False, True)}[trace]
    procs = [subprocess.Popen(
        [sys.executable, __file__, "--worker", str(i), "--ports", ",".join(map(str, ports)),
         "--logdir", f"{logdir}/w{i}", "--sessions", str(sessions),
         *(["--traced"] if traced[i] else [])],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for i in range(2)]
    outputs = []
    for proc in procs:
        try:
            outputs.append(proc.communicate(timeout=timeout_s)[0])
        except subprocess.TimeoutExpired:
            proc.kill()
            outputs.append(proc.communicate()[0] + b"\ntimed out")
    codes = tuple(p.returncode for p in procs)
    return codes, [f"worker-{i}: {_last_telling_line(out)}"
                   for i, out in enumerate(outputs) if codes[i] != 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", choices=("all", "chief", "other"), default="all")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--sessions", type=int, default=15, help="traced windows per run")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ports", help=argparse.SUPPRESS)
    parser.add_argument("--logdir", help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker, [int(p) for p in args.ports.split(",")], args.logdir, args.traced,
               args.sessions)
        return
    outcomes: collections.Counter[tuple[int, ...]] = collections.Counter()
    for run in range(1, args.runs + 1):
        codes, problems = run_cluster(args.trace, args.sessions, args.timeout)
        outcomes[codes] += 1
        print(f"run {run}: exit codes {codes}" + "".join(f"\n  {p}" for p in problems),
              flush=True)
    print(f"--trace {args.trace}, {args.sessions} traced windows a run: "
          + ", ".join(f"{n} run(s) ended {codes}" for codes, n in sorted(outcomes.items())))


if __name__ == "__main__":
    main()
