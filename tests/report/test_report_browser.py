"""The smoke report as a reader's browser meets it: headless Chromium opens ``index.html`` and every
stage page, and each must load without a console error, decode every image and have every local link
point at a file that exists (and every in-page link at an element that exists).

Chromium is Debian's ``chromium`` package (``.ci/run`` installs it when it can); without it these
tests skip and say so. It is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
JSON messages ending in a NUL byte, commands on fd 3, replies on fd 4), so no Python package is needed.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

# in the worker that builds the shared smoke report (tests/test_notebooks.py)
pytestmark = [pytest.mark.notebook]

LOAD_TIMEOUT_S = 90.0  # the machine may be busy: generous, but a hung page still fails

# Runs in the page once it has loaded: waits for every image to decode, then reports what the test
# checks. Links are resolved against the page, as a click would.
PAGE_CHECK = """
(async () => {
  const images = Array.from(document.images);
  await Promise.all(images.map(img => img.decode().catch(() => null)));
  const targets = Array.from(document.querySelectorAll("a[href], link[href], script[src], iframe[src], img[src]"))
    .map(el => el.getAttribute("href") ?? el.getAttribute("src"))
    .filter(raw => raw !== null && raw !== "" && !raw.startsWith("#"))
    .map(raw => ({raw, url: new URL(raw, document.baseURI).href}));
  const anchors = Array.from(document.querySelectorAll('a[href^="#"]')).map(a => a.getAttribute("href").slice(1));
  const missingAnchors = anchors.filter(id => id && !document.getElementById(id)
    && !document.getElementById(decodeURIComponent(id)));
  return {
    title: document.title,
    images: images.map(img => ({src: (img.getAttribute("src") || "").slice(0, 80), width: img.naturalWidth})),
    targets,
    missingAnchors,
  };
})()
"""


def chromium_binary() -> str | None:
    found = shutil.which("chromium")
    if found:
        return found
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


class Chromium:
    """A headless Chromium and one page in it, spoken to over the DevTools pipe."""

    def __init__(self, binary: str, profile_dir: Path):
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()
        # above any fd number the child could already hold, so that dup2 onto 3 and 4 clobbers nothing
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in (to_browser_read, from_browser_write)]
        os.close(to_browser_read), os.close(from_browser_write)

        def onto_3_and_4():
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.stderr_path = profile_dir / "chromium.stderr"
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                [
                    binary,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--disable-extensions",
                    "--no-first-run",
                    "--no-default-browser-check",
                    f"--user-data-dir={profile_dir / 'profile'}",
                    "--remote-debugging-pipe",
                    "about:blank",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                preexec_fn=onto_3_and_4,
                pass_fds=(3, 4),
            )
        for fd in high:
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=self.session)

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError(
                    f"Chromium exited; its stderr: {self.stderr_path.read_text(errors='replace')[-2000:]}"
                )
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(
        self, method: str, params: dict | None = None, session: str | None = None, timeout_s: float = 60.0
    ) -> dict:
        self._next_id += 1
        command = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            command["sessionId"] = session
        os.write(self._to_browser, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, event: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(e.get("method") == event and e.get("sessionId") == self.session for e in self.events):
            self.events.append(self._read_message(deadline))

    def open(self, page: Path) -> dict:
        """Load ``page``; return what PAGE_CHECK found, plus the page's console errors."""
        self.events.clear()
        self.send("Page.navigate", {"url": page.resolve().as_uri()}, session=self.session)
        self.wait_for("Page.loadEventFired", LOAD_TIMEOUT_S)
        result = self.send(
            "Runtime.evaluate",
            {"expression": PAGE_CHECK, "awaitPromise": True, "returnByValue": True},
            session=self.session,
            timeout_s=LOAD_TIMEOUT_S,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"the page check itself failed on {page.name}: {result['exceptionDetails']}")
        found = result["result"]["value"]
        found["console_errors"] = console_errors([e for e in self.events if e.get("sessionId") == self.session])
        return found

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout_s=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


def console_errors(events: list[dict]) -> list[str]:
    """Uncaught exceptions, ``console.error`` calls and the browser's own error entries (a resource
    that failed to load, a blocked request)."""
    errors = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            errors.append(f"exception: {details.get('exception', {}).get('description') or details.get('text')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append(
                "console."
                + params["type"]
                + ": "
                + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            )
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            errors.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())
    return errors


