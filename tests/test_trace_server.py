"""`bench trace`: Chrome-trace export and the loopback-only xprof server, on a real TF trace.

A module fixture runs a tiny MirroredStrategy custom loop (2 logical CPUs) under the profiler in a
subprocess and lays its trace out like a run directory. Network use: 127.0.0.1 only.
"""

from __future__ import annotations

import gzip
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import pytest

from tests.conftest import REPO, bench
from tests.listeners import listeners

pytestmark = pytest.mark.slow

VARIANT = "mirrored-r2-ctl-float32-gb64"

TRACE_SCRIPT = """
import sys

import keras
import tensorflow as tf

logdir = sys.argv[1]
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(4)])
    optimizer = keras.optimizers.SGD(0.01)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
x = tf.random.normal((640, 16))
y = tf.random.uniform((640,), maxval=4, dtype=tf.int32)
data = iter(strategy.experimental_distribute_dataset(
    tf.data.Dataset.from_tensor_slices((x, y)).batch(64).repeat()))


def replica_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(loss_fn(yb, model(xb, training=True)),
                                          global_batch_size=64)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def train_step(iterator):
    xb, yb = next(iterator)
    return strategy.reduce("SUM", strategy.run(replica_step, (xb, yb)), axis=None)


for _ in range(4):
    train_step(data).numpy()
tf.profiler.experimental.start(logdir)
for i in range(4, 10):
    with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
        train_step(data).numpy()
tf.profiler.experimental.stop()
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("trace") / "run"
    logdir = run / "traces" / VARIANT
    logdir.mkdir(parents=True)
    (run / "variants.json").write_text(json.dumps([{"id": VARIANT}, {"id": "untraced-variant"}]))
    (run / "records.jsonl").write_text("")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(TRACE_SCRIPT), str(logdir)],
                          capture_output=True, text=True, timeout=300, env=env,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(logdir.glob("plugins/profile/*/*.xplane.pb")), proc.stderr[-3000:]
    return run


def _traceback_free_one_line(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


# --- export -----------------------------------------------------------------------------------

def test_export_only_writes_chrome_trace(run_dir: Path) -> None:
    proc = bench("trace", str(run_dir), "--export-only", timeout=180)
    assert proc.returncode == 0, proc.stderr
    paths = [Path(line) for line in proc.stdout.splitlines() if line.endswith(".trace.json.gz")]
    assert len(paths) == 1, proc.stdout
    out = paths[0]
    source = out.with_name(out.name.replace(".trace.json.gz", ".xplane.pb"))
    assert out.is_file() and source.is_file(), sorted(p.name for p in out.parent.iterdir())
    assert out.name == next(out.parent.glob("*.xplane.pb")).name.replace(".xplane.pb",
                                                                          ".trace.json.gz")
    with gzip.open(out, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X"]
    assert complete and all("ts" in e and "dur" in e and "pid" in e for e in complete)
    assert all(e for e in events)  # xprof's trailing `{}` placeholder is dropped
    assert any(e.get("ph") == "M" and e.get("name") == "process_name" for e in events)
    assert any(e["name"].startswith("train") for e in complete), "no step markers in the trace"


def test_export_reports_bad_xplane_and_goes_on(run_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    (bad / "traces" / "v" / "plugins" / "profile" / "s").mkdir(parents=True)
    (bad / "variants.json").write_text(json.dumps([{"id": "v"}]))
    (bad / "traces" / "v" / "plugins" / "profile" / "s" / "h.xplane.pb").write_bytes(b"garbage")
    good = next((run_dir / "traces" / VARIANT).glob("plugins/profile/*/*.xplane.pb"))
    (bad / "traces" / "v" / "worker-0" / "plugins" / "profile" / "s").mkdir(parents=True)
    (bad / "traces" / "v" / "worker-0" / "plugins" / "profile" / "s" / "w.xplane.pb").write_bytes(
        good.read_bytes())
    proc = bench("trace", str(bad), "v", "--export-only", timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "h.xplane.pb: not converted" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout.strip().endswith("w.trace.json.gz"), proc.stdout
    assert not (bad / "traces" / "v" / "plugins" / "profile" / "s" / "h.trace.json.gz").exists()


# --- bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (("{run}", "no-such-variant"), "no variant 'no-such-variant'"),
    (("{run}", "untraced-variant"), "no traces for variant 'untraced-variant'"),
    (("{run}/traces",), "not a run directory"),
    (("{run}/missing",), "no such run directory"),
])
def test_bad_input_is_one_line_exit_2(run_dir: Path, args: tuple[str, ...], message: str) -> None:
    proc = bench("trace", *(a.format(run=run_dir) for a in args), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    _traceback_free_one_line(proc.stderr)
    assert message in proc.stderr
    if "no-such-variant" in args:
        assert VARIANT in proc.stderr  # names what exists


def test_a_taken_port_is_refused_before_any_trace_is_converted(run_dir: Path,
                                                              tmp_path: Path) -> None:
    """`bench trace` checks its port first: no trace is converted for a server that cannot
    listen (converting every trace of a large run takes minutes)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    for done in run.rglob("*.trace.json.gz"):
        done.unlink()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = bench("trace", str(run), "--port", str(port), timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    _traceback_free_one_line(proc.stderr)
    assert f"127.0.0.1:{port}: cannot listen" in proc.stderr
    assert not list(run.rglob("*.trace.json.gz"))


# --- serving ----------------------------------------------------------------------------------

def _get(url: str, attempts: int = 5) -> bytes:
    assert urlparse(url).hostname == "127.0.0.1", url
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=60) as resp:
                body = resp.read()
                return gzip.decompress(body) if resp.headers.get("Content-Encoding") == "gzip" else body
        except (urllib.error.URLError, ConnectionError):
            if attempt == attempts - 1:
                raise
            time.sleep(1)
    raise AssertionError("unreachable")




