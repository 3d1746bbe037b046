"""Hostile scenario files: each fault is one line on stderr naming the file and the field, exit
code 2, no traceback, from `bench validate`, `bench plan` and `bench run` alike; nothing runs.

The corpus is made here, one file per case: values of the wrong TOML type (pydantic's strict
mode), numbers no run can mean (inf, nan, beyond the bounds `bench.scenario.fields` gives with
their reasons), names that are blank or hold characters a terminal acts on, unknown keys of
nested tables, a matrix of millions of variants (bench.scenario.size, counted before expansion),
documents nested or sized past what bench parses (bench.scenario.document), user modules Python's
parser cannot read, and values that would carry a path out of the run directory.
"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from bench.errors import BenchError, ScenarioError
from bench.runner import RunOptions, prepare
from bench.scenario.fields import MAX_RUN_VARIANTS, MAX_SCENARIO_VARIANTS
from bench.scenario.loading import load_scenario, load_variants, parse_scenario
from bench.scenario.matrix import expand
from bench.scenario.size import matrix_size
from tests.conftest import REPO, bench

HEAD = '[scenario]\nname = "hostile"\n'
BATCH = "[batch]\nper_replica = 8\n"
DEFAULT = '[[strategies]]\nname = "default"\n'


def doc(*tables: str, head: str = HEAD, batch: str = BATCH, strategies: str = DEFAULT) -> str:
    return "\n".join([head, batch, *tables, strategies])


MIRRORED = '[[strategies]]\nname = "mirrored"\n'
CLUSTER = '[[strategies]]\nname = "multi_worker_mirrored"\nworkers = 2\n'
# 10 x 10 x 3 x 2 x 8 x 2 x 10 x 8 x 4 = 3,072,000 variants, in 16 lines
HUGE = """[scenario]
name = "huge"
[batch]
per_replica = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
[train]
api = ["fit", "ctl"]
precision = ["float32", "mixed_float16", "mixed_bfloat16"]
steps_per_execution = [1, 2, 3, 4, 5, 6, 7, 8]
jit_compile = [true, false]
[data]
prefetch = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
map_parallelism = [1, 2, 3, 4, 5, 6, 7, 8]
[[strategies]]
name = "mirrored"
replicas = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
cross_device_ops = ["auto", "reduction_to_one_device", "hierarchical_copy", "nccl"]
"""
# 1,200 variants: a scenario may hold them, a run may not (without --only)
LARGE = doc("[train]\napi = \"fit\"\n[data]\nprefetch = [" + ", ".join(map(str, range(20)))
            + "]\nmap_parallelism = [" + ", ".join(map(str, range(1, 16))) + "]\n",
            batch="[batch]\nper_replica = [8, 16, 32, 64]\n")

# case -> (file text, the field the line names, what it says)
CASES: dict[str, tuple[str, str, str]] = {
    # values of the wrong type: TOML says what a value is, nothing converts it
    "bool_as_batch": (doc(batch="[batch]\nper_replica = true\n"), "batch.per_replica[0]",
                      "Input should be a valid integer (got True)"),
    "string_steps": (doc('[measure]\nsteps = "100"\n'), "measure.steps",
                     "Input should be a valid integer (got '100')"),
    "string_replicas": (doc(strategies=MIRRORED + 'replicas = ["1", "2"]\n'),
                        "strategies[0].replicas[0]", "(got '1')"),
    "bool_timeout": (doc("[measure]\ntimeout_s = true\n"), "measure.timeout_s",
                     "Input should be a valid number"),
    "bool_max_live": (doc("[measure]\nmax_live = true\n"), "measure.max_live", "(got True)"),
    "date_name": (doc(head="[scenario]\nname = 1979-05-27\n"), "scenario.name",
                  "Input should be a valid string"),
    # numbers no run can mean
    "inf_learning_rate": (doc(batch=BATCH + "learning_rate = inf\n"), "batch.learning_rate",
                          "Input should be a finite number"),
    "inf_timeout": (doc("[measure]\ntimeout_s = inf\n"), "measure.timeout_s",
                    "Input should be a finite number"),
    "nan_window": (doc("[measure]\nmin_window_s = nan\n"), "measure.min_window_s",
                   "Input should be a finite number"),
    "inf_tolerance": (doc("[check.loss_parity]\ntolerance = inf\n"),
                      "check.loss_parity.tolerance", "Input should be a finite number"),
    "inf_optimizer_argument": (doc('[train]\noptimizer = { name = "adam", epsilon = inf }\n'),
                               "train.optimizer", "argument 'epsilon': inf is not a finite"),
    "inf_fault_step": (doc('[fault]\nkill = { task = "worker:1", at_step = inf }\n',
                           strategies=CLUSTER), "fault.kill.at_step", "finite"),
    "steps_1e23": (doc("[measure]\nsteps = 100000000000000000000000\n"), "measure.steps",
                   "less than or equal to 1000000"),
    "repeats_1e12": (doc("[measure]\nrepeats = 1000000000000\n"), "measure.repeats",
                     "less than or equal to 1000"),
    "replicas_100000": (doc(strategies=MIRRORED + "replicas = 100000\n"),
                        "strategies[0].replicas[0]", "less than or equal to 64"),
    "workers_100000": (doc(strategies=CLUSTER.replace("workers = 2", "workers = 100000")),
                       "strategies[0].workers[0]", "less than or equal to 256"),
    "batch_1e9": (doc(batch="[batch]\nper_replica = 1000000000\n"), "batch.per_replica[0]",
                  "less than or equal to 1048576"),
    "timeout_a_year": (doc("[measure]\ntimeout_s = 31536000\n"), "measure.timeout_s",
                       "less than or equal to 604800"),
    "matmul_1e6": (doc("[model]\nextra_matmul = 1000000\n"), "model.extra_matmul",
                   "less than or equal to 16384"),
    # names: not blank, nothing a terminal acts on, short enough to name a folder
    "blank_name": (doc(head='[scenario]\nname = "   "\n'), "scenario.name", "a blank name"),
    "bidi_name": (doc(head='[scenario]\nname = "safe\\u202Eexe.txt"\n'), "scenario.name",
                  "U+202E"),
    "bell_name": (doc(head='[scenario]\nname = "ding\\u0007"\n'), "scenario.name", "U+0007"),
    "newline_name": (doc(head='[scenario]\nname = "two\\nlines"\n'), "scenario.name", "U+000A"),
    "escape_description": (doc(head=HEAD + 'description = "\\u001b[2J"\n'),
                           "scenario.description", "U+001B"),
    "control_in_a_key": (doc(batch=BATCH + '"colo\\u0007ur" = 1\n'), "batch",
                         "a key holds the control or invisible character U+0007"),
    "control_in_a_value": (doc(strategies=DEFAULT.replace('"default"', '"default\\u0000"')),
                           "strategies[0].name", "U+0000"),
    "long_name": (doc(head=f'[scenario]\nname = "{"n" * 101}"\n'), "scenario.name",
                  "at most 100 characters"),
    # unknown keys of nested tables: that table's own fields
    "nested_typo": (doc("[check.loss_parity]\nstepz = 5\n"), "check.loss_parity.stepz",
                    "unknown key; did you mean 'steps'?"),
    "nested_unknown": (doc("[check.loss_parity]\nzzz = 5\n"), "check.loss_parity.zzz",
                       "unknown key (allowed: batch, learning_rate, steps, tolerance)"),
    "feature_typo": (doc("[data.features.item]\nvocabb = 10\n"),
                     "data.features.item.vocabb", "did you mean 'vocab'?"),
    "strategy_model_typo": (doc(strategies=DEFAULT + '[strategies.model]\nnmae = "mlp"\n'),
                            "strategies[0].model.nmae", "did you mean 'name'?"),
    # the matrix: counted before expansion
    "huge_matrix": (HUGE, "strategies[0]", "3,072,000 variants (replicas 10 x batch.per_replica "
                    "10 x data.prefetch 10"),
    # what would name files outside their folder
    "path_in_variant_id": (doc('[train]\noptimizer = [{ name = "adam", epsilon = "../../x" }, '
                               '"sgd"]\n'), "strategies[0]", "holds a path separator"),
    "path_in_environment": (doc('[environment]\ntensorflow = "===../../x"\n'),
                            "environment.tensorflow", "holds characters no version has"),
    # documents nested or sized past what bench parses
    "toml_nested_5000": (doc(head=HEAD + "deep = " + "[" * 5000 + "]" * 5000 + "\n"), "",
                         "invalid TOML: nested deeper than a scenario may be"),
    "toml_nested_40": (doc(head=HEAD + "deep = " + "[" * 40 + "]" * 40 + "\n"),
                       "scenario.deep" + "[0]" * 31, "nested deeper than a scenario may be"),
}

# One case of each class of fault through the real command line (every case is checked in
# this process too, which is where a traceback would come from: the command line prints any
# ScenarioError as its one line).
SUBPROCESS_CASES = ("string_steps", "bool_as_batch", "inf_timeout", "steps_1e23", "bidi_name",
                    "control_in_a_key", "nested_typo", "huge_matrix", "path_in_variant_id",
                    "toml_nested_5000")
PLAN_AND_RUN_CASES = ("huge_matrix", "replicas_100000", "bidi_name")


def assert_one_error(path: Path, field: str, message: str) -> None:
    """Loading and expanding `path` is one ScenarioError line naming the file, the field and
    the fault."""
    with pytest.raises(ScenarioError) as raised:
        load_variants(path)
    text = str(raised.value)
    assert "\n" not in text
    assert text.startswith(f"{path}: {field}: " if field else f"{path}: "), text
    assert message in text, text


def assert_one_line(proc: subprocess.CompletedProcess[str], path: Path, field: str,
                    message: str) -> None:
    """Exit 2, no traceback, one stderr line naming the file, the field and the fault."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    where = f"error: {path}: {field}: " if field else f"error: {path}: "
    assert lines[0].startswith(where), lines[0]
    assert message in lines[0], lines[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_fault_is_one_scenario_error(tmp_path: Path, case: str) -> None:
    text, field, message = CASES[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(text, encoding="utf-8")
    assert_one_error(path, field, message)


@pytest.mark.parametrize("case", SUBPROCESS_CASES)
def test_validate_refuses_in_one_line(tmp_path: Path, case: str) -> None:
    text, field, message = CASES[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(text, encoding="utf-8")
    assert_one_line(bench("validate", str(path)), path, field, message)


@pytest.mark.parametrize("case", PLAN_AND_RUN_CASES)
@pytest.mark.parametrize("command", ["plan", "run"])
def test_plan_and_run_refuse_as_validate_does(tmp_path: Path, case: str, command: str) -> None:
    text, field, message = CASES[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(text, encoding="utf-8")
    results = tmp_path / "results"
    extra = ["--results-dir", str(results)] if command == "run" else []
    assert_one_line(bench(command, str(path), *extra), path, field, message)
    assert not results.exists() or not any(results.iterdir())  # nothing started


def test_the_huge_matrix_is_counted_not_built() -> None:
    """3,072,000 variants are refused from their axes' lengths (expanding them took over 120 s
    and 6 GB before a MemoryError); the count is what expanding a small matrix gives."""
    data = tomllib.loads(HUGE)
    with pytest.raises(ScenarioError, match="3,072,000 variants"):
        parse_scenario(data)
    small = dict(data, data={"prefetch": [0, 1], "map_parallelism": [1, 2]},
                 train={**data["train"], "steps_per_execution": [1, 2]})
    small["batch"] = {"per_replica": [8, 16]}
    scenario = parse_scenario(small)
    assert matrix_size(scenario).variants == len(expand(scenario)) == 7680


def test_the_count_is_the_expansion_of_every_shipped_scenario() -> None:
    """The count before expansion agrees with the expansion itself for every scenario the
    project ships (scenarios/, examples/, the benchmarks'), whatever axes they sweep."""
    files = [*sorted((REPO / "scenarios").glob("*.toml")), *sorted(REPO.glob("examples/*/*.toml")),
             *sorted((REPO / "tests").rglob("*.toml"))]
    assert len(files) > 10
    for path in files:
        scenario, variants = load_variants(path)
        size = matrix_size(scenario)
        assert size.variants == len(variants), path
        assert size.processes == sum(max(1, len(v.kind.tasks(v))) for v in variants), path


def test_a_run_holds_fewer_variants_than_a_scenario(tmp_path: Path) -> None:
    """1,200 variants validate (a scenario may hold 10,000) but make no run of 1,000 at most;
    --only chooses a run's share of them."""
    assert MAX_RUN_VARIANTS < 1200 < MAX_SCENARIO_VARIANTS
    path = tmp_path / "large.toml"
    path.write_text(LARGE)
    assert len(load_variants(path)[1]) == 1200
    assert_one_line(bench("run", str(path), "--results-dir", str(tmp_path / "results")), path,
                    "strategies[0]", "1,200 variants to run, more than one run may hold (1,000")
    _, chosen = prepare(path, RunOptions(only=["*-map1-*"], control=False))
    assert len(chosen) == 80


def test_command_line_overrides_meet_the_same_bounds(tmp_path: Path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text(doc())
    results = tmp_path / "results"
    proc = bench("run", str(path), "--steps", str(10**23), "--results-dir", str(results))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: --steps: Input should be less than or equal to 1000000 (got {10**23})"]
    assert not results.exists() or not any(results.iterdir())
    with pytest.raises(BenchError, match=r"^--timeout: Input should be a finite number"):
        prepare(path, RunOptions(timeout_s=float("inf")))
    with pytest.raises(BenchError, match=r"^--repeats: Input should be less than or equal"):
        prepare(path, RunOptions(repeats=10**12))


@pytest.mark.parametrize(("name", "content", "message"), [
    ("deep_sum", "def build():\n    pass\nx = " + "+".join(["1"] * 200_000) + "\n",
     "nested too deeply for Python's parser"),
    ("deep_unary", "def build():\n    pass\nx = " + "-" * 200_000 + "1\n",
     "nested too deeply for Python's parser"),
    ("null_byte", "def build():\n    pass\n\0\n", "cannot read"),
    ("too_large", "def build():\n    pass\n" + "#" * (11 << 20) + "\n",
     "larger than a module bench reads for its names (10 MiB)"),
])
def test_a_user_module_that_cannot_be_parsed_is_one_line(tmp_path: Path, name: str,
                                                         content: str, message: str) -> None:
    """The parent reads a user's module for its names (never imports it): a module its parser
    cannot take is a problem of the field that names it."""
    (tmp_path / f"{name}.py").write_text(content)
    path = tmp_path / "scenario.toml"
    path.write_text(doc(f'[model]\nname = "{name}:build"\n'))
    assert_one_error(path, "model.name", f"cannot read {tmp_path / f'{name}.py'}: ")
    assert_one_error(path, "model.name", message)
    if name == "deep_sum":
        proc = bench("validate", str(path))
        assert_one_line(proc, path, "model.name", message)


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p.write_bytes(b"[scenario]\nname = '\xff'\n"), "not UTF-8 text"),
    (lambda p: p.write_text(HEAD + "# " + "x" * (1 << 20) + "\n"),
     "larger than a scenario may be (1 MiB)"),
    (lambda p: p.mkdir(), "cannot read"),
])
def test_a_file_bench_cannot_read_as_a_scenario_is_one_line(tmp_path: Path, make, message: str
                                                            ) -> None:
    path = tmp_path / "scenario.toml"
    make(path)
    assert_one_error(path, "", message)


def test_a_path_in_the_name_stays_inside_results_and_the_report(tmp_path: Path) -> None:
    """A scenario named like a path names a run directory inside results/ and a report page
    inside the report, whatever its parts."""
    from bench import results as run_results
    from bench.report.site import run_page_name

    scenario = parse_scenario(tomllib.loads(doc(head='[scenario]\nname = "../../../etc/x"\n')))
    root = tmp_path / "results"
    run_dir = run_results.create_run_dir(root, scenario.name)
    assert run_dir.parent == root and run_dir.name.startswith("etc_x-")
    page = tmp_path / "report" / run_page_name(run_dir.name)
    assert page.parent == tmp_path / "report" and "/" not in run_page_name(scenario.name)


def test_shipped_examples_and_test_scenarios_validate_strictly() -> None:
    """Strict types and the new bounds leave every scenario the project ships valid."""
    files = [*REPO.glob("examples/*/*.toml"), *(REPO / "tests").rglob("*.toml")]
    assert files
    for path in files:
        assert load_scenario(path).name, path
