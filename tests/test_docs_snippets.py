"""What the docs show a reader to copy must work: every TOML snippet validates, every `bench` line
parses with the real command line.

Complete scenarios (with a `[scenario]` table) go through `bench validate` itself; fragments are
merged into a minimal scenario and validated by the schema. Command lines in shell blocks are
parsed as `bench` would parse them (typer's click parser: commands, options, types, required
arguments) without running anything; a synopsis (placeholders such as SCENARIO, `[--opt]`, `a|b`)
and a command named in prose must name a real command and real options. No TensorFlow, about 3 s.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import typer.main
from pydantic import ValidationError
from typer import _click as click
from typer.exceptions import Exit

from bench.cli import app
from bench.scenario.schema import Scenario

REPO = Path(__file__).resolve().parent.parent
# A snippets include: the site would insert the file, every other reader sees this line.
INCLUDE = re.compile(r"^\s*-+8<-+", re.M)
FENCE = re.compile(r"^([ \t]*)```(\w*)([^\n]*)\n(.*?)^\1```", re.M | re.S)
TITLE = re.compile(r'\btitle="([^"]+)"')
SHELL = ("bash", "sh", "shell", "console")
# A minimal scenario a fragment is merged into: the tables a scenario cannot do without.
BASE = {"scenario": {"name": "snippet"}, "batch": {"per_replica": 32},
        "strategies": [{"name": "default"}]}


class Block(NamedTuple):
    where: str  # "docs/guides/x.md:12"
    lang: str
    text: str
    shows: Path | None  # the repository's file a block shows (its title names it)


def pages() -> list[Path]:
    return [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    raw = page.read_text(encoding="utf-8")
    out = []
    for match in FENCE.finditer(raw):
        title = TITLE.search(match.group(3))
        shown = REPO / title.group(1) if title and (REPO / title.group(1)).is_file() else None
        line = raw[:match.start()].count("\n") + 1
        out.append(Block(f"{page.relative_to(REPO)}:{line}", match.group(2), match.group(4),
                         shown))
    return out


def all_blocks() -> list[Block]:
    return [b for page in pages() for b in blocks(page)]


def merged(fragment: dict[str, Any]) -> dict[str, Any]:
    out = {key: dict(value) if isinstance(value, dict) else value for key, value in BASE.items()}
    for key, value in fragment.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def test_no_page_includes_a_file() -> None:
    """An include (`--8<--`) reads right only in the built site: on GitHub or in an editor the
    page shows the raw line instead of the example. A page shows a file's text itself, in a
    block titled with the file's path (checked below)."""
    found = [f"{page.relative_to(REPO)}:{raw[:m.start()].count(chr(10)) + 1}"
             for page in pages() for raw in [page.read_text(encoding="utf-8")]
             for m in INCLUDE.finditer(raw)]
    assert found == []


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.shows is not None],
                         ids=lambda b: b.where)
def test_a_block_titled_with_a_file_shows_that_file_as_it_is(block: Block) -> None:
    assert block.shows is not None
    if block.text.rstrip("\n") != block.shows.read_text(encoding="utf-8").rstrip("\n"):
        pytest.fail(f"{block.where}: the block differs from {block.shows.relative_to(REPO)}: copy "
                    "the file's text into it", pytrace=False)


def test_the_docs_show_the_files_they_name() -> None:
    """The example a guide walks through is the file itself (the check above has it to check)."""
    shown = {b.shows.relative_to(REPO).as_posix() for b in all_blocks() if b.shows is not None}
    assert "examples/own_model/scenario.toml" in shown


def test_the_docs_have_snippets_to_check() -> None:
    kinds = [b.lang for b in all_blocks()]
    assert kinds.count("toml") >= 15 and sum(k in SHELL for k in kinds) >= 15, kinds


def test_every_complete_scenario_passes_bench_validate(tmp_path: Path) -> None:
    """`bench validate`, the command a reader would run, over every snippet with a [scenario]."""
    files = []
    for i, block in enumerate(b for b in all_blocks() if b.lang == "toml"):
        if "scenario" not in tomllib.loads(block.text) and block.shows is None:
            continue
        if block.shows is not None:  # validated where it lives: its modules are beside it
            files.append(block.shows)
            continue
        path = tmp_path / f"snippet{i}.toml"
        path.write_text(block.text, encoding="utf-8")
        files.append(path)
    assert len(files) >= 2
    done = subprocess.run([sys.executable, "-m", "bench", "validate", *map(str, files)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.lang == "toml"],
                         ids=lambda b: b.where)
