"""measure.checkpoint through the real `bench run`: saves, sizes, the files kept, a restore into a
fresh model, and throughput with saving on vs off, for Mirrored fit, the default custom loop and
a MultiWorkerMirrored custom loop (chief writes, the other worker writes a temporary copy it
deletes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO, BenchRun, require_netns, run_in_fresh_dir
from tests.early import EarlyContext, EarlyRuns, declare

pytestmark = pytest.mark.slow

EVERY, KEEP = 4, 1
BODY = f"""
[measure]
trace_steps = 0
control = false
checkpoint = {{ every = {EVERY}, keep = {KEEP} }}

[[strategies]]
name = "default"
api = "ctl"

[[strategies]]
name = "mirrored"
replicas = 2
api = "fit"

[[strategies]]
name = "multi_worker_mirrored"
workers = 2
api = "ctl"
"""
# fit under Mirrored, the custom loop on one device and under MultiWorkerMirrored. A
# parameter-server cluster would double this run's time on a busy 2-core machine (its 4 processes
# took 47 s to import TensorFlow there), so its checkpointing is measured by
# scenarios/checkpoint_cost.toml, not in CI.
VARIANTS = ("default-r1-ctl-float32-gb16", "mirrored-r2-fit-float32-gb32",
            "multi_worker_mirrored-w2x1-ctl-float32-gb32")


def start_checkpoints(context: EarlyContext) -> BenchRun:
    return run_in_fresh_dir(context.tmp_path_factory, "checkpoints", BODY)


@pytest.fixture(scope="module")
def run(early_runs: EarlyRuns) -> BenchRun:
    require_netns()  # the MultiWorker variant runs in a private network namespace
    return early_runs.result("checkpoints", start_checkpoints)


declare(run, [("checkpoints", start_checkpoints)])


def test_the_run_is_ok_and_shows_the_checkpoint_table(run: BenchRun) -> None:
    out = run.proc.stdout + run.proc.stderr
    assert run.proc.returncode == 0, out[-3000:]
    assert {vid: r["status"] for vid, r in run.by_id().items()} == dict.fromkeys(VARIANTS, "ok")
    assert "Checkpoint cost" in run.proc.stdout
    assert run.run_dir is not None
    page = run.run_dir.parent.parent / "reports" / run.run_dir.name / f"run-{run.run_dir.name}.html"
    html = page.read_text()
    assert 'id="section-checkpoints"' in html
    assert all(vid in html[html.index('id="section-checkpoints"'):] for vid in VARIANTS)
    assert not list(REPO.glob("ckpt-*")) and not list(REPO.glob("*.weights.h5"))  # not in cwd


@pytest.mark.parametrize("vid", VARIANTS)
def test_saves_sizes_files_restore_and_ratio(run: BenchRun, vid: str) -> None:
    rec = run.by_id()[vid]
    cost = rec["checkpoint"]
    assert cost["status"] == "ok", cost
    assert cost["api"] == ("ModelCheckpoint" if "-fit-" in vid else "CheckpointManager")
    assert cost["pattern"] == ["on", "off", "off", "on"]
    on_blocks = cost["pattern"].count("on")
    assert cost["block_steps"] == 8
    assert cost["save_count"] == len(cost["saves"]) == on_blocks * 8 // EVERY
    assert all(s["ms"] > 0 and s["bytes"] > 0 for s in cost["saves"]), cost["saves"]
    assert cost["size_bytes"] > 0
    # the files are under the variant's folder in the run directory, at most `keep` saves
    folder = run.run_dir / "checkpoints" / vid
    assert Path(cost["dir"]) == folder
    assert 1 <= len(cost["kept"]) <= KEEP
    files = sorted(p.name for p in folder.iterdir() if p.name.startswith("ckpt-"))
    assert files and {f.split(".", 1)[0] for f in files} == set(cost["kept"]), files
    assert not [p for p in folder.iterdir() if p.is_dir()]  # no worker's temporary copy left
    restore = cost["restore"]
    assert restore["ms"] > 0 and restore["save"] == cost["kept"][-1]
    assert restore["weights_match"] is True and restore["max_abs_diff"] == 0.0
    assert len(cost["on_s"]) == len(cost["off_s"]) == 2
    assert cost["throughput_ratio"] == pytest.approx(
        cost["throughput_on"] / cost["throughput_off"])
    assert 0 < cost["throughput_ratio"] < 5
    assert 0 < cost["blocked_share"] < 1
