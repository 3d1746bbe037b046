"""The report's views inside a variant: its trace's top ops as shares of the untraced step, the
workers of a multi-worker variant (a straggler shows), and what measuring cost (observer and
profiler ratios). Records in bench's schema from tests/fixtures/report_runs.py; the real
MultiWorker run is in tests/test_report_browser.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from bench.report.derived import (
    describe_two_speeds,
    describe_warming_up,
    op_shares,
    two_speeds,
    warming_up,
    worker_rows,
)
from bench.report.detail_charts import measurement_cost_chart, top_ops_chart, workers_chart
from bench.report.narrative import summarize_run
from bench.report.runs import RunView, find_baselines, load_run
from bench.report.site import render_site
from bench.report.tables import COLUMNS, figures_row
from bench.report.terminal import format_versus_baseline, render_summary
from bench.timing import iterator_speeds, steady_state_start, turn_iterator
from tests.fixtures.report_runs import (
    cluster_record,
    ok_record,
    standard_records,
    variant,
    write_run,
)


@pytest.fixture
def run(tmp_path: Path) -> RunView:
    return load_run(write_run(tmp_path / "results", "views-20261122T051803Z",
                              [*standard_records(), cluster_record(straggler=1.3)]))


def test_top_ops_are_shares_of_the_traced_step_applied_to_the_untraced_step(run: RunView) -> None:
    rec = next(r for r in run.ok if r.variant_id == "default-r1-fit-float32-gb64")
    ops = op_shares(rec)
    assert [op["name"] for op in ops] == ["model/dense/MatMul", "adam/Sqrt"]
    assert ops[0]["share"] == pytest.approx(0.4)  # not the trace's 60% of op time
    # 40% of the untraced median step, not of the 1.2x slower traced step
    assert ops[0]["untraced_ms"] == pytest.approx(0.4 * rec.step_time.median * 1e3)
    figure = top_ops_chart(run).figure
    assert figure is not None
    heat = figure["data"][0]
    column = heat["x"].index("default-r1-fit-float32-gb64")
    assert heat["y"][0] == "model/dense/MatMul" and heat["z"][0][column] == pytest.approx(40.0)


# A user's CNN traced: op names that end alike for longer than a label (the layers differ
# near the front), as TensorFlow's nested scopes name them.
LONG_OP = ("StatefulPartitionedCall/my_cnn/conv_block_{}/conv2d/Conv2D/ReadVariableOp/"
           "gradient_tape/Conv2DBackpropFilter")


def colliding_ops_run(tmp_path: Path) -> RunView:
    """Four variants, each with its own five ops whose names collide when cut to a label."""
    records = standard_records()[:4]
    for k, rec in enumerate(records):
        traced = sum(rec["samples"]["traced"]) * 1e3
        rec["trace"]["analysis"]["top_ops"] = [
            {"name": LONG_OP.format(5 * k + i), "type": "Conv2DBackpropFilter",
             "occurrences": 10, "self_time_ms_total": (0.30 - 0.01 * (5 * k + i)) * traced}
            for i in range(5)]
    return load_run(write_run(tmp_path / "results", "ops-20261122T051803Z", records))


def test_top_ops_whose_cut_names_collide_keep_a_row_and_a_label_each(tmp_path: Path) -> None:
    """Plotly draws one row per distinct label: 20 ops cut to 14 alike labels were merged into
    fewer rows, with cells under another op's label. Each op keeps its own row, its label
    names the part where it differs, and the hover gives its full name."""
    run = colliding_ops_run(tmp_path)
    heat = top_ops_chart(run).figure["data"][0]
    names = [LONG_OP.format(n) for n in range(20)]  # in order of share, largest first
    assert len(heat["y"]) == len(set(heat["y"])) == 20
    assert all(len(label) <= 50 for label in heat["y"])
    for n, label in enumerate(heat["y"]):
        assert f"conv_block_{n}…" in label and label.endswith("Conv2DBackpropFilter")
        row = heat["z"][n]
        column = n // 5  # the variant whose op it is
        assert row[column] == pytest.approx(100 * (0.30 - 0.01 * n))
        assert [v is None for v in row] == [c != column for c in range(4)]
        assert heat["customdata"][n] == [names[n]] * 4
    assert "%{customdata}" in heat["hovertemplate"]


def test_op_labels_stay_distinct_where_a_cut_name_cannot_tell_them_apart() -> None:
    from bench.report.detail_charts import op_labels

    tail = "t" * 60
    names = ["a" * 30 + "x" + tail, "a" * 30 + "y" + tail, "short/op"]
    labels = op_labels(names)
    assert labels[0] == "…" + "a" * 11 + "x" + "t" * 12 + "…" + "t" * 24
    assert labels[1].startswith("…" + "a" * 11 + "y") and labels[2] == "short/op"
    # names that are each other's ends: where no label tells two apart, both are shown whole
    assert op_labels(["/" + tail, "///" + tail, "x///" + tail]) == [
        "/" + tail, "///" + tail, "x/…" + "t" * 24]


def test_the_top_ops_heatmap_draws_a_row_per_op_in_the_browser(tmp_path: Path) -> None:
    """What a reader sees: the heatmap's axis holds 20 labels, each op's cell in its row."""
    from tests.browser import need_chromium, open_page

    need_chromium()
    run = colliding_ops_run(tmp_path)
    render_site([run.path], tmp_path / "site")

    def rows(driver: Any) -> Any:
        return driver.execute_script(
            "const gd = document.getElementById('top-ops');"
            "return {categories: gd._fullLayout.yaxis._categories,"
            " ticks: Array.from(gd.querySelectorAll('.ytick text')).map(t => t.textContent)};")

    report = open_page(tmp_path / "site" / f"run-{run.name}.html", interact=rows)
    assert report.js_errors == [] and report.charts["top-ops"]
    seen = report.interaction
    assert len(seen["categories"]) == 20 and len(set(seen["ticks"])) == 20, seen


def test_a_straggler_shows_in_the_worker_chart_the_tables_and_the_summary(run: RunView,
                                                                          tmp_path: Path) -> None:
    rec = next(r for r in run.ok if r.strategy == "multi_worker_mirrored")
    rows = worker_rows(rec)
    assert [r["task"] for r in rows] == ["worker-0", "worker-1", "worker-2"]
    assert [round(r["vs_fastest"], 2) for r in rows] == [1.0, 1.02, 1.3]
    bars = workers_chart(run).figure["data"][0]
    assert bars["marker"]["color"][2] == "#d62728" and bars["marker"]["color"][1] != "#d62728"
    summary = "\n".join(summarize_run(run))
    assert "slowest worker-2: ×1.300 the fastest worker's median (a straggler" in summary
    assert "most compute: worker-2" in summary
    render_site([run.path], tmp_path / "site")
    html = (tmp_path / "site" / f"run-{run.name}.html").read_text()
    assert 'id="section-worker-tables"' in html and "× fastest" in html
    assert 'id="section-top-op-tables"' in html and "model/dense/MatMul" in html


def test_measurement_costs_name_the_variants_over_their_limits(run: RunView) -> None:
    summary = "\n".join(summarize_run(run))
    assert ("per-step observation slowed the steps (observed ÷ unobserved windows of the same "
            "turns, the whole 95% interval over 1.02×): "
            "multi_worker_mirrored-w3x1-ctl-float32-gb192 ×1.06") in summary
    assert "tracing slowed the traced steps" not in summary  # 1.2x is under the 1.5x limit
    observer, profiler = measurement_cost_chart(run).figure["data"]
    assert observer["base"] == 1.0
    index = observer["y"].index("multi_worker_mirrored-w3x1-ctl-float32-gb192")
    assert observer["x"][index] == pytest.approx(0.06)
    assert observer["marker"]["line"]["width"][index] == 2.5  # flagged: outlined
    assert profiler["customdata"][0] == pytest.approx(1.2)


def test_an_observer_ratio_within_the_windows_noise_is_not_flagged(tmp_path: Path) -> None:
    """Over 1.02x but not faster than 95% of the observed stretches: one noisy sample, no finding."""
    records = standard_records()
    records[0]["observer"] = {"status": "ok", "ratio": 1.08, "flagged": False}
    noisy = load_run(write_run(tmp_path, "noisy-20261122T051803Z", records))
    assert "per-step observation slowed" not in "\n".join(summarize_run(noisy))
    observer = measurement_cost_chart(noisy).figure["data"][0]
    index = observer["y"].index(records[0]["variant_id"])
    assert observer["customdata"][index] == pytest.approx(1.08)
    assert observer["marker"]["line"]["width"][index] == 0


def test_views_say_what_is_missing_without_traces_or_clusters(tmp_path: Path) -> None:
    records = standard_records()
    for rec in records:
        rec.pop("trace", None)
        rec.pop("observer", None)
    bare = load_run(write_run(tmp_path, "bare-20261122T051803Z", records))
    assert "has an analysed trace" in top_ops_chart(bare).note
    assert "per-worker" in workers_chart(bare).note
    assert not measurement_cost_chart(bare).rendered


def test_epoch_ends_that_waited_are_counted_in_the_summary(tmp_path: Path) -> None:
    records = standard_records()
    quick = {"steps": 64, "steps_s": 0.4, "end_s": 0.001, "finished": True, "waited": False}
    records[0]["measurement"] = {"epoch_ends": [
        quick, {"steps": 64, "steps_s": 0.4, "end_s": 0.2, "finished": True, "waited": True}]}
    records[1]["measurement"] = {"epoch_ends": [
        quick, quick, {"steps": 64, "steps_s": 0.5, "end_s": 5.0, "finished": False,
                       "waited": True}]}
    summary = "\n".join(summarize_run(load_run(write_run(tmp_path, "ends-20261122T051803Z",
                                                         records))))
    assert ("Epoch ends: 2 of 5 short epochs waited at their end for tf.data's autotune thread, "
            "50%-1000% of the epoch's own time (1 at least: still waiting at the cap); the others "
            "took 1 ms.") in summary
    assert "one iterator over all epochs (dataset.repeat() and steps_per_epoch)" in summary


def test_epoch_ends_that_never_waited_say_so_without_advice(tmp_path: Path) -> None:
    records = standard_records()
    records[0]["measurement"] = {"epoch_ends": [
        {"steps": 64, "steps_s": 0.4, "end_s": 0.002, "finished": True, "waited": False}]}
    summary = "\n".join(summarize_run(load_run(write_run(tmp_path, "calm-20261122T051803Z",
                                                         records))))
    assert "Epoch ends: 0 of 1 short epochs waited at their end; the others took 2 ms." in summary
    assert "repeat()" not in summary


def test_the_terminal_and_the_report_give_the_same_ratios_to_the_baseline(tmp_path: Path) -> None:
    """One rule for "vs baseline": a ratio for a variant of another strategy, none for the
    baseline's A/A twin (its ratio is the noise floor), wherever it shows."""
    records = standard_records()
    records[0]["variant"]["control"] = "baseline"
    twin = ok_record({**variant("default-r1-fit-float32-gb64-control"), "control": "twin"},
                     0.0041, seed=9)
    view = load_run(write_run(tmp_path / "results", "versus-20261127T051803Z", [*records, twin]))
    column = COLUMNS.index("vs baseline")
    terminal_bases = find_baselines(view.records)
    shown = {str(rec.variant_id): (
        figures_row(view, rec)[column].text.replace("–", "-"),
        format_versus_baseline(rec, terminal_bases.get(str(rec.variant_id)), view.noise_floor))
        for rec in view.ok}
    assert all(report == terminal for report, terminal in shown.values()), shown
    assert view.baselines["mirrored-r2-fit-float32-gb128"].variant_id == "default-r1-fit-float32-gb64"
    assert float(shown["mirrored-r2-fit-float32-gb128"][0].lstrip("~")) < 1.0
    assert shown["default-r1-fit-float32-gb64-control"] == ("-", "-")
    assert shown["default-r1-fit-float32-gb64"] == ("-", "-")


