"""Shared helpers: write scenarios, run the real `bench` CLI in a subprocess, read what it wrote."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.data.arrays import DEBIAN_FASHION_MNIST_DIR
from tests import early
from tests.background import BackgroundBench
from tests.browser import IN_CI
from tests.early import EarlyContext, EarlyRuns
from tests.slurm_cluster import LocalSlurm, SlurmUnavailable

# The scenario tables of the tests that train on real Fashion-MNIST (Debian's package): its
# data, 64 a replica, the custom loop.
FASHION_MNIST_CTL = f"""[data]
name = "fashion_mnist"
path = "{DEBIAN_FASHION_MNIST_DIR}"
shuffle_buffer = 10000

[batch]
per_replica = 64

[train]
api = "ctl"
"""

REPO = Path(__file__).resolve().parent.parent

# A tiny, fast workload every end-to-end test builds on; tests append their own sections.
TINY_SCENARIO = """
[scenario]
name = "{name}"

[model]
name = "{model}"

[data]
name = "synthetic"
num_examples = 512
shuffle_buffer = 64

[batch]
rule = "weak"
per_replica = 16

[measure]
warmup_steps = 2
steps = 8
repeats = 2
timeout_s = 120
# no traced turn and no short epoch at the finish (a quarter of a tiny run's time): the tests of
# traces and epoch ends ask for them
trace_steps = 0
epochs = 0
"""


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` deep-merged into `base` (a table merges, anything else replaces)."""
    out = dict(base)
    for key, value in override.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and key in out else value
    return out


def _toml_key(key: str) -> str:
    """A bare key where TOML allows one, else a quoted one (a layout rule's regex)."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}"
                                for k, v in value.items()) + " }"
    return repr(value)


def to_toml(doc: dict[str, Any]) -> str:
    """Enough TOML for scenarios: tables of scalars/lists, and arrays of tables."""
    lines: list[str] = []
    for key, value in doc.items():
        tables = value if isinstance(value, list) and value and isinstance(value[0], dict) else None
        if isinstance(value, dict):
            lines.append(f"[{key}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in value.items()]
        elif tables is not None:
            for table in tables:
                lines.append(f"[[{key}]]")
                lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
        else:
            lines.insert(0, f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def write_scenario(directory: Path, body: str, name: str = "t", model: str = "mlp",
                   tiny: bool = True, replace: tuple[str, ...] = ()) -> Path:
    """Write TINY_SCENARIO deep-merged with `body` (TOML); body wins where both set a key.

    Sections named in `replace` are taken whole from `body` instead of merged.
    """
    base = tomllib.loads(TINY_SCENARIO.format(name=name, model=model)) if tiny else {}
    override = tomllib.loads(textwrap.dedent(body))
    base = {k: v for k, v in base.items() if k not in replace}
    doc = merge(base, override)
    path = directory / f"{name}.toml"
    path.write_text(to_toml(doc))
    return path


@pytest.fixture(scope="session", autouse=True)
def _private_peak_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Workers cache the machine's matmul peak; tests measure it once into their own folder.
    [environment] virtualenvs are built beside it (BENCH_CACHE_DIR/envs), once per session,
    unless BENCH_ENV_CACHE names a cache to reuse across sessions (1.9 GB per environment)."""
    os.environ["BENCH_CACHE_DIR"] = str(tmp_path_factory.mktemp("bench-cache"))


TF220_BODY = '[[strategies]]\nname = "default"\n\n[environment]\ntensorflow = "2.20.*"\n'


@pytest.fixture(scope="session", autouse=True)
def tf220_build(request: pytest.FixtureRequest, _private_peak_cache: None,
                tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[Path, BackgroundBench] | None]:
    """`bench env build` of TensorFlow 2.20 into the session's cache, started before the first
    test when a selected test needs it (the `tf220` fixture of tests/test_environments.py, which
    waits for it), so that its minute and more of pip runs beside the tests before. The scenario
    built and the build; None when no selected test needs it."""
    if not any("tf220" in item.fixturenames for item in request.session.items):
        yield None
        return
    folder = tmp_path_factory.mktemp("tf220")
    scenario = write_scenario(folder, TF220_BODY)
    build = BackgroundBench(["env", "build", str(scenario)], folder, cwd=REPO)
    try:
        yield scenario, build
    finally:
        build.stop()


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSlurm]:
    """A real single-node Slurm (tests/slurm_cluster.py) in a private network namespace, shared by the
    session. Run commands inside it: subprocess.run(slurm.command(argv), env=slurm.env). Skips where
    Slurm cannot run here, except with CI=true, where that fails instead."""
    def unavailable(reason: str) -> None:
        if IN_CI:
            pytest.fail(f"CI=true but the Slurm test cluster cannot run: {reason}", pytrace=False)
        pytest.skip(f"Slurm test cluster unavailable: {reason}")

    problem = LocalSlurm.problem()
    if problem is not None:
        unavailable(problem)
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except SlurmUnavailable as exc:
        unavailable(str(exc))
    try:
        yield cluster
    finally:
        cluster.stop()


def require_netns() -> None:
    """Cluster variants run in private network namespaces: skip where there are none, except with
    CI=true, where that fails instead."""
    from bench.launch import netns

    problem = netns.isolation_problem()
    if problem is None:
        return
    if IN_CI:
        pytest.fail(f"CI=true but no private network namespaces: {problem}", pytrace=False)
    pytest.skip(f"no private network namespaces here: {problem}")


@dataclass
class BenchRun:
    proc: subprocess.CompletedProcess[str]
    run_dir: Path | None
    records: list[dict[str, Any]]

    def by_id(self) -> dict[str, dict[str, Any]]:
        return {r["variant_id"]: r for r in self.records}