def test_every_toml_snippet_fits_the_schema(block: Block) -> None:
    """Fragments (a [data] table, two [[strategies]]) are valid in a minimal scenario."""
    table = tomllib.loads(block.text)
    try:
        Scenario.model_validate(table if "scenario" in table else merged(table))
        problem = None
    except ValidationError as exc:  # it names the field; the block names the page and line
        problem = f"{block.where}: {exc}"
    if problem:
        pytest.fail(problem, pytrace=False)


# --- command lines ---------------------------------------------------------------------------

ROOT = typer.main.get_command(app)
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(\.\.\.)?$|<[^>]*>|\.\.\.|…")


def command_lines() -> list[tuple[str, str, bool]]:
    """(where, the line after `bench`, whether it must parse whole) of every bench command in
    the docs: lines of shell blocks (whole, unless it is a synopsis), and inline code in prose
    (its command and options only: prose names a command or an option, it is no line to paste)."""
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for block in blocks(page):
            if block.lang not in SHELL:
                continue
            for line in block.text.splitlines():
                if block.lang == "console":  # commands after the prompt; the rest is output
                    if not line.startswith("$ "):
                        continue
                    line = line[2:]
                for part in re.split(r"&&|;", line):
                    part = part.strip()
                    if part.startswith("bench "):
                        found.append((block.where, part[len("bench "):], True))
        prose = FENCE.sub("", text)
        for match in re.finditer(r"`([^`\n]+)`", prose):  # code spans, paired left to right
            if match.group(1) == "bench" or match.group(1).startswith("bench "):
                where = f"{page.relative_to(REPO)}:{prose[:match.start()].count(chr(10)) + 1}"
                found.append((where, match.group(1)[len("bench"):].strip(), False))
    return found


def parse(argv: list[str]) -> Any:
    """argv as `bench` parses it, down to the command it names; click raises on any mistake."""
    command, name, ctx, args = ROOT, "bench", None, list(argv)
    while True:
        ctx = command.make_context(name, args, parent=ctx)
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        if not hasattr(command, "resolve_command") or not rest:
            return ctx
        name, command, args = command.resolve_command(ctx, rest)


def options_of(tokens: list[str]) -> None:
    """A synopsis or a command named in prose: its command path (`env list|prune|build`: each of
    them) and every option must exist; a placeholder (COMMAND) ends the path."""
    command, path = ROOT, ["bench"]
    for word in (t for t in tokens if not t.startswith("-")):
        subs = getattr(command, "commands", None)
        if not subs or PLACEHOLDER.search(word):
            break
        for choice in word.split("|"):
            if choice not in subs:
                raise click.exceptions.UsageError(f"{' '.join(path)} has no command {choice!r}")
        command, path = subs[word.split("|")[0]], [*path, word.split("|")[0]]
    known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    for token in tokens:
        option = token.split("=", 1)[0]
        if option.startswith("-") and option not in (*known, "--help"):
            raise click.exceptions.UsageError(f"{' '.join(path)} has no option {option}")


@pytest.mark.parametrize("where,line,whole", command_lines(), ids=lambda v: str(v)[:60])
def test_every_bench_command_line_parses(where: str, line: str, whole: bool) -> None:
    tokens = shlex.split(line.replace("\\|", "|"))
    synopsis = not whole or any(PLACEHOLDER.search(t) or t.startswith("[") or "|" in t
                                for t in tokens)
    try:
        if synopsis:
            options_of([t.strip("[]") for t in tokens])
        else:
            parse(tokens)
    except Exit as done:  # --help: parsed, then it would print and leave
        assert done.exit_code == 0
    except click.ClickException as exc:
        pytest.fail(f"{where}: `bench {line}`: {exc.format_message()}", pytrace=False)


def test_a_wrong_option_is_caught() -> None:
    """The checks above would fail on a mistake: an unknown option, in a line and in prose."""
    with pytest.raises(click.ClickException):
        parse(["run", "scenarios/mnist_mirrored.toml", "--quik"])
    with pytest.raises(click.ClickException):
        options_of(["compare", "RUN", "RUN", "--baseline-environment", "X"])
    with pytest.raises(click.ClickException):
        options_of(["frobnicate"])