BATCH = ["default-r1-fit-float32-gb64", "mirrored-r1-fit-float32-gb64",
         "mirrored-r2-fit-float32-gb128", "default-r1-fit-mixed_bfloat16-gb64", "yardstick"]


def interleaved_batch(rng: np.random.Generator, machine: list[float], second: list[float],
                      sd: float) -> list[dict[str, Any]]:
    """Records of four variants and the yardstick, interleaved: one window of 16 steps a round,
    at the round's speed (`machine`) times its own noise (`sd`, log), the second variant's
    rounds also times `second`."""
    records = []
    for i, vid in enumerate(BATCH):
        own = second if vid == BATCH[1] else [1.0] * len(machine)
        step = 0.004 * (i + 1)
        windows = [[step * m * o * float(rng.lognormal(0.0, sd))] * 16
                   for m, o in zip(machine, own, strict=True)]
        record = ok_record(variant(vid), step)
        record["samples"]["timed"] = windows
        record["interleave"] = {"batch": BATCH}
        records.append(record)
    records[-1]["variant"]["control"] = "yardstick"
    return records


def test_only_a_variant_slower_than_the_machine_in_its_first_rounds_is_still_warming_up(
        tmp_path: Path) -> None:
    """An interleaved batch whose rounds all ran slow at first (the machine) has no variant
    still warming up; one that ran slower than its batch-mates in its first rounds has. Each
    record alone would name both: its own windows cannot tell the machine from a warm-up."""
    slow_start = [1.8] * 3 + [1.0] * 21
    records = interleaved_batch(np.random.default_rng(4), slow_start, slow_start, 0.08)
    for record in records:  # as the worker judges
        record["steady_state_start"] = steady_state_start(record["samples"]["timed"])
    names = BATCH[:4]
    run = load_run(write_run(tmp_path, "warming-20261122T051803Z", records))
    assert {r.variant_id for r in run.ok if r.steady_state_start} == set(BATCH)
    assert warming_up(run.records) == {names[1]: 3 * 16}
    note = describe_warming_up(warming_up(run.records))
    assert note is not None and note.endswith(f": {names[1]} (its first 48 timed steps).")
    assert note[0].upper() + note[1:] in summarize_run(run)
    console = Console(record=True, width=1000)
    render_summary(console, run.records)
    assert note in console.export_text()
    lone = load_run(write_run(tmp_path, "lone-20261122T051803Z", records[:2]))
    assert set(warming_up(lone.records)) == set(names[:2])  # no three to judge against


