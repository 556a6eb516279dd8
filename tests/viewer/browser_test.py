#!/usr/bin/env python3
"""gpumem view in a real browser: Debian's headless Chromium driven over the DevTools protocol.

For each bundled real trace, `gpumem view` writes the page, Chromium opens it from file:// (no
network), and the test checks what a user would see: no console error, no exception; the timeline
canvas drawn in the band colours; a real mouse click on the band of the known call site shows its
stack in the details panel; the flame graph and the leak table name the leak; the peak the page
shows is `gpumem report --json`'s. The section "What would lower the peak" shows
`gpumem advise --json`'s remedies (rank, change, peaks, fits, source, call site) in its words, and
a trace at segment level the reason advise refuses it. A screenshot of each page is saved under
BUILD/test-artifacts/view-<name>.png.

The protocol runs over --remote-debugging-pipe: JSON messages separated by NUL bytes, written to
the browser's fd 3 and read from its fd 4. Python's standard library only.

Usage: browser_test.py GPUMEM SOURCE_DIR BUILD_DIR. Exit 77 (ctest: skipped) without Chromium.
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
BROWSERS = ["chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"]


def find_browser():
    override = os.environ.get("GPUMEM_CHROMIUM")
    if override:
        return override if os.access(override, os.X_OK) else None
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    for path in ["/usr/lib/chromium/chromium-headless-shell", "/usr/lib/chromium/chromium"]:
        if os.access(path, os.X_OK):
            return path
    return None


class Browser:
    """One headless Chromium, one page, spoken to over the DevTools pipe."""

    def __init__(self, binary, profile):
        to_browser_read, self.to_browser = os.pipe()
        self.from_browser, from_browser_write = os.pipe()

        def child_fds():
            os.dup2(to_browser_read, 3)
            os.dup2(from_browser_write, 4)

        args = [binary, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--hide-scrollbars", "--force-device-scale-factor=1",
                "--user-data-dir=" + profile, "about:blank"]
        self.process = subprocess.Popen(args, preexec_fn=child_fds, pass_fds=(3, 4),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_read)
        os.close(from_browser_write)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def send(self, method, params=None, session=True):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        return self.wait_reply(self.next_id, method)

    def read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("no message from the browser")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed the pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def wait_reply(self, message_id, method, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            message = self.read_message(deadline)
            if message.get("id") == message_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_event(self, method, timeout=30):
        deadline = time.monotonic() + timeout
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            message = self.read_message(deadline)
            if message.get("method") == method:
                return message
            self.events.append(message)

    def open_page(self):
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.send("Target.attachToTarget",
                             {"targetId": target["targetId"], "flatten": True}, session=False)
        self.session = attached["sessionId"]
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"]:
            self.send(domain)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False})

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluate {expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def errors(self):
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append("exception: " + json.dumps(params.get("exceptionDetails", {}))[:400])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console error: " + json.dumps(params.get("args", []))[:400])
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                found.append("log error: " + params["entry"].get("text", "")[:400])
        return found

    def close(self):
        try:
            self.send("Browser.close", session=False)
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)


class Failures:
    def __init__(self):
        self.messages = []

    def check(self, condition, message):
        print(("ok   " if condition else "FAIL ") + message)
        if not condition:
            self.messages.append(message)


def report_json(gpumem, trace):
    run = subprocess.run([gpumem, "report", "--json", trace], capture_output=True, text=True,
                         check=True)
    return json.loads(run.stdout)["traces"][0]


def expected_leak(path):
    for line in open(path):
        if line.startswith("leaked "):
            return dict(field.split("=", 1) for field in line.split()[1:])
    raise ValueError(path + ": no 'leaked' line")


def load_page(browser, path):
    browser.events.clear()
    browser.send("Page.navigate", {"url": "file://" + os.path.abspath(path)})
    browser.wait_event("Page.loadEventFired")
    deadline = time.monotonic() + 20
    while not browser.evaluate("!!(window.gpumemView && window.gpumemView.ready)"):
        if time.monotonic() > deadline:
            raise TimeoutError("the page never said it was drawn: " + "; ".join(browser.errors()))
        time.sleep(0.05)


# Canvas pixels (of place 0's timeline) in each band colour, counted in the page.
COUNT_BAND_PIXELS = r"""
(() => {
  const canvas = document.querySelector('canvas.timeline');
  const ctx = canvas.getContext('2d');
  const pixels = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  const colours = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1',
                   '#ff9da7', '#9c755f', '#86bcb6', '#a0cbe8', '#ffbe7d', '#cdd3dd']
      .map(c => [1, 3, 5].map(i => parseInt(c.slice(i, i + 2), 16)));
  let band = 0, drawn = 0;
  for (let i = 0; i < pixels.length; i += 4) {
    if (pixels[i + 3] === 0) continue;
    drawn++;
    if (colours.some(c => Math.abs(c[0] - pixels[i]) + Math.abs(c[1] - pixels[i + 1]) +
                          Math.abs(c[2] - pixels[i + 2]) < 6)) band++;
  }
  return {band, drawn, total: pixels.length / 4};
})()
"""


def click(browser, x, y):
    for kind in ["mouseMoved", "mousePressed", "mouseReleased"]:
        params = {"type": kind, "x": x, "y": y}
        if kind != "mouseMoved":
            params.update({"button": "left", "clickCount": 1})
        browser.send("Input.dispatchMouseEvent", params)


def screenshot(browser, artifact):
    height = browser.evaluate("document.documentElement.scrollHeight")
    shot = browser.send("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": 1400, "height": min(int(height), 4000), "scale": 1}})
    with open(artifact, "wb") as out:
        out.write(base64.b64decode(shot["data"]))
    print("screenshot: " + artifact)


def check_page(browser, failures, gpumem, source, artifacts, name, site_text, leak_bytes,
               leak_site_text, flame_text):
    trace = os.path.join(source, "samples", "traces", name + ".trace")
    page = os.path.join(artifacts, "view-" + name + ".html")
    subprocess.run([gpumem, "view", trace, "-o", page], check=True)
    expected = report_json(gpumem, trace)
    peak_bytes = expected["peak"][0]["peak_bytes"]
    load_page(browser, page)
    print(f"== {name}")
    failures.check(not browser.errors(), "no console error or exception: " + "; ".join(browser.errors()))

    pixels = browser.evaluate(COUNT_BAND_PIXELS)
    failures.check(pixels["band"] > 0.05 * pixels["total"],
                   f"timeline drawn: {pixels['band']} of {pixels['total']} pixels in band colours")

    data_peak = browser.evaluate("gpumemView.data.places[0].peak.bytes")
    bucket_max = browser.evaluate("Math.max(...gpumemView.data.places[0].max)")
    failures.check(data_peak == peak_bytes and bucket_max == peak_bytes,
                   f"peak {data_peak}, highest bucket {bucket_max} = gpumem report's {peak_bytes}")
    mib = f"{peak_bytes / 1048576:.2f} MiB"
    text = browser.evaluate("document.body.innerText")
    failures.check(mib in text, f"page shows the peak {mib}")

    # A real click on the band of the known call site shows its stack.
    site = browser.evaluate(
        "gpumemView.data.places[0].bands.find(i => gpumemView.data.sites[i].frames.join('\\n')"
        f".includes({json.dumps(site_text)}))")
    failures.check(site is not None, f"a band of the call site {site_text}")
    if site is not None:
        point = browser.evaluate(f"gpumemView.bandPoint(0, {site})")
        failures.check(point is not None, f"band point of site {site}: {point}")
        if point:
            click(browser, point["x"], point["y"])
            details = browser.evaluate("document.querySelector('.details').innerText")
            failures.check(site_text in details,
                           f"click at ({point['x']:.0f}, {point['y']:.0f}) shows the stack with {site_text}")

    # Zoom with the wheel, pan by dragging, double-click back.
    before = browser.evaluate("gpumemView.view(0)")
    box = browser.evaluate("(() => { const r = document.querySelector('canvas.timeline')"
                           ".getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()")
    cx, cy = box[0] + box[2] / 2, box[1] + box[3] / 2
    browser.send("Input.dispatchMouseEvent",
                 {"type": "mouseWheel", "x": cx, "y": cy, "deltaX": 0, "deltaY": -400})
    zoomed = browser.evaluate("gpumemView.view(0)")
    failures.check(zoomed[1] - zoomed[0] < 0.8 * (before[1] - before[0]),
                   f"the wheel zooms in: {before} -> {zoomed}")
    for kind, x in [("mousePressed", cx), ("mouseMoved", cx - 60), ("mouseMoved", cx - 120),
                    ("mouseReleased", cx - 120)]:
        browser.send("Input.dispatchMouseEvent",
                     {"type": kind, "x": x, "y": cy, "button": "left", "clickCount": 1})
    panned = browser.evaluate("gpumemView.view(0)")
    failures.check(panned[0] > zoomed[0] and abs((panned[1] - panned[0]) - (zoomed[1] - zoomed[0])) < 1,
                   f"dragging left pans later in time: {zoomed} -> {panned}")
    browser.send("Input.dispatchMouseEvent", {"type": "mousePressed", "x": cx, "y": cy,
                                              "button": "left", "clickCount": 2})
    browser.send("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": cx, "y": cy,
                                              "button": "left", "clickCount": 2})
    failures.check(browser.evaluate("gpumemView.view(0)") == before, "double-click resets the view")

    # The leak: in the never-freed flame graph and the leak table.
    leaked = browser.evaluate("gpumemView.data.places[0].leaked.bytes")
    failures.check(leaked == leak_bytes, f"never freed {leaked} bytes = {leak_bytes}")
    flame = browser.evaluate(
        "Array.from(document.querySelectorAll('.flame-panel')[1].querySelectorAll('.node'))"
        ".map(n => n.textContent)")
    failures.check(any(flame_text in label for label in flame),
                   f"the never-freed flame graph has {flame_text}")
    leak_table = browser.evaluate("document.querySelector('.leaks table') ? "
                                  "document.querySelector('.leaks table').innerText : ''")
    failures.check(leak_site_text in leak_table and site_text in leak_table,
                   f"the leak table names {leak_site_text} at {site_text}")
    leak_mib = f"Never freed · {leak_bytes / 1048576:.2f} MiB"
    failures.check(leak_mib in browser.evaluate("document.body.innerText"), f"page shows '{leak_mib}'")
    failures.check(not browser.errors(), "still no error after the interactions")
    browser.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": 1, "y": 1})
    screenshot(browser, os.path.join(artifacts, "view-" + name + ".png"))


def check_torn(browser, failures, gpumem, source, artifacts):
    """A trace cut short renders what could be read, under a visible notice, and exits 2."""
    whole = open(os.path.join(source, "samples", "traces", "train_mlp-async-h100.trace"), "rb").read()
    torn = os.path.join(artifacts, "view-torn.trace")
    with open(torn, "wb") as out:
        out.write(whole[:len(whole) * 2 // 3])
    page = os.path.join(artifacts, "view-torn.html")
    run = subprocess.run([gpumem, "view", torn, "-o", page], capture_output=True, text=True)
    print("== torn trace")
    failures.check(run.returncode == 2 and run.stderr.count("gpumem: error: ") == 1,
                   f"exit {run.returncode} with one error line: {run.stderr.strip()}")
    load_page(browser, page)
    failures.check(not browser.errors(), "no console error or exception")
    notice = browser.evaluate("(document.querySelector('.notice.error') || {}).innerText || ''")
    failures.check("damaged" in notice and torn in notice, f"a visible notice: {notice[:120]}")
    failures.check(browser.evaluate(COUNT_BAND_PIXELS)["band"] > 0, "what was read is drawn")


def check_advice(browser, failures, gpumem, source, artifacts):
    """The section "What would lower the peak" shows gpumem advise's ranked list in its words; a
    trace at segment level shows why advise cannot answer."""
    traces = os.path.join(source, "samples", "traces")
    trace = os.path.join(traces, "train_mlp-async-h100.trace")
    page = os.path.join(artifacts, "view-advice.html")
    subprocess.run([gpumem, "view", "--device-memory", "80MiB", trace, "-o", page], check=True)
    advise = subprocess.run([gpumem, "advise", "--json", "--device-memory", "80MiB", trace],
                            capture_output=True, text=True)
    expected = json.loads(advise.stdout)
    load_page(browser, page)
    print("== advice")
    failures.check(not browser.errors(), "no console error or exception: " + "; ".join(browser.errors()))
    section = browser.evaluate("(document.querySelector('section.advice') || {}).innerText || ''")
    failures.check("What would lower the peak" in section, "the section is there")
    failures.check("DOES NOT FIT" in section and "80.00 MiB" in section,
                   "the verdict: the run does not fit 80.00 MiB")
    rows = browser.evaluate("Array.from(document.querySelectorAll('table.remedies tbody tr'))"
                            ".map(r => r.innerText)")
    failures.check(len(rows) == len(expected["remedies"]) > 0,
                   f"{len(rows)} remedies shown, advise ranks {len(expected['remedies'])}")
    for row, remedy in zip(rows, expected["remedies"]):
        words = [f"{remedy['rank']}.", remedy["change"], f"{remedy['peak'] / 1048576:.2f} MiB",
                 f"{remedy['saving'] / 1048576:.2f} MiB less",
                 "fits" if remedy["fits"] else "does not fit", remedy["source"]]
        if remedy.get("user_frame"):
            words += [f"{os.path.basename(remedy['user_frame']['file'])}:{remedy['user_frame']['line']}",
                      "via " + remedy["via"]]
        missing = [word for word in words if word not in row]
        failures.check(not missing, f"remedy {remedy['rank']} shows its figures and lines: missing {missing}")
    screenshot(browser, os.path.join(artifacts, "view-advice.png"))

    page = os.path.join(artifacts, "view-advice-segments.html")
    subprocess.run([gpumem, "view", os.path.join(traces, "train_mlp-default-h100.trace"), "-o", page],
                   check=True)
    load_page(browser, page)
    failures.check(not browser.errors(), "no console error or exception (segments)")
    section = browser.evaluate("(document.querySelector('section.advice') || {}).innerText || ''")
    failures.check("cannot answer" in section and "recorded under PyTorch's caching allocator" in section,
                   f"a trace at segment level shows the reason: {section[:160]}")


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    gpumem, source, build = sys.argv[1:]
    binary = find_browser()
    if binary is None:
        print("SKIPPED: no Chromium (apt-get install chromium-headless-shell)")
        return SKIP
    artifacts = os.path.join(build, "test-artifacts")
    os.makedirs(artifacts, exist_ok=True)
    failures = Failures()
    profile = tempfile.mkdtemp(prefix="gpumem-chromium-")
    browser = Browser(binary, profile)
    try:
        browser.open_page()
        # The sample's own answer (samples/leak_loop/expected.txt): "leaked bytes=N count=N
        # site=FUNCTION".
        leaked = expected_leak(os.path.join(source, "samples", "leak_loop", "expected.txt"))
        check_page(browser, failures, gpumem, source, artifacts, "leak_loop-h200",
                   "leak_loop.cc:26", int(leaked["bytes"]), leaked["site"], leaked["site"])
        mlp = report_json(gpumem, os.path.join(source, "samples", "traces",
                                               "train_mlp-async-h100.trace"))
        check_page(browser, failures, gpumem, source, artifacts, "train_mlp-async-h100",
                   "train_mlp.py", mlp["leaks"]["places"][0]["bytes"], "train_mlp.py", "train_step")
        check_torn(browser, failures, gpumem, source, artifacts)
        check_advice(browser, failures, gpumem, source, artifacts)
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)
    if failures.messages:
        print(f"{len(failures.messages)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
