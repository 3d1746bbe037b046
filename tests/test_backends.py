"""The Keras backend axis through the real `bench run`: the same model on TensorFlow and on JAX
(one device, keras.distribution's DataParallel over two XLA host devices, ModelParallel with
the built-in layout), both APIs, one run shared by the tests, its JAX variants checked for loss
parity against TensorFlow's baseline and for accuracy; a user's model written with TensorFlow
ops failing its JAX variant in one line; the axis' validation errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.child_env import (
    COLLECTIVE_TIMEOUT_FLAG,
    HOST_DEVICES_FLAG,
    SCHEDULER_FLAG,
    backend_env,
)
from bench.launch.process import last_error_line
from bench.report.backends import backend_charts, backend_pairs
from bench.report.detail_charts import top_ops_chart
from bench.report.runs import load_run
from bench.scenario.loading import load_variants
from tests.conftest import BenchRun, bench, bench_run, write_scenario
from tests.early import EarlyContext, early_fixture

BACKENDS = """
[train]
backend = ["tensorflow", "jax"]
api = ["fit", "ctl"]

[measure]
trace_steps = 4
control = false

[check]
loss_parity = { steps = 5, batch = 32 }
accuracy = { min = 0.05, steps = 5 }

[[strategies]]
name = "default"

[[strategies]]
name = "data_parallel"
replicas = 2

[[strategies]]
name = "model_parallel"
replicas = 2
api = "fit"

[[strategies]]
name = "mirrored"           # DataParallel's counterpart on TensorFlow
replicas = 2
api = "fit"

[[strategies]]
name = "default"
backend = "jax"
api = "fit"
model = { name = "tf_ops_model:model" }

[[strategies]]
name = "default"
backend = "jax"
api = "fit"
model = { name = "tf_ops_model:functional" }

[[strategies]]
name = "data_parallel"
replicas = 2
api = "ctl"
precision = ["mixed_bfloat16", "mixed_float16"]

[[strategies]]
name = "data_parallel"
replicas = 2
api = "ctl"
feed = "numpy"