def test_iterators_in_two_modes_are_told_from_a_slow_spell_of_the_machine(tmp_path: Path) -> None:
    """Four fresh input iterators, three rounds each: a slow spell of the machine over one
    iterator's rounds slows every variant of the batch, which each record alone reads as two
    speeds; an iterator at half speed in one variant alone is two speeds."""
    machine = [1.0] * 6 + [1.5] * 3 + [1.0] * 3  # the spell: rounds 7-9, the third iterator's
    records = interleaved_batch(np.random.default_rng(5), machine,
                                [1.0] * 3 + [2.0] * 3 + [1.0] * 6, 0.03)
    for record in records:
        record["variant"]["measure"] = {"iterators": 4}
        window_s = [sum(w) for w in record["samples"]["timed"]]
        record["measurement"] = {"window_s": window_s, "window_steps": 16, "speeds": iterator_speeds(
            window_s, [turn_iterator(t, 4, 12) for t in range(12)], 64 * 16)}
    names = BATCH[:4]
    run = load_run(write_run(tmp_path, "modes-20261122T051803Z", records))
    assert {r.variant_id for r in run.ok if r.bimodal_speeds} == set(BATCH)  # each alone
    found = two_speeds(run.records)
    assert list(found) == [names[1]]
    assert found[names[1]].endswith(" in 1") and "in 3 of 4 iterators" in found[names[1]]
    note = describe_two_speeds(found)
    assert note is not None and note.endswith(f": {names[1]}: {found[names[1]]}.")
    assert note[0].upper() + note[1:] in summarize_run(run)
    console = Console(record=True, width=1000)
    render_summary(console, run.records)
    assert note in console.export_text()
    assert iterator_speeds([1.0, 1.1, 0.95, 1.05], [0, 1, 2, 3], 100)["bimodal"] is False


