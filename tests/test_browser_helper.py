"""Tests of tests/browser.py itself, on tiny hand-written pages, so report tests can trust what it says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import open_page, require_chromium, skip_module_without_browser

skip_module_without_browser()
_require_chromium = pytest.fixture(autouse=True)(require_chromium)


def _page(tmp_path: Path, body: str, head: str = "") -> Path:
    page = tmp_path / "page.html"
    page.write_text(f"<!doctype html><html><head><title>t</title>{head}</head><body>{body}</body></html>")
    return page


def test_uncaught_exception_is_a_js_error(tmp_path: Path) -> None:
    report = open_page(_page(tmp_path, "<p>hello</p><script>undefinedFunction()</script>"), wait_s=2)

    assert any("undefinedFunction" in e for e in report.js_errors), report.js_errors
    assert report.text.strip() == "hello"
    assert report.title == "t"
    assert report.external_requests == []


def test_missing_local_script_is_a_js_error(tmp_path: Path) -> None:
    report = open_page(_page(tmp_path, "<p>x</p>", head='<script src="missing.js"></script>'), wait_s=2)

    assert any("missing.js" in e for e in report.js_errors), report.js_errors
    assert report.external_requests == []  # a file:// load is local even when it fails


def test_remote_resource_is_an_external_request(tmp_path: Path) -> None:
    report = open_page(_page(tmp_path, '<img src="https://example.invalid/x.png">'), wait_s=2)

    assert "https://example.invalid/x.png" in report.external_requests


def test_alert_is_recorded_not_blocking(tmp_path: Path) -> None:
    report = open_page(_page(tmp_path, '<p>after</p><script>alert("hi")</script>'), wait_s=2)

    assert report.dialogs == ["hi"]
    assert report.js_errors == []
    assert report.text.strip() == "after"  # the page went on rendering past the dialog


def test_charts_rendered_late_are_waited_for_and_missing_ones_reported(tmp_path: Path) -> None:
    body = """
    <div data-chart id="c1"></div>
    <div data-chart id="c2"></div>
    <script>
      setTimeout(() => {
        document.getElementById("c1").innerHTML = '<svg class="main-svg" width="50" height="50"></svg>';
      }, 300);
    </script>
    """
    shot = tmp_path / "shots" / "nested" / "page.png"

    report = open_page(_page(tmp_path, body), wait_s=2, screenshot=shot)

    assert report.charts == {"c1": True, "c2": False}
    assert report.screenshot == shot
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
