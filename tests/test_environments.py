"""The [environment] axis: one cached virtualenv per resolved TensorFlow, every process of a
variant started with its interpreter, and comparisons that say what changed.

One real second environment, the previous TensorFlow CPU build (2.20), is built once per session
(`tf220`, into the session's cache, which tests/test_shipped_scenarios.py's tf_upgrade run shares)
and run beside this interpreter's own TensorFlow ("current") in one small interleaved run.
"""

from __future__ import annotations

import html
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import entrypoints
from bench.child_env import ChildEnv
from bench.errors import ScenarioError
from bench.fingerprint import installed_distributions, packages_digest
from bench.launch import environments
from bench.launch.cluster import supervisor_command
from bench.launch.env_index import resolve
from bench.launch.local import worker_command
from bench.launch.slurm import SlurmOptions, batch_script, cluster_worker_args
from bench.scenario.environment import candidate_point, installed_tensorflow, specifier
from bench.scenario.loading import load_variants, parse_scenario
from bench.scenario.matrix import expand, with_candidate
from tests.background import BackgroundBench
from tests.conftest import (
    REPO,
    BenchRun,
    bench,
    bench_run,
    index_or_skip,
    leftover_processes,
    write_scenario,
)

BASE = {"scenario": {"name": "e"}, "batch": {"per_replica": 16}, "train": {"api": "fit"},
        "strategies": [{"name": "default"}, {"name": "multi_worker_mirrored", "workers": 2,
                                             "api": "ctl"}]}


STRATEGY = '[[strategies]]\nname = "default"\n\n'


def env_variants(table: dict[str, Any]) -> list[Any]:
    return expand(parse_scenario({**BASE, "environment": table}))


# --------------------------------------------------------------------------------------------
# Fast: the table, ids, commands


def test_each_point_is_an_axis_named_in_the_ids() -> None:
    variants = env_variants({"tensorflow": ["2.20.*", "2.21", "current"], "keras": "3.15.*"})
    here = installed_tensorflow()
    assert [v.id for v in variants[:3]] == [
        "default-r1-fit-float32-gb16-tf2.20-keras3.15", "default-r1-fit-float32-gb16-tf2.21-keras3.15",
        f"default-r1-fit-float32-gb16-tf{here}"]
    assert [v.environment.tensorflow for v in variants[:3]] == ["==2.20.*", "==2.21.*", "current"]
    assert variants[2].environment.keras is None  # 'current' is this interpreter as it is
    assert specifier("2.20.1") == "==2.20.1" and specifier(">=2.20,<2.22") == ">=2.20,<2.22"
    # without the table: today's ids, today's digest, no environment
    _, plain = load_variants(REPO / "scenarios" / "mnist_mirrored.toml")
    assert plain[0].id == "default-r1-fit-float32-gb64" and plain[0].environment is None
    assert parse_scenario(BASE).digest() != parse_scenario(
        {**BASE, "environment": {"tensorflow": "2.20"}}).digest()


@pytest.mark.parametrize("table, line", [
    ('tensorflow = "2.x"', "environment.tensorflow: '2.x' is not a pip version specifier"),
    ('tensorflow = "auto"', "environment.tensorflow: 'auto': give a version specifier"),
    ('tensorflw = "2.20"', "environment.tensorflw: unknown key; did you mean 'tensorflow'?"),
    ('tensorflow = "2.20"\ntf_keras = "current"', "environment.tf_keras: 'current' applies to"),
    ('tensorflow = "2.20"\npackages = ["numpy>>1"]', "environment.packages: 'numpy>>1' is not a "
                                                     "pip requirement"),
    ('tensorflow = ["2.20", "2.20"]', "environment.tensorflow: a version is listed twice"),
    ('tensorflow = "2.20"\njax = "auto"', "environment.jax: 'auto': give a version specifier"),
])
def test_a_bad_table_is_one_line_naming_the_field(tmp_path: Path, table: str, line: str) -> None:
    path = write_scenario(tmp_path, f"{STRATEGY}[environment]\n{table}\n")
    proc = bench("validate", str(path))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {path}: {line}"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_every_process_of_a_variant_runs_its_environments_interpreter(tmp_path: Path) -> None:
    python = "/envs/tensorflow-cpu-2.20.0-abc/bin/python"
    single, cluster = (v.model_copy(update={"environment": v.environment.model_copy(
        update={"python": python})}) for v in env_variants({"tensorflow": "2.20.*"}))
    assert worker_command(tmp_path, single, tmp_path / "r.json")[:2] == [python, "-m"]
    supervisor = supervisor_command(cluster, tmp_path)
    assert supervisor[supervisor.index(python) + 1:][:2] == ["-m", entrypoints.CLUSTER_SUPERVISOR]
    assert cluster_worker_args(tmp_path, cluster)[:2] == [python, "-m"]
    script = batch_script(single, worker_command(tmp_path, single, tmp_path / "r.json"), "out",
                          SlurmOptions())
    assert f"srun --ntasks=1 --kill-on-bad-exit=1 --wait=60 {python} -m bench.worker" in script
    # without the table: this interpreter, as always
    plain = expand(parse_scenario(BASE))[0]
    assert worker_command(tmp_path, plain, tmp_path / "r.json")[0] == sys.executable
    assert entrypoints.command(entrypoints.WORKER)[0] == sys.executable