def _find(doc: Any, key: str) -> list[Any]:
    if isinstance(doc, dict):
        return ([doc[key]] if key in doc else []) + [v for x in doc.values() for v in _find(x, key)]
    if isinstance(doc, list):
        return [v for x in doc for v in _find(x, key)]
    return []


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_on_loopback_and_stop(run_dir: Path, tmp_path: Path, stop_signal: int) -> None:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
    env.pop("LISTEN_PID", None)
    stderr_path = tmp_path / "stderr.txt"
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "bench", "trace", str(run_dir), VARIANT],
                                cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=stderr, text=True)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 180
        url = None
        while url is None:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, f"exited {proc.wait()}: {seen} {stderr_path.read_text()[-3000:]}"
            seen.append(line)
            if m := re.match(r"Serving traces of \S+ at (http://\S+/) \(Ctrl-C to stop\)$", line):
                url = m.group(1)
        assert f"run/{VARIANT}" in seen[-1]
        parsed = urlparse(url)
        assert parsed.hostname == "127.0.0.1" and parsed.port
        port = parsed.port

        # The runs list printed by bench == the one xprof serves.
        runs = json.loads(_get(url + "data/plugin/profile/runs"))
        assert len(runs) == 1, runs
        run = runs[0]
        time.sleep(0.5)
        printed = []
        while not lines.empty():
            item = lines.get_nowait()
            if item is not None:
                printed.append(item.strip())
        assert run in printed, printed

        tools = json.loads(_get(f"{url}data/plugin/profile/run_tools?run={quote(run)}"))
        assert "overview_page" in tools and "trace_viewer@" in tools
        hosts = json.loads(_get(f"{url}data/plugin/profile/hosts?run={quote(run)}&tag=overview_page"))
        host = hosts[0]["hostname"]
        overview = json.loads(_get(f"{url}data/plugin/profile/data?run={quote(run)}"
                                   f"&tag=overview_page&host={quote(host)}"))
        averages = _find(overview, "steptime_ms_average")
        assert averages and float(averages[0]) > 0, averages
        trace = json.loads(_get(f"{url}data/plugin/profile/data?run={quote(run)}"
                                f"&tag={quote('trace_viewer@')}&host={quote(host)}"))
        assert trace["traceEvents"]
        assert b"<html" in _get(url).lower()

        # Only 127.0.0.1:<port> listens: no wildcard / gRPC listener from xprof.
        assert listeners(proc.pid) == [("127.0.0.1", port)]

        proc.send_signal(stop_signal)
        assert proc.wait(timeout=10) == 0, stderr_path.read_text()[-3000:]
        assert "Traceback" not in stderr_path.read_text()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
