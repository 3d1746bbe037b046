"""A scenario file as a document, before the schema sees it: its size, its nesting, its text.

The schema says what each field means; this says what no scenario can be, whatever its fields:
larger than MAX_SCENARIO_BYTES (the largest shipped scenario is a few KB), nested deeper than
MAX_NESTING tables and arrays (tomllib and pydantic recurse, and Python's stack ends near a
thousand levels), or holding characters a terminal or a page would act on instead of showing
(control characters such as BEL or a newline, U+202E that turns the text after it around, other
invisible format characters). Each is one ScenarioError naming the file and the field.
"""

from __future__ import annotations

import tomllib
import unicodedata
from pathlib import Path
from typing import Any

from bench.errors import ScenarioError

MAX_SCENARIO_BYTES = 1 << 20  # 1 MiB
# The deepest a scenario needs is a Keras object's arguments inside a strategy's model table;
# 32 leaves room and stays far from Python's recursion limit.
MAX_NESTING = 32
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs"})
# Free text may run over lines (a TOML multi-line string) and join emoji (U+200D): newlines,
# tabs and the zero-width joiners are kept there.
FREE_TEXT_KEYS = frozenset({"description"})
FREE_TEXT_ALLOWED = "\n\t\u200c\u200d"


def hidden_character(text: str, allowed: str = "") -> str | None:
    """The first character of `text` a terminal would act on rather than show, as U+XXXX."""
    for char in text:
        if unicodedata.category(char) in HIDDEN_CATEGORIES and char not in allowed:
            return f"U+{ord(char):04X}"
    return None


def read_document(path: Path) -> dict[str, Any]:
    """The decoded TOML of a scenario file, within the size and nesting bounds."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_SCENARIO_BYTES + 1)
    except FileNotFoundError:
        raise ScenarioError(str(path), None, "file not found") from None
    except OSError as exc:
        raise ScenarioError(str(path), None, f"cannot read: {exc}") from None
    if len(raw) > MAX_SCENARIO_BYTES:
        raise ScenarioError(str(path), None, f"larger than a scenario may be "
                            f"({MAX_SCENARIO_BYTES >> 20} MiB)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(str(path), None, f"cannot read: not UTF-8 text ({exc})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(str(path), None, f"invalid TOML: {exc}") from None
    except RecursionError:
        raise ScenarioError(str(path), None, "invalid TOML: nested deeper than a scenario may "
                            f"be ({MAX_NESTING} tables and arrays)") from None


def check_document(data: dict[str, Any], source: str) -> None:
    """Nesting and hidden characters, in keys and values, each named by its field."""
    pending: list[tuple[str, Any, int, str]] = [("", data, 0, "")]
    while pending:
        field, value, depth, key = pending.pop()
        if depth > MAX_NESTING:
            raise ScenarioError(source, field, f"nested deeper than a scenario may be "
                                f"({MAX_NESTING} tables and arrays)")
        if isinstance(value, str):
            allowed = FREE_TEXT_ALLOWED if key in FREE_TEXT_KEYS else ""
            if found := hidden_character(value, allowed):
                raise ScenarioError(source, field, f"holds the control or invisible character "
                                    f"{found}, which a terminal would act on instead of showing")
        elif isinstance(value, dict):
            for name, item in value.items():
                if found := hidden_character(str(name)):
                    raise ScenarioError(source, field or None, f"a key holds the control or "
                                        f"invisible character {found}: {ascii(name)}")
                pending.append((f"{field}.{name}" if field else str(name), item, depth + 1,
                                str(name)))
        elif isinstance(value, list):
            pending += [(f"{field}[{i}]", item, depth + 1, key) for i, item in enumerate(value)]