def test_an_upgrade_candidate_runs_beside_each_pinned_variant() -> None:
    pinned = expand(parse_scenario(BASE))
    point = candidate_point(["tensorflow=2.22.*", "packages=einops"])
    both = with_candidate(pinned, point)
    assert [v.id for v in both[:2]] == ["default-r1-fit-float32-gb16",
                                        "default-r1-fit-float32-gb16-tf2.22"]
    assert both[0].environment is None and both[1].environment.candidate
    assert both[1].environment.packages == ["einops"] and [v.index for v in both] == [0, 1, 2, 3]
    for bad, why in ((["tensorflow"], "write FIELD=VALUE"), (["tf=2.2"], "tf: unknown field"),
                     (["tensorflow=2.20", "tensorflow=2.21"], "given twice")):
        with pytest.raises(ValueError, match=why):
            candidate_point(bad)


def test_the_digest_is_the_installed_set_whatever_the_names_order() -> None:
    here = installed_distributions()
    frozen = {name.upper().replace("-", "_"): version for name, version in reversed(here.items())}
    assert packages_digest(frozen) == packages_digest(here)
    assert packages_digest({**here, "numpy": "0.0.1"}) != packages_digest(here)
    assert packages_digest({**here, "bench": "9"}) == packages_digest(here)  # the checkout's


def test_the_cache_folder_moves_with_the_variables(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(ChildEnv.name("env_cache"), raising=False)
    assert environments.cache_root() == tmp_path / "cache" / "envs"
    monkeypatch.setenv(ChildEnv.name("env_cache"), str(tmp_path / "mine"))
    assert environments.cache_root() == tmp_path / "mine"
    assert environments.cache_root(tmp_path / "option") == tmp_path / "option"


def fake_complete(root: Path, name: str, checkout: Path = REPO) -> Path:
    """A cache entry as a finished build leaves it: an interpreter and the manifest."""
    env_dir = root / name
    (env_dir / "bin").mkdir(parents=True)
    (env_dir / "bin" / "python").write_text("")
    (env_dir / environments.MANIFEST).write_text(json.dumps(
        {"key": name[-4:], "checkout": str(checkout), "packages": {"tensorflow-cpu": "2.20.0"},
         "size_mb": 1, "built_at": "2026-01-01T00:00:00+00:00", "request": {"packages": []},
         "resolved": {"tensorflow-cpu": "2.20.0"}}))
    return env_dir


def test_prune_removes_what_it_is_asked_and_keeps_what_a_run_holds(tmp_path: Path) -> None:
    root = tmp_path / "envs"
    kept = fake_complete(root, "tensorflow-cpu-2.20.0-aaaa")
    gone_checkout = fake_complete(root, "tensorflow-cpu-2.19.0-bbbb", tmp_path / "deleted-clone")
    (root / "tensorflow-cpu-2.21.0-cccc").mkdir()  # an interrupted build
    removed, busy = environments.prune(root)
    assert sorted(name for name, _, _ in removed) == ["tensorflow-cpu-2.19.0-bbbb",
                                                      "tensorflow-cpu-2.21.0-cccc"]
    assert kept.exists() and not gone_checkout.exists() and busy == []
    lock = environments.hold(root, kept.name)  # a run uses it
    assert environments.prune(root, ("aaaa",)) == ([], [kept.name]) and kept.exists()
    lock.close()
    removed, _ = environments.prune(root, ("aaaa",))
    assert [why for _, _, why in removed] == ["named"] and not kept.exists()
    proc = bench("env", "list", "--env-cache", str(root))
    assert proc.returncode == 0 and "0 environment(s)" in proc.stdout


# --------------------------------------------------------------------------------------------
# The package index (pip index versions): bad input before anything is written


def test_versions_the_index_cannot_give_are_refused_in_one_line(tmp_path: Path) -> None:
    index_or_skip()
    path = write_scenario(tmp_path, f'{STRATEGY}[environment]\ntensorflow = ["2.20.*", "2.99.*"]\n')
    proc = bench("run", str(path), "--results-dir", str(tmp_path / "results"),
                 "--env-cache", str(tmp_path / "envs"))
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        f"error: {path}: environment.tensorflow: no release of tensorflow-cpu matches '2.99.*' "
        "(available: 2.16.1, "), proc.stderr
    assert "2.20.0, 2.21.0" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "results").exists() and not (tmp_path / "envs").exists()
    for table, line in (
            ({"tensorflow": "2.15.*"}, "environment.tensorflow: '2.15.*' resolves to TensorFlow "
                                       "2.15.1, older than bench supports (2.16 to 2.21"),
            ({"tensorflow": "2.20.*", "tf_keras": "2.21.*"},
             "environment.tf_keras: tf-keras 2.21.0 goes with TensorFlow 2.21 only")):
        points = [v.environment for v in env_variants(table)][:1]
        with pytest.raises(ScenarioError) as refused:
            resolve(points, "x.toml", gpus=False)
        assert str(refused.value).startswith(f"x.toml: {line}")


