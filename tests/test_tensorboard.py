"""TensorBoard really reads what bench writes: a real tiny run's directory loaded with TensorBoard's
own EventMultiplexer (hparams, metrics and step-time scalars of every variant, beside its profile),
and `bench tensorboard` serving the HParams dashboard to headless Chromium on 127.0.0.1 only.

Under CI=true a missing TensorBoard or Chromium fails these tests instead of skipping them.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser import IN_CI, chromium_available, open_url, require_chromium
from tests.conftest import REPO, BenchRun, bench, run_in_fresh_dir
from tests.early import EarlyContext, EarlyRuns, declare
from tests.listeners import listeners

ARTIFACTS = REPO / "test-artifacts"
BODY = """
[train]
api = "ctl"

[measure]
trace_steps = 4

[[strategies]]
name = "default"

[[strategies]]
name = "mirrored"
replicas = [1, 2]
"""


def _tensorboard_available() -> bool:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module", autouse=True)
def _require_tensorboard() -> None:
    if _tensorboard_available():
        return
    if IN_CI:
        pytest.fail("CI=true but tensorboard is not installed (pip install -e '.[test]')", pytrace=False)
    pytest.skip("tensorboard is not installed (pip install -e '.[tensorboard]')")


def start_tb(context: EarlyContext) -> BenchRun:
    return run_in_fresh_dir(context.tmp_path_factory, "tb", BODY)


@pytest.fixture(scope="module")
def run(early_runs: EarlyRuns) -> BenchRun:
    done = early_runs.result("tensorboard", start_tb)
    assert done.proc.returncode == 0, done.proc.stdout + done.proc.stderr
    assert done.run_dir is not None
    return done


declare(run, [("tensorboard", start_tb)])


def _multiplexer(logdir: Path) -> Any:
    from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer

    multiplexer = EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    return multiplexer


def _values(multiplexer: Any, run: str, tag: str) -> list[tuple[int, float]]:
    from tensorboard.util import tensor_util

    if tag not in multiplexer.Runs()[run]["tensors"]:
        return []
    return [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in multiplexer.Tensors(run, tag)]


@pytest.mark.slow
def test_tensorboard_reads_hparams_and_scalars_of_every_variant(run: BenchRun) -> None:
    from tensorboard.plugins.hparams import metadata

    assert run.run_dir is not None
    assert f"tensorboard: bench tensorboard {run.run_dir}" in run.proc.stdout.replace("\n", "")
    multiplexer = _multiplexer(run.run_dir)  # what `tensorboard --logdir RUN_DIR` loads
    hparams = multiplexer.PluginRunToTagToContent(metadata.PLUGIN_NAME)
    experiment = metadata.parse_experiment_plugin_data(hparams["traces"][metadata.EXPERIMENT_TAG])
    assert "metrics/examples_per_sec" in {m.name.tag for m in experiment.metric_infos}
    differs = {h.name for h in experiment.hparam_infos if h.differs}
    assert {"strategy", "replicas", "global_batch"} <= differs, differs
    assert len(run.records) == 5  # default, mirrored r1 and r2, the control twin, the yardstick
    for rec in run.records:
        vid = rec["variant_id"]
        name = f"traces/{vid}"
        assert rec["status"] == "ok", rec.get("error")
        start = metadata.parse_session_start_info_plugin_data(
            hparams[name][metadata.SESSION_START_INFO_TAG])
        assert start.group_name == vid
        axes = {k: v.string_value or v.number_value for k, v in start.hparams.items()}
        assert axes["strategy"] == rec["variant"]["strategy"]
        assert axes["replicas"] == rec["effective"]["replicas"]
        assert axes["global_batch"] == rec["effective"]["global_batch"]
        assert axes["status"] == "ok"
        [(_, examples)] = _values(multiplexer, name, "metrics/examples_per_sec")
        assert examples == pytest.approx(rec["throughput"]["headline"], rel=1e-6)
        [(_, median_ms)] = _values(multiplexer, name, "metrics/median_step_ms")
        assert median_ms == pytest.approx(rec["step_time"]["median"] * 1e3, rel=1e-6)
        samples = rec["samples"]
        timed = [s for window in samples["timed"] for s in window]
        phases = {phase: _values(multiplexer, name, f"step_time_ms/{phase}")
                  for phase in ("warmup", "timed", "traced")}
        assert [ms for _, ms in phases["timed"]] == pytest.approx([s * 1e3 for s in timed], rel=1e-6)
        assert len(phases["warmup"]) == len(samples["warmup"])
        # one step axis across the phases: timed steps follow warmup, traced steps follow timed
        assert phases["timed"][0][0] == len(samples["warmup"]) + 1
        if vid != "yardstick":  # the calibration workload is never traced
            assert len(phases["traced"]) == len(samples["traced"]) > 0
            assert phases["traced"][0][0] == phases["timed"][-1][0] + 1
            events = list((run.run_dir / "traces" / vid).glob("events.out.tfevents.*"))
            assert len(events) == 1 and (events[0].parent / "plugins" / "profile").is_dir()
        loss = _values(multiplexer, name, "loss")
        assert [v for _, v in loss] == pytest.approx([rec["loss"]["initial"], rec["loss"]["final"]])


@pytest.mark.slow
def test_rewriting_replaces_the_events_and_keeps_tensorflow_out(run: BenchRun) -> None:
    assert run.run_dir is not None
    code = ("import sys; from pathlib import Path; "
            "from bench.report.tensorboard_events import write_run_events; "
            f"write_run_events(Path({str(run.run_dir)!r})); write_run_events(Path({str(run.run_dir)!r})); "
            "print('tensorflow' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr
    for rec in run.records:
        folder = run.run_dir / "traces" / rec["variant_id"]
        assert len(list(folder.glob("events.out.tfevents.*"))) == 1
        multiplexer = _multiplexer(folder)
        timed = sum(len(w) for w in rec["samples"]["timed"])
        assert len(_values(multiplexer, ".", "step_time_ms/timed")) == timed


@pytest.mark.slow
def test_bench_tensorboard_serves_the_hparams_table_on_loopback(run: BenchRun) -> None:
    if not chromium_available() and not IN_CI:
        pytest.skip("no headless Chromium here")
    require_chromium()
    assert run.run_dir is not None
    proc = subprocess.Popen([sys.executable, "-m", "bench", "tensorboard", str(run.run_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            start_new_session=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not any("Serving TensorBoard" in x for x in lines):
            line = proc.stdout.readline() if proc.stdout else ""
            if not line and proc.poll() is not None:
                break
            lines.append(line)
        serving = next((x for x in lines if "Serving TensorBoard" in x), None)
        assert serving, "".join(lines) + (proc.stderr.read() if proc.poll() is not None else "")
        found = re.search(r"pid (\d+)\) at (http://127\.0\.0\.1:(\d+)/)", serving)
        assert found, serving
        tb_pid, url, port = int(found.group(1)), found.group(2), found.group(3)
        assert listeners(tb_pid) == [("127.0.0.1", int(port))]
        ids = tuple(r["variant_id"] for r in run.records)
        page = open_url(url + "#hparams", wait_s=90, wait_for_text=(*ids, "examples/s"),
                        local_origins=(url.rstrip("/"),), width=1700, height=760,
                        screenshot=ARTIFACTS / "tensorboard-hparams.png")
        assert page.js_errors == []
        assert page.external_requests == []
        missing = [vid for vid in ids if vid not in page.text]
        assert not missing, page.text[:2000]
        assert "Trial ID" in page.text and "median step ms" in page.text
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "stopping" in out and "Traceback" not in err
        with pytest.raises(ProcessLookupError):  # TensorBoard's whole process group is gone
            os.killpg(tb_pid, 0)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_bench_tensorboard_on_a_folder_that_is_no_run(tmp_path: Path) -> None:
    proc = bench("tensorboard", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {tmp_path}: not a bench run directory (no variants.json)"
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_events_of_failed_variants_and_mixed_axis_types(tmp_path: Path) -> None:
    """Fast, from records in bench's schema: a failed variant is in the table with its status and
    no metrics; an axis that is a number in one variant and text in another is text in all."""
    from tensorboard.plugins.hparams import metadata

    from bench.report.tensorboard_events import write_run_events
    from tests.fixtures.report_runs import standard_records, write_run

    records = standard_records()
    records[0]["variant"]["data"] = {"prefetch": 0}  # the others default to "autotune"
    run_dir = write_run(tmp_path, "mixed-20261122T051803Z", records)
    written = write_run_events(run_dir)
    assert [p.name for p in written] == [r["variant_id"] for r in records]
    multiplexer = _multiplexer(run_dir / "traces")
    content = multiplexer.PluginRunToTagToContent(metadata.PLUGIN_NAME)
    failed = "mirrored-r2-nccl-fit-float32-gb128"
    start = metadata.parse_session_start_info_plugin_data(content[failed][metadata.SESSION_START_INFO_TAG])
    assert start.hparams["status"].string_value == "failed"
    assert not [t for t in multiplexer.Runs()[failed]["tensors"] if t.startswith("metrics/")]
    prefetch = {metadata.parse_session_start_info_plugin_data(
        content[r["variant_id"]][metadata.SESSION_START_INFO_TAG]).hparams["prefetch"].string_value
        for r in records}
    assert prefetch == {"0", "autotune"}


@pytest.mark.slow
def test_several_runs_are_served_as_run_name_slash_variant(run: BenchRun, tmp_path: Path) -> None:
    import json
    import shutil
    import urllib.request

    from bench.report.tensorboard_server import TensorBoardServer

    assert run.run_dir is not None
    other = tmp_path / "elsewhere" / run.run_dir.name  # the same name: told apart by a suffix
    shutil.copytree(run.run_dir, other)
    with TensorBoardServer([run.run_dir, other]) as server:
        pid = server.pid
        assert listeners(pid) == [("127.0.0.1", server.port)]
        wanted = {f"{name}/{r['variant_id']}" for r in run.records
                  for name in (run.run_dir.name, f"{run.run_dir.name}-2")}
        deadline, runs = time.monotonic() + 60, set()
        while time.monotonic() < deadline and not wanted <= runs:
            with urllib.request.urlopen(server.url + "data/runs", timeout=30) as response:
                runs = set(json.loads(response.read()))
            time.sleep(1)
        assert wanted <= runs, sorted(runs)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


def _written_run(root: Path, name: str) -> Path:
    from tests.fixtures.report_runs import standard_records, write_run

    return write_run(root, name, standard_records())


def test_a_taken_port_is_refused_before_any_event_file_is_written(tmp_path: Path) -> None:
    """The port is checked before the events are (re)written and before TensorBoard starts."""
    run_dir = _written_run(tmp_path, "taken-20261122T051803Z")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = bench("tensorboard", str(run_dir), "--port", str(port))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: 127.0.0.1:{port}: cannot listen ([Errno 98] Address already in use)"]
    assert not (run_dir / "traces").exists()  # no event file written for a server that cannot run


@pytest.mark.slow
def test_sigkill_of_bench_tensorboard_leaves_nothing_listening_or_behind(tmp_path: Path) -> None:
    """SIGKILL cannot be caught: TensorBoard dies with bench (PR_SET_PDEATHSIG), and the next
    `bench tensorboard` removes the temporary folder the killed one left."""
    from bench.report.tensorboard_server import FOLDER_PREFIX, remove_stale_folders

    runs = [_written_run(tmp_path / side, "kill-20261122T051803Z") for side in ("a", "b")]
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "bench", "tensorboard", *map(str, runs)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env=env, start_new_session=True)
    try:
        serving = ""
        while "Serving TensorBoard" not in serving:
            serving = proc.stdout.readline() if proc.stdout else ""
            assert serving or proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        found = re.search(r"pid (\d+)\) at http://127\.0\.0\.1:(\d+)/", serving)
        assert found, serving
        tb_pid, port = int(found.group(1)), int(found.group(2))
        assert listeners(tb_pid) == [("127.0.0.1", port)]
        (left,) = scratch.glob(f"{FOLDER_PREFIX}{proc.pid}-*")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Path(f"/proc/{tb_pid}").exists():
            time.sleep(0.1)
        assert not Path(f"/proc/{tb_pid}").exists(), "TensorBoard outlived bench"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))  # nothing listens there any more
        assert left.is_dir()  # SIGKILL: nothing of bench ran to remove it ...
        assert remove_stale_folders(scratch) == [left]  # ... the next start does
        assert not left.exists()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
