"""Developer sessions: `nox` runs lint and tests; `nox -s benchmarks` runs the throughput benchmarks;
`nox -s nightly` is the nightly regression job; `nox -s perf` times bench itself; `nox -s docs`
builds the docs site and serves it on 127.0.0.1.

Every session installs the pinned set in constraints.txt except `tests_latest` (the newest
releases) and `lock` (which rewrites constraints.txt from them)."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

PINNED = ("-c", "constraints.txt")
# tf-keras (train.keras = "tf_keras") declares only `tensorflow`, which would pull the full GPU wheel
# next to tensorflow-cpu: it is installed on its own, without dependencies.
TF_KERAS = ("--no-deps", "tf-keras")
LOCK_HEADER = """\
# The known-good dependency set CI installs (pip install -c constraints.txt ...): a new release of a
# dependency cannot turn CI red without a change of ours. Updated on purpose with `nox -s lock`
# (newest releases that satisfy pyproject.toml); `nox -s tests_latest` runs the suite against them.
# Made on Python 3.11, x86_64 Linux, with the [cpu,test] extras.
"""


@nox.session
def tests(session: nox.Session) -> None:
    """The full suite, including the slow TensorFlow-subprocess tests (what CI runs)."""
    session.install(*PINNED, "-e", ".[cpu,test]")
    session.install(*PINNED, *TF_KERAS)
    session.run("pytest", "-m", "not benchmark", *session.posargs)


def _install_latest_tf_keras(session: nox.Session) -> None:
    """The tf-keras release of the installed TensorFlow's minor version (tf-keras tracks it)."""
    version = session.run("python", "-c", "import importlib.metadata as m; "
                          "print('.'.join(m.version('tensorflow-cpu').split('.')[:2]))",
                          silent=True).strip()
    session.install("--no-deps", f"tf-keras~={version}.0")


@nox.session
def tests_latest(session: nox.Session) -> None:
    """The full suite against the newest releases that pyproject.toml allows (no constraints):
    what `nox -s lock` would pin next."""
    session.install("--upgrade", "-e", ".[cpu,test]")
    _install_latest_tf_keras(session)
    session.run("pytest", "-m", "not benchmark", *session.posargs)


@nox.session(reuse_venv=False)
def lock(session: nox.Session) -> None:
    """Rewrite constraints.txt from a fresh install of the newest releases. Run tests_latest first."""
    session.install("--upgrade", "-e", ".[cpu,test]")
    _install_latest_tf_keras(session)
    frozen = session.run("python", "-m", "pip", "freeze", "--exclude-editable", silent=True)
    pins = [line for line in frozen.splitlines() if line and not line.startswith(("bench", "#"))]
    with open("constraints.txt", "w", encoding="utf-8") as out:
        out.write(LOCK_HEADER + "\n".join(pins) + "\n")
    session.log(f"constraints.txt: {len(pins)} pins")


@nox.session
def lint(session: nox.Session) -> None:
    session.install(*PINNED, "ruff")
    session.run("ruff", "check", "bench", "tests", "noxfile.py")


@nox.session
def benchmarks(session: nox.Session) -> None:
    """Harness-honesty and throughput benchmarks (minutes; figures land in .benchmarks/)."""
    session.install(*PINNED, "-e", ".[cpu,test]")
    session.run("pytest", "-m", "benchmark", "tests/benchmarks", "--benchmark-autosave",
                *session.posargs)


@nox.session
def nightly(session: nox.Session) -> None:
    """Run the nightly scenarios (bench.nightly.NIGHTLY_SCENARIOS) into results/nightly, gate
    each new run against the runs already there, render reports/nightly. The store keeps every
    run's records and the traces of its newest 14 runs (about 5 MB a run), so it grows by about
    0.4 MB a night instead of 6.

    Exits non-zero on a regression. Extra arguments go to `bench nightly` (e.g. `-- --quick`).
    """
    session.install(*PINNED, "-e", ".[cpu,tensorboard]")
    session.run("bench", "nightly", "--keep-traces", "14", *session.posargs)


@nox.session
def perf(session: nox.Session) -> None:
    """bench timing itself: wall time per phase and per variant, duty cycle, command start-up
    and peak memory, medians over 3 runs of the default scenario per start method (a few
    minutes). Extra arguments go to `bench perf` (e.g. `-- --runs 5`)."""
    session.install(*PINNED, "-e", ".[cpu,tensorboard]")
    args = session.posargs or ["--start-method", "forkserver", "--start-method", "spawn"]
    session.run("bench", "perf", *args)


@nox.session
def docs(session: nox.Session) -> None:
    """Check the generated reference pages, build the site with warnings as errors, and serve it on
    127.0.0.1 (a free port) until Ctrl-C. `nox -s docs -- --no-serve` only builds. The site is
    build/docs; it is built and viewed offline (mkdocs.yml)."""
    session.install(*PINNED, "-e", ".[docs]")
    session.run("python", "-m", "bench.cli.docs", "check")
    # NO_MKDOCS_2_WARNING: Material's end-of-life banner (CONTRIBUTING.md says what replaces it)
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})
    if "--no-serve" not in session.posargs:
        session.run("python", "-m", "bench.cli.docs", "serve", "build/docs")