def test_one_epoch_end_that_waited_reads_one_share(tmp_path: Path) -> None:
    records = standard_records()
    records[0]["measurement"] = {"epoch_ends": [
        {"steps": 64, "steps_s": 0.4, "end_s": 0.002, "finished": True, "waited": False},
        {"steps": 64, "steps_s": 0.4, "end_s": 0.072, "finished": True, "waited": True}]}
    summary = "\n".join(summarize_run(load_run(write_run(tmp_path, "one-20261122T051803Z",
                                                         records))))
    assert ("1 of 2 short epochs waited at their end for tf.data's autotune thread, 18% of the "
            "epoch's own time; the others took 2 ms.") in summary


def test_the_breakdown_note_groups_the_variants_without_one_by_reason(tmp_path: Path) -> None:
    from bench.report.run_charts import breakdown_chart

    records = standard_records()
    assert breakdown_chart(load_run(write_run(tmp_path, "all-20261122T051803Z",
                                              records))).rendered
    for rec in records[:2]:
        rec.pop("trace", None)
    chart = breakdown_chart(load_run(write_run(tmp_path, "some-20261122T051803Z", records)))
    ids = [rec["variant"]["id"] for rec in records[:2]]
    assert chart.rendered and chart.note.startswith(
        f"No breakdown for: {ids[0]}, {ids[1]} (no trace captured)")
    for rec in records:
        rec.pop("trace", None)
    chart = breakdown_chart(load_run(write_run(tmp_path, "none-20261122T051803Z", records)))
    assert not chart.rendered and chart.note.startswith("No variant captured a trace")