def test_jax_is_an_axis_of_the_environment_as_tensorflow_is() -> None:
    """`jax` pins the JAX backend's release per environment (pip brings the jaxlib that jax
    requires): an axis named in the ids, resolved against the index, keying its own cache."""
    variants = env_variants({"tensorflow": "2.20.*", "jax": ["0.10.2", "0.10.1"]})[:2]
    assert [v.id for v in variants] == ["default-r1-fit-float32-gb16-tf2.20-jax0.10.2",
                                        "default-r1-fit-float32-gb16-tf2.20-jax0.10.1"]
    assert [v.environment.jax for v in variants] == ["==0.10.2", "==0.10.1"]
    index_or_skip()
    requests = resolve([v.environment for v in variants], "x.toml", gpus=False)
    newer, older = requests["tf2.20-jax0.10.2"], requests["tf2.20-jax0.10.1"]
    assert newer.requirements() == ["tensorflow-cpu==2.20.0", "jax==0.10.2"]
    assert older.resolved["jax"] == "0.10.1"
    assert environments.key(newer) != environments.key(older)
    without = resolve([env_variants({"tensorflow": "2.20.*"})[0].environment], "x.toml",
                      gpus=False)["tf2.20"]
    assert without.jax is None and without.requirements() == ["tensorflow-cpu==2.20.0"]


def test_a_pin_in_packages_is_what_the_environment_installs() -> None:
    """Which releases of TensorFlow's dependencies an environment gets is the index's to say on
    the day it is built, unless the scenario pins them: `packages = ["ml-dtypes==0.6.0"]` goes to
    the environment's pip install as written, beside the resolved TensorFlow, and keys an
    environment of its own (a cached unpinned one never serves it)."""
    index_or_skip()
    pinned, unpinned = (
        resolve([v.environment for v in env_variants({"tensorflow": "2.20.*", **extra})][:1],
                "x.toml", gpus=False)["tf2.20"]
        for extra in ({"packages": ["ml-dtypes==0.6.0"]}, {}))
    assert pinned.requirements() == ["tensorflow-cpu==2.20.0", "ml-dtypes==0.6.0"]
    assert unpinned.requirements() == ["tensorflow-cpu==2.20.0"]
    assert environments.key(pinned) != environments.key(unpinned)
    assert environments.env_name(pinned) != environments.env_name(unpinned)


# --------------------------------------------------------------------------------------------
# Slow: a real TensorFlow 2.20 environment beside this interpreter's


