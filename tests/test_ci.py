"""CI's entry point, `.ci/run`: the README's test command, run with `CI=true` set by the script
itself, so every test that cannot check its feature here fails instead of skipping whoever calls
it (tests/browser.py's IN_CI). Reads the files only, in milliseconds."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / ".ci" / "run"


def test_the_ci_script_exports_ci_before_it_runs_the_tests() -> None:
    lines = SCRIPT.read_text(encoding="utf-8").splitlines()
    exported = [i for i, line in enumerate(lines) if re.fullmatch(r"export CI=true", line.strip())]
    tests = [i for i, line in enumerate(lines) if "python -m pytest" in line]
    assert exported and tests and exported[0] < tests[0], "export CI=true before the tests"
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0  # it parses


def test_the_ci_script_runs_the_readmes_test_command_verbatim() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    command = next(line.strip() for line in readme.splitlines()
                   if line.startswith("pip install") and "python -m pytest" in line)
    assert command in SCRIPT.read_text(encoding="utf-8")
