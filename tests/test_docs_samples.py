"""The docs' samples of output are what the code writes: the terminal samples' columns, rows and
sentences as the code renders their runs' records today (the noise floor's interval among them),
the plans their commands really run (`--quick`'s settings from the code), the record example a
record of today's schema with no unknown field. `python -m tests.docs_samples` writes them all
again from real runs (tests/docs_samples.py). Fast: no TensorFlow, about 2 s; the slow test runs
the generator's `--quick` sample into a copy of the pages."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest

from bench.compare.tdist import t_quantile
from bench.scenario.quick import QUICK_MEASURE, quick_summary
from bench.timing import block_length
from tests import docs_samples
from tests.docs_samples import RECORD_EXAMPLE, SAMPLES, SAMPLES_DIR, problems
from tests.record_fields import field_paths

REPO = Path(__file__).resolve().parent.parent
QUICK = next(s for s in SAMPLES if "--quick" in s.extra)
RUN = next(s for s in SAMPLES if s.name == "run")


def test_the_samples_match_what_the_code_writes() -> None:
    assert problems(REPO) == [], "stale docs samples: run `python -m tests.docs_samples`"


def copy_of_the_samples(root: Path) -> Path:
    """The pages, records and record example the samples are made of, under `root`."""
    for sample in SAMPLES:
        (root / sample.page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / sample.page, root / sample.page)
    shutil.copytree(REPO / SAMPLES_DIR, root / SAMPLES_DIR)
    (root / RECORD_EXAMPLE).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / RECORD_EXAMPLE, root / RECORD_EXAMPLE)
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_a_stale_plan_is_noticed(tmp_path: Path) -> None:
    """The pages said "--quick runs 2 rounds of 2 steps" while the code ran 16-step windows."""
    root = copy_of_the_samples(tmp_path)
    assert problems(root) == []
    plan = docs_samples.plan_words(QUICK.measure())
    edit(root / QUICK.page, plan, plan.replace(f"window of {QUICK.measure().steps} steps",
                                               "window of 2 steps"))
    edit(root / QUICK.page, quick_summary(), quick_summary().replace(
        f"{QUICK_MEASURE['steps']} timed", "2 timed"))
    found = problems(root)
    assert len(found) == 2 and all(f"sample '{QUICK.name}'" in p for p in found), found
    assert "does not say '" + plan in found[0] and quick_summary() in found[1]


def test_a_stale_interval_is_noticed(tmp_path: Path) -> None:
    """A noise floor line with another interval than today's method gives its rounds (the
    sample of the percentile bootstrap, over the same rounds, read "+4.8% to +18.1%")."""
    root = copy_of_the_samples(tmp_path)
    page = (root / RUN.page).read_text(encoding="utf-8")
    interval = re.search(r"95% interval\s+[+-][\d.]+%\s+to\s+[+-][\d.]+%", page)
    assert interval, "the run's sample states its noise floor's interval"
    edit(root / RUN.page, interval[0], "95% interval +4.8% to +18.1%")
    found = problems(root)
    assert len(found) == 1 and "it does not say 'noise floor: " in found[0], found


def test_a_stale_table_is_noticed(tmp_path: Path) -> None:
    root = copy_of_the_samples(tmp_path)
    edit(root / RUN.page, "┃ strategy ", "┃ strategy_")
    edit(root / QUICK.page, "│ mirrored ", "│ mirored  ")
    assert [p.split(": ", 1)[1] for p in problems(root)] == [
        "its table's columns are not today's: " + " ".join(docs_samples.table(
            docs_samples.summary_text(records(RUN.name)))[0]),
        "its table's rows are not the variants of its records"]


def records(name: str) -> list:
    from bench.record.model import VariantRecord

    lines = (REPO / SAMPLES_DIR / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [VariantRecord.load(json.loads(line)) for line in lines]


def test_a_stale_record_example_is_noticed(tmp_path: Path) -> None:
    """The example of schema 1 the reference showed as "a real record"; one with a misspelt
    field; one that is no record of the samples' run."""
    root = copy_of_the_samples(tmp_path)
    example = root / RECORD_EXAMPLE
    shutil.copy(REPO / "tests" / "fixtures" / "record_schema1.json", example)
    assert problems(root) == [f"{RECORD_EXAMPLE}: schema 1, and bench writes schema 2"]
    record = json.loads((REPO / RECORD_EXAMPLE).read_text(encoding="utf-8"))
    record["throughput"]["headlin"] = record["throughput"].pop("headline")
    example.write_text(json.dumps(record), encoding="utf-8")
    assert problems(root) == [
        f"{RECORD_EXAMPLE}: 'throughput.headlin' is no field of the record",
        f"{RECORD_EXAMPLE}: not a record of the run behind the samples ({SAMPLES_DIR}/run.jsonl)"]


def test_quick_is_said_as_the_code_sets_it() -> None:
    """Every page that says what --quick sets says it in the words made from its values (the
    reference pages through `python -m bench.cli.docs write`, the first run's with its sample)."""
    for page in ("docs/getting-started/first-run.md", "docs/reference/shipped-scenarios.md",
                 "docs/reference/commands.md"):
        assert quick_summary() in " ".join((REPO / page).read_text(encoding="utf-8").split()), page


def test_the_noise_floors_reach_is_the_t_intervals() -> None:
    """"Some 19% from one round to the next ... about ±14% over 12 rounds and ±4% over 96": the
    half-width the noise floor's method (Student's t over batches of `block_length` rounds)
    gives rounds of that spread."""
    text = " ".join((REPO / "docs/getting-started/reading-results.md").read_text(
        encoding="utf-8").split())
    said = re.search(r"some (\d+)% from one round to the next.*?about ±(\d+)% over (\d+) rounds "
                     r"and ±(\d+)% over (\d+)", text)
    assert said, "reading-results.md says what the rounds leave"
    spread = int(said[1]) / 100

    def half_width_pct(rounds: int) -> int:
        size = block_length(rounds)
        batches = rounds // size
        return round(100 * t_quantile(batches - 1, 0.975) * spread / math.sqrt(size)
                     / math.sqrt(batches))

    assert (int(said[2]), int(said[4])) == (half_width_pct(int(said[3])),
                                            half_width_pct(int(said[5])))


@pytest.mark.slow
def test_the_generator_writes_samples_of_the_same_shape(tmp_path: Path) -> None:
    """`python -m tests.docs_samples` for the `--quick` sample, into a copy of the pages: a real
    run whose output the checks accept, with the committed sample's columns and rows."""
    root = copy_of_the_samples(tmp_path)
    before = (root / QUICK.page).read_text(encoding="utf-8")
    docs_samples.write(root, (QUICK,), shots=False, say=lambda _: None)
    after = (root / QUICK.page).read_text(encoding="utf-8")
    assert after != before and problems(root) == []
    old, new = (docs_samples.table(docs_samples.split_block(
        docs_samples.block(QUICK.name).search(text)[1])[1]) for text in (before, after))
    assert docs_samples.column_names(new[0]) == docs_samples.column_names(old[0])
    assert [row[0] for row in new[1]] == [row[0] for row in old[1]]  # the same variants
    # the worker writes the fields the committed records have, no more and no fewer (the record
    # example is one of their run's, written by the same code)
    fresh, kept = ({r["variant_id"]: r for r in map(json.loads, (base / SAMPLES_DIR / "quick.jsonl")
                    .read_text(encoding="utf-8").splitlines())} for base in (root, REPO))
    assert list(fresh) == list(kept)
    for vid, record in kept.items():
        assert field_paths(fresh[vid]) == field_paths(record), vid

