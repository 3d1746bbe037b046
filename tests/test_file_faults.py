"""Every fault of a file ends in one line, and a damaged run degrades instead of vanishing: the
corpus of tests/fixtures/file_faults.py, each case a real `python -m bench` subprocess on files
the case damaged itself (`python -m tests.fixtures.file_faults` prints the whole table)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import IN_CI
from tests.fixtures import file_faults
from tests.fixtures.file_faults import (
    CASES,
    Case,
    device,
    is_full,
    privileged,
    run_case,
    unprivileged_problem,
)


def unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"cannot check this here: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("faults")
    yield path
    file_faults.restore(path)  # the modes the cases took away


def _tiered(cases: list[Case]) -> list[object]:
    """The first case of each class of fault in the fast tier, the others in the slow one (a
    second each, as subprocesses go)."""
    seen: set[str] = set()
    out = []
    for case in cases:
        marks = [pytest.mark.slow] if case.fault in seen else []
        seen.add(case.fault)
        out.append(pytest.param(case, id=case.name, marks=marks))
    return out


@pytest.mark.parametrize("case", _tiered(CASES))
def test_fault(case: Case, root: Path) -> None:
    if case.unprivileged and (problem := unprivileged_problem()):
        unavailable(problem)
    folder = root / re.sub(r"[^A-Za-z0-9]+", "-", case.name)
    outcome = run_case(case, folder)
    full = [p for p in outcome.setup.args if Path(p).name == "full"]
    if full and not is_full(Path(full[0])):
        unavailable(f"{full[0]} is not a full device here")
    assert outcome.problems(folder) == [], (outcome.code, outcome.stderr[-3000:])


def test_a_device_of_its_own_is_full(tmp_path: Path) -> None:
    """The full device the cases write to is one: writing to it fails for want of space."""
    node = device(tmp_path)
    if not is_full(node):
        unavailable(f"{node} is not a full device")
    assert not privileged() or node.parent == tmp_path  # root makes one of its own


def test_the_corpus_covers_every_class_of_fault() -> None:
    faults = {case.fault for case in CASES}
    assert {"an output under a regular file", "an output on a full device",
            "an output in a read-only folder", "a folder where a file goes",
            "a file name too long", "records.jsonl: last line cut short",
            "records.jsonl: a line that holds no record", "records.jsonl that cannot be read",
            "variants.json or environment.json damaged", "one damaged run among several"} <= faults
    commands = {case.name.split(" ")[0].rstrip(":") for case in CASES}
    assert {"run", "nightly", "report", "compare", "export", "tensorboard", "prune",
            "trace"} <= commands


def test_the_table_counts_what_the_cases_ended_in() -> None:
    """The table of `python -m tests.fixtures.file_faults` (the issue's), on two outcomes made up
    of what a refusal and a traceback look like."""
    refusal, crash = CASES[0], CASES[1]
    setup = file_faults.Setup([], "x")
    good = file_faults.Outcome(refusal, setup, 2, "", "error: x: cannot write\n")
    bad = file_faults.Outcome(crash, setup, 1, "", "Traceback (most recent call last):\n")
    table = file_faults.table([(good, []), (bad, ["a traceback"])])
    assert "| an output under a regular file | 2 | 1 | 0 | 1 | 1 | 0 | 1 |" in table
    assert os.linesep not in table.replace("\n", "") and table.count("\n") == 3
