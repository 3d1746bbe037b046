"""What the command modules share: the two consoles and the scenario argument.

Imports nothing of bench's but the names of its environment variables (bench.child_env), so
every command module can use it without importing the others.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from bench.child_env import ChildEnv

# Piped output (CI logs, files) gets a wide fixed width instead of rich's 80-column fallback.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 200)

ScenarioArg = Annotated[Path, typer.Argument(help="Scenario TOML file.", show_default=False)]
EnvCacheOption = Annotated[Optional[Path], typer.Option(
    help="Where the virtualenvs of scenarios' environment tables are cached (default: "
         f"${ChildEnv.name('env_cache')}, else ${ChildEnv.name('cache_dir')}/envs, else "
         "~/.cache/bench/envs).")]