def problems(page: Path, found: dict) -> list[str]:
    """What is wrong with one loaded page, as readable lines."""
    out = [f"{page.name}: {error}" for error in found["console_errors"]]
    out += [f"{page.name}: image does not decode: {img['src']}..." for img in found["images"] if img["width"] <= 0]
    for target in found["targets"]:
        url = urlparse(target["url"])
        if url.scheme == "file" and not Path(unquote(url.path)).exists():
            out.append(f"{page.name}: link to a missing file: {target['raw']}")
    out += [f"{page.name}: in-page link to a missing element: #{anchor}" for anchor in found["missingAnchors"]]
    return out


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    binary = chromium_binary()
    if binary is None:
        pytest.skip(
            "headless Chromium is not installed (Debian package `chromium`, /usr/bin/chromium); "
            ".ci/run installs it with apt where it can"
        )
    browser = Chromium(binary, tmp_path_factory.mktemp("chromium"))
    yield browser
    browser.close()


def test_the_checks_catch_what_they_should(chromium, tmp_path):
    """A page with a console error, a broken image, a dead link and a dead anchor fails each check."""
    (tmp_path / "there.html").write_text("<p>here</p>")
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>bad</title></head><body>"
        '<img src="data:image/png;base64,AAAA"><a href="there.html">ok</a><a href="gone.html">dead</a>'
        '<a href="#nowhere">dead anchor</a><script>console.error("on purpose")</script></body></html>'
    )
    found = problems(page, chromium.open(page))
    assert any("console.error: on purpose" in p for p in found), found
    assert any("image does not decode" in p for p in found), found
    assert any("missing file: gone.html" in p for p in found) and not any("there.html" in p for p in found), found
    assert any("#nowhere" in p for p in found), found


def test_smoke_report_pages_load_cleanly_in_chromium(chromium, smoke_report):
    _, reports, _ = smoke_report
    status = json.loads((reports / "status.json").read_text())
    pages = [reports / "index.html"] + [reports / stage["html"] for stage in status["stages"]]
    assert all(page.exists() for page in pages), pages
    found_problems, images = [], 0
    for page in pages:
        found = chromium.open(page)
        assert found["title"], f"{page.name} has no title"
        images += len(found["images"])
        found_problems += problems(page, found)
    assert not found_problems, "\n".join(found_problems)
    assert images > 0  # the report has figures, and they were checked


# what a reader sees at 1,400 px: the layout and one screenshot of each page
LAYOUT = """
JSON.stringify({height: document.documentElement.scrollHeight, width: document.documentElement.scrollWidth,
  column: document.body.getBoundingClientRect().width,
  folded: Array.from(document.querySelectorAll("details.section")).filter(d => !d.open).length,
  answerTop: (document.querySelector(".answer") || {getBoundingClientRect: () => ({top: -1})})\
.getBoundingClientRect().top})
"""
FRONT_PAGE_MAX_PX = 5000  # the story and folded detail; the unfolded page was 6,344 px on the smoke report


def test_front_page_and_evaluation_at_1400_px(chromium, smoke_report, tmp_path):
    """The front page and notebook 04, screenshotted at 1,400 px wide: nothing wider than the window,
    the front page a reading column that opens on the answer, with its detail folded so the page stays
    short, and each screenshot a real PNG of the window."""
    import base64

    _, reports, _ = smoke_report
    chromium.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False},
        session=chromium.session,
    )
    try:
        seen = {}
        for name in ("index.html", "04_evaluation.html"):
            chromium.open(reports / name)
            seen[name] = json.loads(
                chromium.send(
                    "Runtime.evaluate", {"expression": LAYOUT, "returnByValue": True}, session=chromium.session
                )["result"]["value"]
            )
            shot = base64.b64decode(
                chromium.send("Page.captureScreenshot", {"format": "png"}, session=chromium.session)["data"]
            )
            (tmp_path / f"{name}.png").write_bytes(shot)
            assert shot[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(shot[16:20], "big") == 1400, name
            assert seen[name]["width"] <= 1400, f"{name} is wider than the window: {seen[name]}"
    finally:
        chromium.send("Emulation.clearDeviceMetricsOverride", session=chromium.session)
    front = seen["index.html"]
    assert front["column"] <= 1100, front  # a reading column, not the window's width
    assert 0 <= front["answerTop"] < 900, front  # the answer is above the fold
    assert front["folded"] >= 5, front  # the detail sections start folded
    assert front["height"] <= FRONT_PAGE_MAX_PX, front
