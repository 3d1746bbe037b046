"""The bookkeeping of bench.training.checkpointing without TensorFlow: the block pattern, where
saves fall, which saves are kept, what a save is charged, and the record's summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.training import checkpointing as ck


def test_blocks_alternate_abba_and_end_with_a_saving_block() -> None:
    assert ck.abba(1) == ck.abba(2) == (True, False, False, True)
    assert ck.abba(3) == (True, False, False, True) * 2


def test_saves_fall_between_the_loops_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    plan = ck.plan_for(10, 2, 8, 2, 4, tmp_path)
    assert (plan.every, plan.block_steps, plan.saves_per_block) == (12, 12, 1)
    assert "rounded up to 12" in plan.notes[0]
    assert plan.chief and plan.write_dir == tmp_path
    plan = ck.plan_for(10, 2, 45, 2, 1, tmp_path)
    assert (plan.every, plan.block_steps, plan.saves_per_block, plan.notes) == (10, 50, 5, ())


@pytest.mark.parametrize(("task", "chief", "write_dir"), [
    ({"type": "worker", "index": 0}, True, ""),
    ({"type": "worker", "index": 1}, False, "workertemp_1"),
])
def test_only_the_chief_writes_the_real_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   task: dict, chief: bool, write_dir: str) -> None:
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a", "b"]}, "task": task}))
    plan = ck.plan_for(4, 1, 8, 2, 1, tmp_path)
    assert plan.chief is chief and plan.write_dir == tmp_path / write_dir


def test_kept_saves_sort_by_step_and_pruning_keeps_the_newest(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    for name in ("ckpt-9.index", "ckpt-9.data-00000-of-00001", "ckpt-10.index", "checkpoint",
                 "ckpt-002-000010.weights.h5", "ckpt-010-000005.weights.h5"):
        (tmp_path / name).write_bytes(b"x" * 3)
    assert ck.kept_saves(tmp_path) == ["ckpt-002-000010", "ckpt-9", "ckpt-10",
                                       "ckpt-010-000005"]
    plan = ck.plan_for(4, 2, 8, 2, 1, tmp_path)
    ck._prune(plan)
    assert ck.kept_saves(tmp_path) == ["ckpt-10", "ckpt-010-000005"]
    assert (tmp_path / "checkpoint").exists()  # CheckpointManager's state file is not a save


def test_a_save_is_charged_its_time_and_the_bytes_it_wrote(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    plan = ck.plan_for(4, 1, 8, 2, 1, tmp_path)
    log = ck.SaveLog(plan)
    (tmp_path / "ckpt-1.index").write_bytes(b"old")
    log.timed(4, lambda: (tmp_path / "ckpt-2.data-00000-of-00001").write_bytes(b"y" * 100))
    assert log.saves[0]["step"] == 4 and log.saves[0]["bytes"] == 100 and log.saves[0]["ms"] >= 0
    seconds = [2.0, 1.0, 1.0, 2.0]
    restore = {"ms": 5.0, "weights_match": True}
    summary = ck.summary(plan, log, seconds, restore, global_batch=16, api="CheckpointManager")
    assert summary["throughput_ratio"] == pytest.approx(0.5)  # saving halved examples/s
    assert summary["throughput_on"] == pytest.approx(8 * 16 / 2.0)
    assert summary["expected_saves"] == 4 and summary["save_count"] == 1
    assert summary["size_bytes"] == 100
    assert summary["blocked_share"] == pytest.approx(log.saves[0]["ms"] / 1e3 / 4.0)
