"""The text a scenario's digest is taken of: its validated content, as JSON.

Two runs with equal digests ran the same scenario, so a field added to the schema must not
change the digest of a scenario that does not use it: fields added after digests were first
kept are left out while they hold their defaults.
"""

from __future__ import annotations

import json
from typing import Any


def digest_json(data: dict[str, Any]) -> str:
    """`Scenario.model_dump(mode="json")` as compact JSON (as pydantic writes it), without the
    fields a scenario leaves at their later-added defaults."""
    if not data.get("environment"):
        data.pop("environment", None)
    if data.get("target") is None:
        data.pop("target", None)
    elif data["target"].get("start") == "keras":
        data["target"].pop("start", None)
    for entry in [data["batch"], *(s.get("batch") or {} for s in data["strategies"])]:
        if entry.get("lr_warmup_examples") == 0:
            entry.pop("lr_warmup_examples", None)
    for strat in data["strategies"]:
        if strat.get("batch") is None:
            strat.pop("batch", None)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)
