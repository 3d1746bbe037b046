"""Developer sessions: `nox` runs lint and tests; `nox -s benchmarks` runs the throughput benchmarks;
`nox -s nightly` is the nightly regression job; `nox -s perf` times bench itself."""

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


@nox.session
def perf(session: nox.Session) -> None:
    """bench timing itself: wall time per phase and per variant, duty cycle, command start-up
    and peak memory, medians over 3 runs of the default scenario per start method (a few
    minutes). Extra arguments go to `bench perf` (e.g. `-- --runs 5`)."""
    session.install("-e", ".[cpu]")
    args = session.posargs or ["--start-method", "forkserver", "--start-method", "spawn"]
    session.run("bench", "perf", *args)