def bench(*args: str, timeout: float = 600, cwd: Path = REPO,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real `bench` CLI in a subprocess; `env` is laid over this process's environment."""
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL)


def run_dirs(results: Path) -> list[Path]:
    return sorted(p for p in results.iterdir() if p.is_dir()) if results.exists() else []


def bench_run(scenario: Path, results: Path, *args: str, timeout: float = 900,
              cwd: Path = REPO, env: dict[str, str] | None = None) -> BenchRun:
    """`bench run` into `results`; its HTML report goes to the sibling `reports/` folder (so every
    end-to-end test also renders its records, whatever state they are in)."""
    before = set(run_dirs(results))
    proc = bench("run", str(scenario), "--results-dir", str(results),
                 "--reports-dir", str(results.parent / "reports"), *args, timeout=timeout,
                 cwd=cwd, env=env)
    new = [p for p in run_dirs(results) if p not in before]
    run_dir = new[0] if new else None
    records = []
    if run_dir and (run_dir / "records.jsonl").exists():
        records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    return BenchRun(proc, run_dir, records)


def start_fault_tolerance(context: EarlyContext) -> BenchRun:
    """`bench run scenarios/fault_tolerance.toml --quick --no-control`, once per session: the
    shipped-scenario test and the recovery tests (tests/test_run_recovery.py) read the same run,
    which keeps CI within its time (every variant kills a worker and restarts)."""
    tmp = context.tmp_path_factory.mktemp("fault_tolerance")
    return bench_run(REPO / "scenarios" / "fault_tolerance.toml", tmp / "results", "--quick",
                     "--no-control", timeout=900)


# How tests run the shipped scenarios/clusters.toml: short, without the run's controls, with
# traces (the cluster tests read every worker's profile).
CLUSTERS_ARGS = ("--no-control", "--steps", "8", "--warmup", "2", "--repeats", "2")


def start_clusters(context: EarlyContext) -> BenchRun:
    """`bench run scenarios/clusters.toml` with CLUSTERS_ARGS, once per session: the
    shipped-scenario test and the cluster tests (tests/test_run_cluster.py) read the same run, which
    keeps CI within its time (every cluster variant starts its tasks in a network namespace)."""
    tmp = context.tmp_path_factory.mktemp("clusters")
    return bench_run(REPO / "scenarios" / "clusters.toml", tmp / "results", *CLUSTERS_ARGS,
                     timeout=1200)


@pytest.fixture(scope="session", autouse=True)
def early_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
               tf220_build: tuple[Path, BackgroundBench] | None) -> Iterator[EarlyRuns]:
    """The shared runs of the fixtures the selected tests use (`early.declare`), started in the
    background in the order of their first use (tests/early.py)."""
    runs = EarlyRuns(EarlyContext(tmp_path_factory, tf220_build))
    for item in request.session.items:
        module = getattr(item, "module", None)
        for name in item.fixturenames:  # the test module's fixture of that name, else this file's
            runs.start(early.declared(getattr(module, name, None) or globals().get(name)))
    try:
        yield runs
    finally:
        runs.close()


fault_tolerance_run = early.early_fixture("fault_tolerance", start_fault_tolerance,
                                          scope="session")
clusters_run = early.early_fixture("clusters", start_clusters, scope="session")


def run_in_fresh_dir(factory: pytest.TempPathFactory, name: str, body: str,
                     model: str = "mlp", *args: str, env: dict[str, str] | None = None) -> BenchRun:
    """For module-scoped fixtures: one real `bench run` of TINY_SCENARIO + body, shared by tests."""
    tmp = factory.mktemp(name)
    return bench_run(write_scenario(tmp, body, name=name, model=model), tmp / "results", *args,
                     env=env)


def leftover_processes(marker: str) -> list[str]:
    """Live processes bench started for a run, found by `marker` (e.g. the run's directory) in
    their command line or their environment. Every process bench starts carries the run
    directory in one of them: workers, supervisors and the fork server in their command line,
    cluster tasks (the parameter-server `bench.launch.ps_server` tasks too, whose command line
    names no run) in BENCH_RUN_DIR. Zombies (already dead, not yet reaped) do not count."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (proc / "environ").read_bytes().decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # gone, or not ours to read
            continue
        if state != "Z" and (marker in cmdline or marker in environ) and "pytest" not in cmdline:
            found.append(f"{proc.name} {cmdline.strip()}")
    return found


def netns_problem() -> str | None:
    from bench.launch import netns

    return netns.isolation_problem()


NETNS_PROBLEM = netns_problem()
# Cluster tests run their clusters in private network namespaces: skipped where there are none,
# except in CI, where the `netns_required` fixture fails them instead.
NEEDS_NETNS = pytest.mark.skipif(NETNS_PROBLEM is not None and not IN_CI,
                                 reason=f"no private network namespaces here: {NETNS_PROBLEM}")


@pytest.fixture(scope="module")
def netns_required() -> None:
    """In CI missing network namespaces must fail the cluster tests, not quietly skip them."""
    require_netns()


def index_or_skip() -> None:
    """[environment] tests ask the package index for releases: skip where it cannot be asked,
    except with CI=true, where that fails instead."""
    from bench.launch.env_index import IndexUnreachable, index_versions

    try:
        index_versions("tensorflow-cpu")
    except IndexUnreachable as exc:
        if IN_CI:
            pytest.fail(f"CI=true but the package index cannot be asked: {exc}", pytrace=False)
        pytest.skip(f"the package index cannot be asked here: {exc}")
