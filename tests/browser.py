"""Open a static HTML page from file:// in headless Debian Chromium and report what a person would see.

The HTML reports are meant to be opened straight from disk, offline, so a test that only parses the markup
cannot tell whether the charts actually render, whether a script throws, or whether the page quietly tries
to fetch something from a CDN. This helper loads the page in a real browser and answers those questions.

Selenium Manager (which downloads drivers from the internet) is never invoked: the driver and browser paths
are passed explicitly, and Chromium's host resolver is pointed at nothing so even a page that references a
remote URL cannot reach the network; such requests still show up in `external_requests`.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM = Path(os.environ.get("BENCH_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("BENCH_TEST_CHROMEDRIVER", "/usr/bin/chromedriver"))

# Schemes that never leave the machine; any other request URL is "external".
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:", "chrome:", "chrome-error:", "devtools:")

# Runs before any page script: records dialogs instead of blocking on them (a native alert would freeze
# the page until WebDriver dismissed it, and its text would be lost unless a command happened to trip on it).
_DIALOG_RECORDER = """
(() => {
  const own = (window.__dialogs = window.__dialogs || []);
  // Same-origin frames (e.g. a scripted about:blank iframe) report into the top page's list.
  const record = (m) => {
    let log = own;
    try { log = window.top.__dialogs || own; } catch (e) { /* cross-origin frame: keep its own */ }
    log.push(m === undefined ? "" : String(m));
  };
  window.alert = function (m) { record(m); };
  window.confirm = function (m) { record(m); return true; };
  window.prompt = function (m, d) { record(m); return d === undefined ? "" : String(d); };
})();
"""

# One round trip per poll: load state plus, per chart element, whether plotly has drawn its SVG yet.
_POLL = """
const out = {ready: document.readyState, charts: {}};
document.querySelectorAll(arguments[0]).forEach((el, i) => {
  out.charts[el.id || `${arguments[0]}[${i}]`] = el.querySelector("svg.main-svg") !== null;
});
return out;
"""

# The text of the page including what web components keep in their shadow roots.
_DEEP_TEXT = """
const parts = [];
const walk = (node) => {
  if (node.nodeType === Node.TEXT_NODE) { parts.push(node.textContent); return; }
  if (node.nodeName === "SCRIPT" || node.nodeName === "STYLE") return;
  if (node.shadowRoot) walk(node.shadowRoot);
  node.childNodes.forEach(walk);
};
if (document.body) walk(document.body);
return parts.join(" ").replace(/\\s+/g, " ");
"""

_FLAGS = (
    "--headless=new",
    "--no-sandbox",  # we run as root in containers
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    # Belt and braces for "never touch the network": no proxy from the environment, and every host name
    # resolves to nothing (requests are still attempted, so they still appear in the performance log).
    "--no-proxy-server",
)
_RESOLVE_NOTHING = "--host-resolver-rules=MAP * ~NOTFOUND"


@dataclass
class PageReport:
    """What a person opening the page would experience, in assertable form."""

    url: str
    title: str
    js_errors: list[str]  # SEVERE browser-log entries: uncaught exceptions, console.error, failed loads
    external_requests: list[str]  # request URLs with a non-local scheme, in order, de-duplicated
    charts: dict[str, bool]  # chart element id -> contains a rendered plotly SVG (svg.main-svg)
    text: str  # document.body.innerText
    dialogs: list[str]  # alert()/confirm()/prompt() messages, recorded instead of shown
    screenshot: Path | None  # the full-page PNG written, if one was asked for
    load_s: float | None = None  # navigation start to loaded with every chart drawn (None: not all drawn)
    interaction: Any = None  # what `interact` returned, when one was given


IN_CI = os.environ.get("CI") == "true"
MISSING_BROWSER = ("headless browser checks need /usr/bin/chromium, /usr/bin/chromedriver and selenium "
                   "(apt-get install chromium chromium-driver; pip install selenium)")


def skip_module_without_browser() -> None:
    """Call at module level: skip browser tests on a machine without Chromium, except in CI, where
    the `require_chromium` fixture turns the missing browser into a failure instead."""
    import pytest

    if not chromium_available() and not IN_CI:
        pytest.skip(MISSING_BROWSER, allow_module_level=True)


def require_chromium() -> None:
    """In CI a missing browser must not quietly turn browser checks into skips."""
    import pytest

    if not chromium_available():
        pytest.fail(f"CI=true but {CHROMIUM}, {CHROMEDRIVER} or selenium is missing", pytrace=False)


def need_chromium() -> None:
    """Call in one test of a module that runs without a browser too: skip it where Chromium is
    missing, except in CI, where that fails instead."""
    import pytest

    if not chromium_available():
        if IN_CI:
            require_chromium()
        pytest.skip(MISSING_BROWSER)


def chromium_available() -> bool:
    """True when Chromium, ChromeDriver and selenium are all present, so browser tests can run."""
    if not (_executable(CHROMIUM) and _executable(CHROMEDRIVER)):
        return False
    try:
        import selenium.webdriver  # noqa: F401
    except ImportError:
        return False
    return True


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def open_page(
    path: Path,
    *,
    chart_selector: str = "[data-chart]",
    screenshot: Path | None = None,
    wait_s: float = 20.0,
    width: int = 1400,
    interact: Callable[[Any], Any] | None = None,
) -> PageReport:
    """Load `path` from file:// in headless Chromium and report errors, network use, charts and text.

    Waits until the document has loaded and every `chart_selector` element holds a plotly SVG, or until
    `wait_s` passes (plotly renders asynchronously, so this polls rather than sleeping a fixed time).
    Charts still missing then are reported as False rather than raising, so a test can say which one.
    `interact`, given the loaded page's WebDriver, acts as a person would (clicks, typing) and returns
    what it saw, as `interaction`; the errors and dialogs it causes are reported with the rest.
    Raises FileNotFoundError for a missing page (Chromium would just show its error page, with no errors
    logged) and TimeoutError if the document itself has not finished loading within `wait_s`.
    """
    path = Path(path).resolve()
    if not path.is_file():  # Chromium would show its own error page and report no errors at all
        raise FileNotFoundError(path)
    return open_url(path.as_uri(), chart_selector=chart_selector, screenshot=screenshot, wait_s=wait_s,
                    width=width, interact=interact)


def open_url(
    url: str,
    *,
    chart_selector: str = "[data-chart]",
    screenshot: Path | None = None,
    wait_s: float = 20.0,
    width: int = 1400,
    height: int = 1000,
    wait_for_text: tuple[str, ...] = (),
    local_origins: tuple[str, ...] = (),
    interact: Callable[[Any], Any] | None = None,
) -> PageReport:
    """`open_page` for any URL, e.g. a server of ours on 127.0.0.1: requests that start with one of
    `local_origins` count as local. With `wait_for_text`, also waits until every one of those strings
    shows in the page's text, read through shadow roots too (TensorBoard's dashboards are web
    components), and `text` is that deep text; a screenshot is then of the viewport (`width` x `height`),
    since such apps scroll inside their own panes."""
    from selenium import webdriver
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in _FLAGS:
        options.add_argument(flag)
    # A server of ours on 127.0.0.1 stays reachable; every other host name still resolves to nothing.
    options.add_argument(_RESOLVE_NOTHING + (", EXCLUDE 127.0.0.1" if local_origins else ""))
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    options.unhandled_prompt_behavior = "dismiss and notify"  # a stray native dialog raises, we record it

    profile = tempfile.mkdtemp(prefix="bench-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    # An explicit driver path is what keeps Selenium Manager (and its downloads) out of the picture.
    service = Service(executable_path=str(CHROMEDRIVER))
    driver = None
    dialogs: list[str] = []
    try:
        driver = webdriver.Chrome(service=service, options=options)
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _DIALOG_RECORDER})
        driver.set_page_load_timeout(max(wait_s, 1.0))
        run = _DialogSafe(dialogs)
        started = time.monotonic()
        deadline = started + wait_s  # one budget for loading and rendering together
        load_s = None
        try:
            run(driver.get, url, retry=False)  # retrying a navigation would re-run the page's scripts
        except TimeoutException:
            pass  # judged below from document.readyState, like everything else
        state: dict[str, Any] = {"ready": "loading", "charts": {}}
        while True:
            try:
                state = run(driver.execute_script, _POLL, chart_selector)
            except TimeoutException:
                pass  # renderer still busy loading; chromedriver gave up waiting for it this time
            done = state["ready"] == "complete" and all(state["charts"].values())
            if done and wait_for_text:
                deep = run(driver.execute_script, _DEEP_TEXT) or ""
                done = all(t in deep for t in wait_for_text)
            if done:
                load_s = time.monotonic() - started
                break
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        if state["ready"] != "complete":
            # Every further WebDriver command would time out the same way, so there is no report to give.
            raise TimeoutError(f"{url} did not finish loading within {wait_s:g} s")

        interaction = run(interact, driver, retry=False) if interact is not None else None
        dialogs.extend(run(driver.execute_script, "return window.__dialogs || [];"))
        title = run(lambda: driver.title)
        text = run(driver.execute_script, _DEEP_TEXT if wait_for_text else
                   "return document.body ? document.body.innerText : '';")
        if screenshot is not None:
            screenshot = Path(screenshot)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(base64.b64decode(driver.get_screenshot_as_base64()) if wait_for_text
                                   else run(_full_page_png, driver))

        js_errors = [e["message"] for e in run(driver.get_log, "browser") if e.get("level") == "SEVERE"]
        external = _external_requests(run(driver.get_log, "performance"), local_origins)
        return PageReport(
            url=url,
            title=title,
            js_errors=js_errors,
            external_requests=external,
            charts=state["charts"],
            text=text,
            dialogs=dialogs,
            screenshot=screenshot,
            load_s=load_s,
            interaction=interaction,
        )
    finally:
        try:
            if driver is not None:
                driver.quit()
        finally:
            service.stop()  # no-op when quit() already stopped it; guarantees chromedriver is gone
            _rmtree(profile)


class _DialogSafe:
    """Call a WebDriver method, recording and retrying past native dialogs the JS override missed."""

    def __init__(self, dialogs: list[str]) -> None:
        self.dialogs = dialogs

    def __call__(self, fn: Any, *args: Any, retry: bool = True) -> Any:
        from selenium.common.exceptions import UnexpectedAlertPresentException

        for _ in range(50):
            try:
                return fn(*args)
            except UnexpectedAlertPresentException as exc:
                # "dismiss and notify" has already dismissed it; keep its text and carry on. (Dismissing
                # here ourselves would silently swallow the page's *next* dialog.)
                self.dialogs.append(exc.alert_text or "")
            if not retry:
                return None
        raise RuntimeError("page keeps opening dialogs faster than they can be dismissed")


def _full_page_png(driver: Any) -> bytes:
    """Capture the whole document, not just the viewport, so long reports are reviewable in one image."""
    metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
    size = metrics.get("cssContentSize") or metrics["contentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    return base64.b64decode(shot["data"])


def _external_requests(entries: list[dict[str, Any]], local_origins: tuple[str, ...] = ()) -> list[str]:
    """Request URLs from the performance log that would leave the machine, first occurrence order."""
    seen: dict[str, None] = {}
    for entry in entries:
        message = json.loads(entry["message"])["message"]
        method, params = message.get("method"), message.get("params", {})
        if method == "Network.requestWillBeSent":
            request_url = params["request"]["url"]
        elif method == "Network.webSocketCreated":
            request_url = params["url"]
        else:
            continue
        if not request_url.lower().startswith(LOCAL_SCHEMES + local_origins):
            seen.setdefault(request_url, None)
    return list(seen)


def _rmtree(path: str) -> None:
    """Remove the throwaway profile; Chromium's children may still be writing to it for a moment."""
    for _ in range(20):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            return
        time.sleep(0.1)