@pytest.fixture(scope="session")
def tf220(tf220_build: tuple[Path, BackgroundBench] | None) -> dict[str, Any]:
    """`bench env build` of TensorFlow 2.20 into the session's cache (once per session, started
    at the session's start: conftest's tf220_build)."""
    index_or_skip()
    assert tf220_build is not None
    path, build = tf220_build
    proc = build.result(timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = re.search(r"^environment tf2\.20: (?:reusing (\S+) |built in .*: (\S+)$)",
                      proc.stdout, re.MULTILINE)
    assert found, proc.stdout
    env_dir = Path(found[1] or found[2])
    assert env_dir.parent == environments.cache_root()
    return {"proc": proc, "dir": env_dir, "manifest": environments.read_manifest(env_dir),
            "scenario": path}


def install_traces(env: dict[str, Any]) -> tuple[str, str]:
    """What a second install would rewrite: pip's log and the manifest."""
    return ((env["dir"].parent / f"{env['dir'].name}.log").read_text(),
            (env["dir"] / environments.MANIFEST).read_text())


ENV_SCENARIO = """
[[strategies]]
name = "default"

[environment]
tensorflow = ["2.20.*", "current"]

[train]
api = "fit"

[measure]
warmup_steps = 2
steps = 4
repeats = 6
trace_steps = 2
"""


@pytest.fixture(scope="module")
def env_run(tf220: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[BenchRun, tuple[str, str]]]:
    """One interleaved run: the default fit variant in the 2.20 environment (with the run's A/A
    twin and the yardstick, which copy it) and in this interpreter; with the install traces of
    the 2.20 environment from before the run."""
    before = install_traces(tf220)
    tmp = tmp_path_factory.mktemp("env_run")
    yield bench_run(write_scenario(tmp, ENV_SCENARIO, name="envs"), tmp / "results"), before


HERE = installed_tensorflow()
IDS = ["default-r1-fit-float32-gb16-tf2.20", "default-r1-fit-float32-gb16-tf2.20-control",
       "yardstick", f"default-r1-fit-float32-gb16-tf{HERE}"]


@pytest.mark.slow
class TestTwoEnvironments:
    def test_each_variant_runs_its_environments_tensorflow(self, tf220: dict[str, Any],
                                                           env_run: tuple[BenchRun, Any]) -> None:
        run, _ = env_run
        assert run.proc.returncode == 0, run.proc.stdout[-3000:] + run.proc.stderr[-3000:]
        records = run.by_id()
        assert list(records) == IDS and all(r["status"] == "ok" for r in records.values())
        python = str(tf220["dir"] / "bin" / "python")
        for vid in IDS[:3]:  # the twin and the yardstick copy the first variant's environment
            env = records[vid]["environment"]
            assert env["packages"]["tensorflow-cpu"] == "2.20.0", vid
            assert env["packages"]["tf-keras"].startswith("2.20."), vid
            assert env["python"] == python and env["digest"] == tf220["manifest"]["digest"], vid
            assert records[vid]["variant"]["environment"]["resolved"]["tensorflow-cpu"] == "2.20.0"
            # forked from the 2.20 environment's own fork server
            assert records[vid]["launch"] == {"start_method": "forkserver", "fork_problem": None}
        here = records[IDS[3]]
        assert here["environment"]["python"] == sys.executable
        assert here["environment"]["digest"] == packages_digest(installed_distributions())
        assert here["env"]["tensorflow"] == HERE and here["launch"]["start_method"] == "forkserver"
        logs = {p.name for p in (run.run_dir / "logs").iterdir()}
        assert {"forkserver.log", "forkserver.tf2.20.log"} <= logs
        built = json.loads((run.run_dir / "environment.json").read_text())["environments"]
        assert [(e["label"], e["status"], e["reused"]) for e in built] == [("tf2.20", "ok", True)]

    def test_a_second_run_installs_nothing(self, tf220: dict[str, Any],
                                           env_run: tuple[BenchRun, Any]) -> None:
        run, before = env_run
        assert f"environment tf2.20: reusing {tf220['dir']}" in run.proc.stdout
        assert "built in" not in run.proc.stdout and install_traces(tf220) == before
        again = bench("env", "build", str(tf220["scenario"]))
        assert again.returncode == 0 and "reusing" in again.stdout, again.stdout + again.stderr
        assert install_traces(tf220) == before
        listed = bench("env", "list")
        assert tf220["dir"].name in listed.stdout and "2.20.0" in listed.stdout

    def test_windows_interleave_across_environments(self, env_run: tuple[BenchRun, Any]) -> None:
        run, _ = env_run
        # A turn runs its unobserved and its observed window (in either order) from its start;
        # the traced turn after them has no window clock.
        spans = sorted((start, start + unobserved + observed, r["variant_id"])
                       for r in run.records
                       for start, unobserved, observed in zip(
                           r["measurement"]["window_started_at"], r["measurement"]["window_s"],
                           r["measurement"]["observed_window_s"], strict=False))
        assert len(spans) == 4 * 6
        for (_, end, first), (start, _, second) in zip(spans, spans[1:], strict=False):
            assert end <= start + 1e-3, f"{first} and {second} ran at once"
        assert {tuple(r["interleave"]["batch"]) for r in run.records} == {tuple(IDS)}
        assert "noise floor: the A/A control twins' examples/s differ by" in run.proc.stdout

    def test_traces_are_analysed_in_each_environment(self, env_run: tuple[BenchRun, Any]) -> None:
        run, _ = env_run
        for vid in (IDS[0], IDS[3]):
            analysis = run.by_id()[vid]["trace"]["analysis"]
            assert analysis["status"] == "ok", analysis

    def test_terminal_and_report_say_what_changed(self, env_run: tuple[BenchRun, Any]) -> None:
        """What the pairing promises: the TensorFlow change named, and the headline ratio with
        its interval. Any other package that moved is named beside it, but which moved is the
        package index's to say on the day the environment was built (2.20's resolved ml-dtypes
        0.7.0 once it was out, beside this interpreter's pinned 0.6.0), so that is not asserted."""
        run, _ = env_run
        change = f"TF 2.20.0 -> {HERE}"
        moved = r"[\w.-]+ [\w.+-]+ -> [\w.+-]+"  # "ml-dtypes 0.7.0 -> 0.6.0"
        what = rf"(?:{moved}, )*{re.escape(change)}(?:, {moved})*"
        ratio = r"~?×(\d+\.\d\d) ±\d+%"
        assert "Environments (examples/s of the same variant" in run.proc.stdout
        line = next(ln for ln in run.proc.stdout.splitlines() if change in ln)
        assert IDS[0] in line and (said := re.search(ratio, line)), line
        assert float(said[1]) > 0
        page = html.unescape((run.run_dir.parent.parent / "reports" / run.run_dir.name
                              / f"run-{run.run_dir.name}.html").read_text())
        assert re.search(rf"{re.escape(IDS[0])}: {what}: ×\d+\.\d\d ±\d+%", page), \
            re.findall(rf"{re.escape(IDS[0])}: [^.]*", page)

    def test_compare_gates_one_environment_against_another(self, env_run: tuple[BenchRun, Any],
                                                           tmp_path: Path) -> None:
        run, _ = env_run
        out = tmp_path / "gate.json"
        proc = bench("compare", str(run.run_dir), str(run.run_dir), "--baseline-env", "tf2.20",
                     "--candidate-env", f"tf{HERE}", "--json", str(out))
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        gate = json.loads(out.read_text())
        assert (gate["baseline_env"], gate["candidate_env"], gate["same_run"]) == (
            "tf2.20", f"tf{HERE}", True)
        assert [v["key"] for v in gate["verdicts"]] == [IDS[3]]  # controls measure the machine
        assert gate["regressed"] == (proc.returncode == 1) and gate["caveat"] is None
        missing = bench("compare", str(run.run_dir), str(run.run_dir), "--baseline-env",
                        "tf2.19", "--candidate-env", f"tf{HERE}")
        assert missing.returncode == 2
        assert missing.stderr.strip().endswith(f"ran in environment 'tf2.19' (it has: tf2.20, "
                                               f"tf{HERE})")

    def test_no_process_outlives_the_run(self, env_run: tuple[BenchRun, Any]) -> None:
        run, _ = env_run
        assert leftover_processes(str(run.run_dir)) == []


@pytest.mark.slow
def test_an_environment_that_fails_to_build_fails_only_its_variants(tmp_path: Path) -> None:
    index_or_skip()
    path = write_scenario(tmp_path, """
[[strategies]]
name = "default"

[environment]
tensorflow = ["current", "2.20.*"]
packages = ["bench-no-such-package-xyz"]

[train]
api = "fit"
""", name="broken")
    run = bench_run(path, tmp_path / "results", "--no-control", "--no-report")
    assert run.proc.returncode == 1, run.proc.stdout + run.proc.stderr
    records = run.by_id()
    assert records[f"default-r1-fit-float32-gb16-tf{HERE}"]["status"] == "ok"
    broken = records["default-r1-fit-float32-gb16-tf2.20"]
    assert (broken["status"], broken["reason"]) == (
        "failed", "environment tf2.20: ERROR: No matching distribution found for "
                  "bench-no-such-package-xyz")
    assert "Traceback" not in run.proc.stdout + run.proc.stderr
