"""Developer sessions: `nox` runs lint and tests; `nox -s benchmarks` runs the throughput benchmarks;
`nox -s nightly` is the nightly regression job."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """The full suite, including the slow TensorFlow-subprocess tests (what CI runs)."""
    session.install("-e", ".[cpu,test]")
    session.run("pytest", "-m", "not benchmark", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.5")
    session.run("ruff", "check", "bench", "tests", "noxfile.py")


@nox.session
def benchmarks(session: nox.Session) -> None:
    """Harness-honesty and throughput benchmarks (minutes; figures land in .benchmarks/)."""
    session.install("-e", ".[cpu,test]")
    session.run("pytest", "-m", "benchmark", "tests/benchmarks", "--benchmark-autosave",
                *session.posargs)


@nox.session
def nightly(session: nox.Session) -> None:
    """Run the nightly scenarios (bench.nightly.NIGHTLY_SCENARIOS) into results/nightly, gate
    each new run against the runs already there, render reports/nightly.

    Exits non-zero on a regression. Extra arguments go to `bench nightly` (e.g. `-- --quick`).
    """
    session.install("-e", ".[cpu]")
    session.run("bench", "nightly", *session.posargs)
