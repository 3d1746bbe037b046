"""The docs site builds with warnings as errors, its links hold (the README's into it too), and
served as `nox -s docs` serves it, it works offline in a real browser: pages render, search finds,
nothing is requested beyond 127.0.0.1, and Ctrl-C stops the server.

The build is one `mkdocs build --strict` (about 2 s); the browser test opens four pages (slow).
Without MkDocs, or Chromium for the browser test, they skip, except under CI=true, where they fail.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import IN_CI, open_url, require_chromium, skip_module_without_browser
from tests.listeners import listeners

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts" / "docs"
# Material's notice that it reaches end of life (its successor, Zensical, is named in
# CONTRIBUTING.md); it is a banner, not a build warning.
QUIET = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def build(site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict`, as `nox -s docs` runs it, into `site`."""
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(site)], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=QUIET)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        message = "the docs tests need MkDocs and Material: pip install -e '.[docs]'"
        if IN_CI:
            pytest.fail(f"CI=true but {message}", pytrace=False)
        pytest.skip(message)
    site = tmp_path_factory.mktemp("site")
    done = build(site)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    return site


def test_the_site_builds_without_warnings(site: Path) -> None:
    for page in ("index.html", "guides/own-model.html", "reference/scenario.html",
                 "measuring/design.html", "search/search_index.json"):
        assert (site / page).is_file(), page
    # what a page shows outside the site, the site shows too: the example under its file's
    # name, and CONTRIBUTING.md itself where docs/development.md links to it
    own_model = (site / "guides/own-model.html").read_text(encoding="utf-8")
    assert 'class="filename">examples/own_model/scenario.toml<' in own_model
    guide = (site / "development.html").read_text(encoding="utf-8")
    assert "Adding a strategy" in guide and "CONTRIBUTING.md</a> at the" not in guide


# Material's bundle loads two scripts from unpkg, each only on a condition these pages never meet:
# a ResizeObserver polyfill for browsers without ResizeObserver, and mermaid for a page with a
# mermaid diagram (checked below: none has one). The browser test sees no request either way.
CONDITIONAL = ("resize-observer-polyfill", "mermaid@")


def test_nothing_is_fetched_from_the_network(site: Path) -> None:
    """No web font, script, stylesheet or image from another host, in any page or asset."""
    remote = re.compile(r"""(?:src|href)\s*=\s*["'](?:https?:)?//|@import\s+url\(["']?https?:|"""
                        r"""fonts\.googleapis|googletagmanager|unpkg\.com|cdn\.jsdelivr""")
    found = {}
    for path in site.rglob("*"):
        if path.suffix in (".html", ".css", ".js"):
            text = path.read_text(encoding="utf-8", errors="replace")
            for match in remote.finditer(text):
                line = text[max(0, match.start() - 60):match.end() + 60]
                if path.suffix == ".html" and "href" in match.group(0) and "<a " in line:
                    continue  # a link a reader may follow, not a request the page makes
                if path.suffix == ".js" and any(c in line for c in CONDITIONAL):
                    continue
                found.setdefault(str(path.relative_to(site)), []).append(match.group(0))
    assert found == {}
    assert [p.name for p in site.rglob("*.html") if 'class="mermaid"' in p.read_text()] == []


def test_the_readme_links_into_the_site(site: Path) -> None:
    """README.md and CONTRIBUTING.md are not pages of the site; their links into docs/ must still
    name a page and an anchor that exist."""
    broken = []
    for doc in ("README.md", "CONTRIBUTING.md"):
        text = (REPO / doc).read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            if not (REPO / path).exists():
                broken.append(f"{doc}: {target}")
            elif path.startswith("docs/") and path.endswith(".md") and anchor:
                html = (site / path.removeprefix("docs/")).with_suffix(".html")
                if f'id="{anchor}"' not in html.read_text(encoding="utf-8"):
                    broken.append(f"{doc}: {target}")
    assert broken == []


def test_a_broken_link_fails_the_build(tmp_path: Path, site: Path) -> None:
    """What the strict build promises: a link to a missing anchor is an error."""
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(REPO / "docs"), str(docs)], check=True)
    page = docs / "index.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[gone](guides/own-model.md#no-such)\n")
    (tmp_path / "mkdocs.yml").write_text(config.replace("docs_dir: docs", f"docs_dir: {docs}"))
    for name in ("CONTRIBUTING.md", "examples"):
        (tmp_path / name).symlink_to(REPO / name)
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=QUIET)
    assert done.returncode != 0 and "no-such" in done.stderr, done.stderr


@pytest.fixture
def server(site: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`python -m bench.cli.docs serve`, the server `nox -s docs` ends with, started with SIGINT
    ignored as a shell starts a background job: Ctrl-C must stop it all the same."""
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli.docs", "serve", str(site)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, line
        yield proc, url.group(0)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.mark.slow
def test_the_served_site_works_offline_in_a_browser(server: tuple[subprocess.Popen[str], str]
                                                    ) -> None:
    skip_module_without_browser()
    require_chromium()
    proc, url = server
    port = int(url.rsplit(":", 1)[1].strip("/"))
    assert listeners(proc.pid) == [("127.0.0.1", port)]
    origin = url.rstrip("/")
    pages = {"home": ("index.html", "which"), "guide": ("guides/own-model.html", "input_context"),
             "scenario-reference": ("reference/scenario.html", "settle_steps")}
    for name, (page, words) in pages.items():
        seen = open_url(url + page, screenshot=ARTIFACTS / f"{name}.png", local_origins=(origin,))
        assert seen.js_errors == [] and seen.external_requests == [], (page, seen)
        assert words in seen.text, page
    # The search box, given a query (Material's ?q= fills it and runs the search in its worker)
    found = open_url(url + "index.html?q=yardstick", screenshot=ARTIFACTS / "search.png",
                     local_origins=(origin,), wait_for_text=("matching document",))
    assert found.js_errors == [] and found.external_requests == [], found
    count = re.search(r"(\d+) matching documents?", found.text)
    assert count and int(count.group(1)) >= 1, found.text[:2000]
    assert "The measurement design" in found.text
    # Ctrl-C: the server says so, exits 0 and frees its port
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(10) == 0
    assert proc.stdout is not None and "stopping" in proc.stdout.read()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
