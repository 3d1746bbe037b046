"""The CLI commands other than run/validate, through the real `bench` entry point."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from bench.cli import app
from tests.conftest import bench


def command_tree() -> list[tuple[str, ...]]:
    """Every command and subcommand of the typer app, as the words that name it (() the root)."""
    def walk(command: Any, path: tuple[str, ...]) -> list[tuple[str, ...]]:
        subcommands = getattr(command, "commands", {})
        return [path] + [p for name, sub in subcommands.items() for p in walk(sub, (*path, name))]

    return walk(get_command(app), ())


def command_at(path: tuple[str, ...]) -> Any:
    command = get_command(app)
    for name in path:
        command = command.commands[name]
    return command


def words(text: str) -> str:
    return " ".join(text.split())


def summary(command: Any) -> str:
    """The first paragraph of a command's help, which `--help` shows in full and its group lists."""
    return words((command.help or "").split("\n\n")[0])


def test_help_is_useful_on_every_command() -> None:
    top = bench("--help")
    assert top.returncode == 0
    for command in ("run", "validate", "list", "env"):
        assert command in top.stdout
        sub = bench(command, "--help")
        assert sub.returncode == 0, sub.stderr
        assert "Usage" in sub.stdout
    assert "--quick" in bench("run", "--help").stdout
    assert len(command_tree()) >= 20  # the walk below reaches the nested groups too


@pytest.mark.parametrize("path", command_tree(), ids=lambda path: " ".join(path) or "bench")
def test_help_of_each_command_says_what_it_does_and_every_option(path: tuple[str, ...]) -> None:
    """Rendered in this process by typer, as `bench ... --help` renders it (the four commands above
    go through the real entry point): 23 subprocesses would add seconds to the fast suite."""
    command = command_at(path)
    result = CliRunner().invoke(app, [*path, "--help"], prog_name="bench", env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    shown = words(result.output)
    assert f"Usage: bench {' '.join(path)}".strip() in shown, result.output
    assert summary(command) and summary(command) in shown, (summary(command), result.output)
    for param in command.params:
        if param.param_type_name == "option" and param.name != "help":
            assert param.help, f"{' '.join(path)} {param.opts[0]}: no help text"
            assert all(opt in shown for opt in param.opts), (param.opts, result.output)
    for name, sub in getattr(command, "commands", {}).items():
        assert f"{name} {summary(sub)[:40]}" in shown, (name, result.output)


def test_list_without_devices_names_everything_and_skips_tensorflow() -> None:
    proc = bench("list", "--no-devices")
    assert proc.returncode == 0, proc.stderr
    for word in ("mirrored", "central_storage", "one_device", "mlp", "cnn", "fashion_mnist",
                 "mixed_bfloat16", "ctl"):
        assert word in proc.stdout
    assert "devices" not in proc.stdout.split("precisions")[-1]


def test_env_fingerprint_is_json() -> None:
    proc = bench("env", "--no-devices")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["cpu_count"] >= 1
    assert info["python"].startswith("3.")
    assert "tensorflow-cpu" in info["packages"] or "tensorflow" in info["packages"]


@pytest.mark.slow
def test_list_probes_devices_in_a_child_process() -> None:
    proc = bench("list")
    assert proc.returncode == 0, proc.stderr
    assert "CPU:/physical_device:CPU:0" in proc.stdout
    if "GPU:/physical_device:GPU:0" not in proc.stdout:  # no GPU: says how replicas are simulated
        assert "logical CPU devices" in proc.stdout


def test_the_parent_process_never_imports_tensorflow() -> None:
    import subprocess
    import sys

    code = ("import sys, bench.cli, bench.runner, bench.results, bench.data.sources, bench.report.terminal, "
            "bench.checks.verdicts, bench.data.tfrecord, bench.data.tfds_source, bench.report.narrative; "
            "print('tensorflow' in sys.modules or 'keras' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_every_command_goes_through_the_one_error_path() -> None:
    """A BenchError from any command becomes `error: <message>` on stderr and exit code 2, in one
    place (bench.cli.one_line_errors), so no command catches it itself."""
    import typer
    from typer.testing import CliRunner

    from bench.cli import app, one_line_errors
    from bench.errors import BenchError

    groups = [app] + [group.typer_instance for group in app.registered_groups]
    commands = [command for group in groups for command in group.registered_commands]
    assert len(commands) == 19  # bench env list, prune and build, and bench prune
    callbacks = [group.registered_callback for group in groups if group.registered_callback]
    assert len(callbacks) == 1  # `bench env` alone: the fingerprint
    wrapper_code = one_line_errors(lambda: None).__code__  # every wrapper runs this code
    for command in [*commands, *callbacks]:
        assert command.callback.__code__ is wrapper_code, command.callback.__name__

    def broken() -> None:
        raise BenchError("scenario.toml: model.name: [not markup]")

    tiny = typer.Typer()
    tiny.command()(one_line_errors(broken))
    result = CliRunner().invoke(tiny, [])
    assert result.exit_code == 2
    assert result.stderr == "error: scenario.toml: model.name: [not markup]\n"


def test_choice_options_list_their_choices_and_typer_rejects_others(tmp_path) -> None:
    for command, option, choices, args in (
            ("export", "--format", "pytest-benchmark", (str(tmp_path),)),
            ("worker", "--resolver", "tf_config|slurm", ("s.toml", "--variant", "v"))):
        assert choices in bench(command, "--help").stdout
        proc = bench(command, *args, option, "csv")
        assert proc.returncode == 2
        assert f"Invalid value for '{option}'" in proc.stderr
        assert "Traceback" not in proc.stderr
