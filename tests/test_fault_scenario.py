"""The [fault] section: what a scenario may ask for, and the one-line errors for what it may not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.errors import ScenarioError
from bench.scenario.loading import parse_scenario
from bench.scenario.matrix import expand
from tests.conftest import bench

BASE = {
    "scenario": {"name": "f"}, "batch": {"rule": "weak", "per_replica": 16},
    "measure": {"warmup_steps": 2, "steps": 8, "repeats": 2},
    "fault": {"kill": {"task": "worker:1", "at_step": 10}, "backup_every": 4},
    "strategies": [{"name": "multi_worker_mirrored", "workers": 2}],
}


def _doc(**sections: object) -> dict:
    return {**BASE, **sections}


def test_a_fault_reaches_every_variant_and_a_fraction_scales_with_the_steps() -> None:
    doc = _doc(fault={"kill": {"task": "worker:1", "at_step": 0.5}, "signal": "SIGTERM"})
    variants = expand(parse_scenario(doc, "f.toml"), "f.toml")
    assert {v.fault.signal for v in variants} == {"SIGTERM"}
    assert variants[0].total_steps == 18
    assert variants[0].fault.kill.step_of(18) == 9
    assert variants[0].fault.backup_every == 10  # the default


CASES = {
    "single_process": (_doc(strategies=[{"name": "mirrored"}]), "strategies[0].name",
                       "'mirrored' runs in one process"),
    "missing_task": (_doc(fault={"kill": {"task": "worker:2", "at_step": 3}}),
                     "fault.kill.task", "has workers 0..1"),
    "chief": (_doc(fault={"kill": {"task": "worker:0", "at_step": 3}}), "fault.kill.task",
              "chief"),
    "ps_task": (_doc(fault={"kill": {"task": "ps:0", "at_step": 3}},
                     strategies=[{"name": "parameter_server", "workers": 2}]),
                "fault.kill.task", "only a worker can be lost"),
    "bad_name": (_doc(fault={"kill": {"task": "worker-1", "at_step": 3}}), "fault.kill.task",
                 "should match pattern"),
    "beyond_steps": (_doc(fault={"kill": {"task": "worker:1", "at_step": 18}}),
                     "fault.kill.at_step", "step 18 is not before the end of the variants' 18"),
    "fraction_one": (_doc(fault={"kill": {"task": "worker:1", "at_step": 1.0}}),
                     "fault.kill.at_step", "less than 1"),
    "signal": (_doc(fault={"kill": {"task": "worker:1", "at_step": 3}, "signal": "SIGINT"}),
               "fault.signal", "SIGKILL"),
    "unknown_key": (_doc(fault={"kill": {"task": "worker:1", "at_step": 3}, "backup": 3}),
                    "fault.backup", "did you mean 'backup_every'"),
    "spe": (_doc(train={"steps_per_execution": 2}, measure={"warmup_steps": 2, "steps": 8}),
            "train.steps_per_execution", "steps_per_execution = 1"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fault_errors_name_the_field(case: str) -> None:
    doc, field, message = CASES[case]
    with pytest.raises(ScenarioError) as info:
        expand(parse_scenario(doc, "f.toml"), "f.toml")
    text = str(info.value)
    assert text.startswith(f"f.toml: {field}"), text
    assert message in text, text


def test_at_step_is_checked_against_the_steps_after_quick(tmp_path: Path) -> None:
    """--quick shortens a run to 43 steps: a step count beyond them is a one-line error (exit 2);
    a fraction stays inside."""
    path = tmp_path / "f.toml"
    path.write_text(re.sub(r"(?m)^", "", """
[scenario]
name = "f"
[batch]
rule = "weak"
per_replica = 16
[fault]
kill = { task = "worker:1", at_step = 100 }
[[strategies]]
name = "multi_worker_mirrored"
workers = 2
"""))
    proc = bench("run", str(path), "--quick", "--results-dir", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: fault.kill.at_step: step 100")
