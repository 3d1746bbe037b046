"""Accuracy bounds on real Fashion-MNIST: a reachable bound holds, an unreachable one is flagged."""

from __future__ import annotations

import pytest

from bench.data.arrays import DEBIAN_FASHION_MNIST_DIR
from tests.browser import IN_CI
from tests.conftest import FASHION_MNIST_CTL, BenchRun, run_in_fresh_dir
from tests.early import EarlyContext, early_fixture

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not DEBIAN_FASHION_MNIST_DIR.exists() and not IN_CI,
                                 reason="Debian package dataset-fashion-mnist is not installed")]


@pytest.fixture(scope="module", autouse=True)
def _require_fashion_mnist() -> None:
    """In CI a missing dataset must fail the accuracy tests, not quietly skip them."""
    if not DEBIAN_FASHION_MNIST_DIR.exists():
        pytest.fail(f"CI=true but {DEBIAN_FASHION_MNIST_DIR} is missing "
                    "(apt-get install dataset-fashion-mnist)", pytrace=False)


BODY = f"""
strategies = [{{ name = "STRATEGY", replicas = REPLICAS }}]
measure = {{ warmup_steps = 1, steps = 2, repeats = 1, trace_steps = 0, control = false }}

{FASHION_MNIST_CTL}
[check]
accuracy = {{ min = MIN, steps = 150 }}
"""


def start_reachable(context: EarlyContext) -> BenchRun:
    body = BODY.replace("MIN", "0.7").replace("STRATEGY", "mirrored").replace("REPLICAS", "2")
    return run_in_fresh_dir(context.tmp_path_factory, "accuracy_ok", body)


def start_unreachable(context: EarlyContext) -> BenchRun:
    body = BODY.replace("MIN", "0.99").replace("STRATEGY", "default").replace("REPLICAS", "1")
    return run_in_fresh_dir(context.tmp_path_factory, "accuracy_below", body)


reachable = early_fixture("accuracy_ok", start_reachable)
unreachable = early_fixture("accuracy_below", start_unreachable)


def report_page(run: BenchRun) -> str:
    reports = run.run_dir.parent.parent / "reports" / run.run_dir.name
    return next(reports.glob("run-*.html")).read_text()


def test_a_reachable_bound_holds_through_a_distributed_strategy(reachable: BenchRun) -> None:
    assert reachable.proc.returncode == 0, reachable.proc.stdout[-3000:]
    for rec in reachable.records:
        assert rec["status"] == "ok", rec["reason"]
        check = rec["checks"]["accuracy"]
        assert check["status"] == "ok", (rec["variant_id"], check)
        assert 0.7 <= check["accuracy"] < 0.95  # learnt, from 150 steps: no leak of test labels
        assert check["eval_examples"] == 10000 and check["eval_split"] == "test"
        assert check["eval_source"] == f"idx:{DEBIAN_FASHION_MNIST_DIR} (test, 10000 examples)"
        assert check["steps"] == 150 and check["batch"] == rec["variant"]["global_batch"]
    assert "accuracy ok (0." in reachable.proc.stdout and "≥ 0.7 on test)" in reachable.proc.stdout
    assert "Accuracy bound holds: 1 variant(s) reach at least 0.7" in report_page(reachable)


def test_an_unreachable_bound_is_flagged_everywhere(unreachable: BenchRun) -> None:
    assert unreachable.proc.returncode == 0, unreachable.proc.stdout[-3000:]  # marked, not failed
    (rec,) = unreachable.records
    check = rec["checks"]["accuracy"]
    assert rec["status"] == "ok" and check["status"] == "below", check
    assert check["accuracy"] < check["min"] == 0.99
    assert "accuracy: BELOW (0." in unreachable.proc.stdout
    page = report_page(unreachable)
    assert "Accuracy below the bound" in page and "&lt; 0.99 on the test split" in page
    assert "below (0." in page  # the figures table's accuracy column