[[strategies]]
name = "model_parallel"
replicas = 2
api = "fit"
model = { name = "user_layers:layered" }
layout = { "hidden/kernel" = ["none", "model"], "hidden/bias" = ["model"] }
"""

# A user's model whose layer calls a TensorFlow op: it runs on TensorFlow, not on JAX.
TF_OPS_MODEL = '''
import keras
import tensorflow as tf


class Relu(keras.layers.Layer):
    def call(self, x):
        return tf.nn.relu(x)


def model(input_shape):
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Dense(32)(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(10)(Relu()(x)))


def functional(input_shape):
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Dense(32)(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(10)(tf.math.tanh(x)))
'''


# A user's model whose layers bench's built-in layout does not name: the scenario's layout
# shards it.
USER_LAYERS = '''
import keras


def layered(input_shape):
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Dense(32, activation="relu", name="hidden")(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(10, name="logits")(x))
'''


def start_backends(context: EarlyContext) -> BenchRun:
    factory = context.tmp_path_factory
    tmp = factory.mktemp("backends")
    (tmp / "tf_ops_model.py").write_text(TF_OPS_MODEL)
    (tmp / "user_layers.py").write_text(USER_LAYERS)
    return bench_run(write_scenario(tmp, BACKENDS, name="backends"), tmp / "results")


backends_run = early_fixture("both_backends", start_backends)

NUMPY_CTL = "data_parallel-r2-numpy-jax-ctl-float32-gb32"
USER_LAYOUT = "model_parallel-r2-layered-jax-fit-float32-gb32"
JAX_OK = ["default-r1-jax-fit-float32-gb16", "default-r1-jax-ctl-float32-gb16",
          "data_parallel-r2-jax-fit-float32-gb32", "data_parallel-r2-jax-ctl-float32-gb32",
          "model_parallel-r2-jax-fit-float32-gb32", "data_parallel-r2-jax-ctl-mixed_bfloat16-gb32",
          "data_parallel-r2-jax-ctl-mixed_float16-gb32", NUMPY_CTL, USER_LAYOUT]
TF_OK = ["default-r1-fit-float32-gb16", "default-r1-ctl-float32-gb16",
         "mirrored-r2-fit-float32-gb32"]
TF_OPS = "default-r1-model-jax-fit-float32-gb16"
TF_OPS_FUNCTIONAL = "default-r1-functional-jax-fit-float32-gb16"


@pytest.mark.slow
def test_both_backends_run_through_the_same_run(backends_run: BenchRun) -> None:
    run = backends_run
    # exit 1: a variant failed (the model with TensorFlow ops), the run went on
    assert run.proc.returncode == 1, run.proc.stdout + run.proc.stderr
    by_id = run.by_id()
    assert sorted(by_id) == sorted([*JAX_OK, *TF_OK, TF_OPS, TF_OPS_FUNCTIONAL])
    for vid in [*JAX_OK, *TF_OK]:
        rec = by_id[vid]
        assert rec["status"] == "ok", (vid, rec.get("reason"))
        backend = "jax" if "-jax-" in vid else "tensorflow"
        assert rec["variant"]["backend"] == backend
        assert rec["throughput"]["headline"] > 0
        # the same measurement design: interleaved turns, both windows, settling
        assert rec["measurement"]["interleaved"] is True
        assert len(rec["measurement"]["window_s"]) == rec["variant"]["measure"]["repeats"]
        assert len(rec["measurement"]["observed_window_s"]) == rec["variant"]["measure"]["repeats"]
        assert rec["loss"]["final"] < rec["loss"]["initial"], vid  # it trained
    assert "fit jax" in run.proc.stdout  # the table's API column names the backend


@pytest.mark.slow
def test_each_jax_variant_is_shown_beside_its_tensorflow_counterpart(
        backends_run: BenchRun) -> None:
    run = load_run(backends_run.run_dir)
    pairs = {str(jax.variant_id): str(tf.variant_id) for tf, jax in backend_pairs(run.records)}
    # one device with one device, DataParallel with Mirrored; ModelParallel has no counterpart
    assert pairs == {"default-r1-jax-fit-float32-gb16": "default-r1-fit-float32-gb16",
                     "default-r1-jax-ctl-float32-gb16": "default-r1-ctl-float32-gb16",
                     "data_parallel-r2-jax-fit-float32-gb32": "mirrored-r2-fit-float32-gb32"}
    out = backends_run.proc.stdout
    assert "JAX vs TensorFlow" in out and "JAX / TensorFlow" in out
    by_id = backends_run.by_id()
    ratio = (by_id["data_parallel-r2-jax-fit-float32-gb32"]["throughput"]["headline"]
             / by_id["mirrored-r2-fit-float32-gb32"]["throughput"]["headline"])
    assert f"×{ratio:.2f}" in out
    chart = backend_charts(run)[0].figure
    assert [bar["name"] for bar in chart["data"]] == ["TensorFlow", "JAX"]
    assert chart["data"][0]["x"] == ["1 device · fit", "1 device · ctl", "2 replicas · fit"]
    reports = backends_run.run_dir.parent.parent / "reports" / backends_run.run_dir.name
    page = next(reports.glob("run-*.html")).read_text()
    assert 'id="section-backends"' in page
    assert "JAX vs TensorFlow (the same model, API and precision" in page


@pytest.mark.slow
def test_jax_variants_train_the_same_model_as_tensorflows_baseline(backends_run: BenchRun
                                                                    ) -> None:
    by_id = backends_run.by_id()
    base = by_id["default-r1-fit-float32-gb16"]["checks"]["loss_parity"]
    assert base["status"] == "baseline"  # TensorFlow's: the backend listed first
    same_model = [v for v in JAX_OK if "float32" in v and v != USER_LAYOUT]
    for vid in [*same_model, "default-r1-ctl-float32-gb16", "mirrored-r2-fit-float32-gb32"]:
        parity = by_id[vid]["checks"]["loss_parity"]
        assert parity["status"] == "ok", (vid, parity)
        assert parity["baseline"] == "default-r1-fit-float32-gb16"
        assert parity["baseline_backend"] == "tensorflow"
        assert parity["backend"] == by_id[vid]["variant"]["backend"]
        # the same start, batches and steps: the same loss, to float32's rounding
        assert parity["relative_difference"] < 1e-3, (vid, parity)
    # JAX's default is compared, not made a second baseline
    assert by_id["default-r1-jax-fit-float32-gb16"]["checks"]["loss_parity"]["status"] == "ok"
    assert "loss parity ok (0.00% vs tensorflow)" in backends_run.proc.stdout
    bf16 = by_id["data_parallel-r2-jax-ctl-mixed_bfloat16-gb32"]["checks"]["loss_parity"]
    assert bf16["status"] == "no-baseline"  # no mixed_bfloat16 baseline in this run


@pytest.mark.slow
def test_a_jax_variant_checks_its_accuracy(backends_run: BenchRun) -> None:
    for vid in JAX_OK:
        accuracy = backends_run.by_id()[vid]["checks"]["accuracy"]
        assert accuracy["status"] == "ok", (vid, accuracy)
        assert accuracy["eval_examples"] > 0 and accuracy["accuracy"] >= 0.05


@pytest.mark.slow
def test_a_jax_variant_records_its_backend_and_versions(backends_run: BenchRun) -> None:
    rec = backends_run.by_id()["default-r1-jax-fit-float32-gb16"]
    assert rec["env"]["keras_backend"] == "jax"
    assert rec["env"]["jax"] and rec["env"]["jaxlib"]
    packages = rec["environment"]["packages"]
    assert packages["jax"] == rec["env"]["jax"] and "jaxlib" in packages


@pytest.mark.slow
def test_a_jax_step_is_counted_from_its_compiled_cost(backends_run: BenchRun) -> None:
    by_id = backends_run.by_id()
    one = by_id["default-r1-jax-fit-float32-gb16"]["utilization"]
    two = by_id["data_parallel-r2-jax-ctl-float32-gb32"]["utilization"]
    assert one["status"] == "ok" and two["status"] == "ok", (one, two)
    assert one["flops_source"].startswith("XLA cost analysis")
    # the whole step's count: twice the batch, about twice the FLOPs (the optimizer's are few)
    assert 1.8 < two["flops_per_step"] / one["flops_per_step"] < 2.05
    assert 0 < one["mfu"] < 1


@pytest.mark.slow
def test_data_parallel_splits_the_batch_over_two_host_devices(backends_run: BenchRun) -> None:
    by_id = backends_run.by_id()
    for vid in ("data_parallel-r2-jax-fit-float32-gb32", "data_parallel-r2-jax-ctl-float32-gb32"):
        rec = by_id[vid]
        assert rec["strategy_info"]["class"] == "DataParallel"
        assert rec["effective"] == {"replicas": 2, "per_replica_batch": 16, "global_batch": 32}
        assert len(rec["devices"]["devices"]) == 2 and rec["devices"]["simulated"] is True
    one = by_id["default-r1-jax-fit-float32-gb16"]
    assert one["strategy_info"]["class"] == "NoDistribution"
    assert len(one["devices"]["devices"]) == 1


@pytest.mark.slow
def test_a_jax_variant_trains_under_its_precision_policy(backends_run: BenchRun) -> None:
    by_id = backends_run.by_id()
    rec = by_id["data_parallel-r2-jax-ctl-mixed_bfloat16-gb32"]
    assert rec["precision_policy"] == "mixed_bfloat16"
    assert not any("loss scaling" in note for note in rec["notes"])
    # mixed_float16 runs on a CPU (float16_on_cpu skips TensorFlow's only), the custom loop's
    # loss scaled by a LossScaleOptimizer, as on TensorFlow
    rec = by_id["data_parallel-r2-jax-ctl-mixed_float16-gb32"]
    assert rec["precision_policy"] == "mixed_float16"
    assert any(note.startswith("loss scaling: LossScaleOptimizer, dynamic, scale ")
               for note in rec["notes"]), rec["notes"]


@pytest.mark.slow
def test_model_parallel_shards_the_builtin_model(backends_run: BenchRun) -> None:
    rec = backends_run.by_id()["model_parallel-r2-jax-fit-float32-gb32"]
    assert rec["strategy_info"]["class"] == "ModelParallel"
    assert rec["effective"]["global_batch"] == 32
    assert len(rec["devices"]["devices"]) == 2


@pytest.mark.slow
def test_model_parallel_shards_a_users_model_by_the_scenarios_layout(
        backends_run: BenchRun) -> None:
    by_id = backends_run.by_id()
    rec = by_id[USER_LAYOUT]
    assert rec["strategy_info"]["class"] == "ModelParallel"
    # the rules' variables, and no other: bench's own layout names none of this model's
    assert sorted(rec["strategy_info"]["sharded_variables"]) == ["hidden/bias", "hidden/kernel"]
    assert not any(note.startswith("model_parallel:") for note in rec["notes"])
    builtin = by_id["model_parallel-r2-jax-fit-float32-gb32"]["strategy_info"]
    assert "mlp/dense/kernel" in builtin["sharded_variables"]


@pytest.mark.slow
def test_the_jax_custom_loop_reads_the_numpy_feed(backends_run: BenchRun) -> None:
    rec = backends_run.by_id()[NUMPY_CTL]
    assert rec["variant"]["data"]["feed"] == "numpy"
    assert rec["effective"]["global_batch"] == 32


@pytest.mark.slow
def test_a_jax_trace_is_captured_and_analysed(backends_run: BenchRun) -> None:
    rec = backends_run.by_id()["default-r1-jax-ctl-float32-gb16"]
    assert rec["trace"]["status"] == "captured"
    assert list(Path(rec["trace"]["dir"]).glob("plugins/profile/*/*.xplane.pb"))
    assert "trace: input" in backends_run.proc.stdout  # the breakdown the terminal prints
    # its top ops are the HLO instructions XLA executed, one of each a traced step
    ops = rec["trace"]["analysis"]["top_ops"]
    assert ops and any(op["type"] == "dot" for op in ops), ops
    assert all(op["occurrences"] % rec["trace"]["steps"] == 0 for op in ops), ops
    split = backends_run.by_id()["data_parallel-r2-jax-ctl-float32-gb32"]["trace"]["analysis"]
    assert any(op["type"] == "all-reduce" for op in split["top_ops"])  # the gradients' mean
    assert split["breakdown_ms"]["collective"] > 0
    heat = top_ops_chart(load_run(backends_run.run_dir)).figure["data"][0]
    assert "default-r1-jax-ctl-float32-gb16" in heat["x"]  # beside TensorFlow's in the heatmap


@pytest.mark.slow
def test_a_model_with_tensorflow_ops_fails_its_jax_variant_in_one_line(
        backends_run: BenchRun) -> None:
    rec = backends_run.by_id()[TF_OPS]
    assert rec["status"] == "failed"
    reason = rec["reason"]
    assert "\n" not in reason
    assert "model 'tf_ops_model:model' uses TensorFlow ops (tf.nn.relu" in reason
    assert reason.endswith("write it with keras.ops to run on JAX")
    # a functional builder's TensorFlow op, met on a KerasTensor as the model is built
    rec = backends_run.by_id()[TF_OPS_FUNCTIONAL]
    assert rec["status"] == "failed" and "\n" not in rec["reason"]
    assert rec["reason"].startswith("model 'tf_ops_model:functional' uses TensorFlow ops "
                                    "(tf.math.tanh (tf_ops_model.py:"), rec["reason"]


INVALID = {
    "a tf.distribute strategy on jax": ("""
        [[strategies]]
        name = "mirrored"
        replicas = 2
        backend = "jax"
        """, "strategies[0].backend: strategy 'mirrored' does not run on jax"),
    "a keras.distribution strategy without jax": ("""
        [train]
        backend = ["tensorflow"]
        [[strategies]]
        name = "data_parallel"
        """, "train.backend: strategy 'data_parallel' (strategies[0]) runs on jax only"),
    "tf-keras on jax": ("""
        [train]
        backend = ["jax"]
        keras = ["keras3", "tf_keras"]
        [[strategies]]
        name = "default"
        """, "train: backend 'jax' runs Keras 3 only"),
    "numpy for TensorFlow's custom loop": ("""
        [train]
        backend = ["tensorflow", "jax"]
        api = "ctl"
        [data]
        feed = "numpy"
        [[strategies]]
        name = "default"
        """, "data.feed: 'numpy' feeds Keras fit and JAX's custom loop; TensorFlow's custom "
             "loop (api \"ctl\") takes bench's tf.data pipeline"),
    "a layout on another strategy": ("""
        [[strategies]]
        name = "data_parallel"
        layout = { "dense.*kernel" = ["none", "model"] }
        """, "strategies[0]: 'layout' applies to strategy 'model_parallel' only"),
    "a layout's unknown mesh axis": ("""
        [[strategies]]
        name = "model_parallel"
        layout = { "dense.*kernel" = ["none", "modle"] }
        """, "strategies[0].layout.dense.*kernel[1]: Input should be 'batch', 'model' or 'none'"),
    "a layout's broken regex": ("""
        [[strategies]]
        name = "model_parallel"
        layout = { "dense[" = ["model"] }
        """, "strategies[0].layout: 'dense[' is not a regular expression"),
    "a mesh axis split twice": ("""
        [[strategies]]
        name = "model_parallel"
        layout = { "kernel" = ["model", "model"] }
        """, "strategies[0].layout: 'kernel' splits two dimensions over mesh axis 'model'"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_a_backend_a_strategy_lacks_is_one_line(tmp_path: Path, case: str) -> None:
    body, expected = INVALID[case]
    path = write_scenario(tmp_path, body)
    proc = bench("validate", str(path))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in proc.stderr


def test_the_numpy_feed_is_sliced_and_placed_by_the_data_layout(tmp_path: Path) -> None:
    """The JAX custom loop's NumPy batches: consecutive slices of the arrays, from the start
    again after the last whole batch, each array (a dict's too) split over DataParallel's two
    host devices as its tf.data batches are."""
    script = tmp_path / "feed.py"
    script.write_text(textwrap.dedent("""
        import json, sys
        import keras
        import numpy as np
        from bench.backends.jax_distribution import Placement
        from bench.backends.jax_loops import array_batches, placed_batches

        import jax
        dist = keras.distribution.DataParallel(devices=[f"cpu:{d.id}" for d in jax.devices()])
        placement = Placement(dist, jax.devices(), "cpu")
        x = {"a": np.arange(10 * 3, dtype=np.float32).reshape(10, 3),
             "b": np.arange(10, dtype=np.int32)}
        y = np.arange(10, dtype=np.float32)
        batches = placed_batches(array_batches((x, y), 4), placement)
        seen = []
        for _ in range(3):
            xb, yb = next(batches)
            seen.append({"y": np.asarray(yb).tolist(), "b": np.asarray(xb["b"]).tolist(),
                         "a_rows": [s.data.shape[0] for s in xb["a"].addressable_shards],
                         "y_devices": len(yb.sharding.device_set)})
        json.dump(seen, sys.stdout)
        """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parent.parent,
                          env={**os.environ, **backend_env("jax", 2, dict(os.environ))})
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [s["y"] for s in seen] == [[0, 1, 2, 3], [4, 5, 6, 7], [0, 1, 2, 3]]
    assert [s["b"] for s in seen] == [s["y"] for s in seen]
    assert all(s["a_rows"] == [2, 2] and s["y_devices"] == 2 for s in seen)


def test_the_matrix_pairs_each_strategy_with_its_backends(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, """
        [train]
        backend = ["tensorflow", "jax"]
        api = "fit"
        [[strategies]]
        name = "default"
        [[strategies]]
        name = "mirrored"
        replicas = 2
        [[strategies]]
        name = "data_parallel"
        replicas = 2
        """)
    ids = [v.id for v in load_variants(path)[1]]
    assert ids == ["default-r1-fit-float32-gb16", "default-r1-jax-fit-float32-gb16",
                   "mirrored-r2-fit-float32-gb32", "data_parallel-r2-jax-fit-float32-gb32"]


def test_a_jax_process_is_told_its_backend_devices_and_collective_timeout() -> None:
    env = backend_env("jax", 2, {"XLA_FLAGS": f"--xla_foo=1 {HOST_DEVICES_FLAG}=8"}, 60)
    assert env["KERAS_BACKEND"] == "jax"
    assert env["XLA_FLAGS"].split() == ["--xla_foo=1", f"{HOST_DEVICES_FLAG}=2",
                                        f"{SCHEDULER_FLAG}=false",
                                        f"{COLLECTIVE_TIMEOUT_FLAG}=15"]
    assert SCHEDULER_FLAG not in backend_env("jax", 1, {}, 60)["XLA_FLAGS"]
    assert backend_env("tensorflow", 2, {}) == {}


def test_an_aborted_rendezvous_is_the_reason_line(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    log.write_text(
        "E1202 07:31:02.000000 1234 rendezvous.cc:120] This thread has been waiting for 20s\n"
        "F1202 07:31:22.123456 1234 rendezvous.cc:161] Expected 2 threads to join the "
        "rendezvous, but not all of them arrived on time.\n"
        "*** Check failure stack trace: ***\n    @ 0x7f00 abort\n")
    assert last_error_line(log) == ("rendezvous.cc:161] Expected 2 threads to join the "
                                    "rendezvous, but not all of them arrived on time.")


STEPS_PER_CALL = """
[train]
backend = "jax"
api = ["fit", "ctl"]
steps_per_execution = [1, 4]

[measure]
warmup_steps = 4
control = false
trace_steps = 4

[[strategies]]
name = "default"
"""


def start_steps_per_call(context: EarlyContext) -> BenchRun:
    tmp = context.tmp_path_factory.mktemp("jax_steps_per_call")
    return bench_run(write_scenario(tmp, STEPS_PER_CALL, name="jax_steps_per_call"),
                     tmp / "results")


steps_per_call_run = early_fixture("jax_steps_per_call", start_steps_per_call)


@pytest.mark.slow
def test_jax_fit_runs_several_steps_a_call_and_the_custom_loop_says_it_cannot(
        steps_per_call_run: BenchRun) -> None:
    run = steps_per_call_run
    assert run.proc.returncode == 0, run.proc.stdout[-3000:]
    records = run.by_id()
    blocked = records["default-r1-spe4-jax-fit-float32-gb16"]
    assert blocked["status"] == "ok", blocked.get("error")
    timing = blocked["timing"]
    assert timing["steps_per_sample"] == 4 and timing["timed_steps"] % 4 == 0
    assert all(len(window) == blocked["measurement"]["observed_window_steps"] // 4
               for window in blocked["samples"]["timed"])  # a sample a call of 4 steps
    assert blocked["trace"]["status"] == "captured"
    assert records["default-r1-jax-fit-float32-gb16"]["timing"]["steps_per_sample"] == 1
    skipped = records["default-r1-spe4-jax-ctl-float32-gb16"]
    assert skipped["status"] == "skipped"
    assert "steps_per_execution > 1 through fit only" in skipped["reason"]
