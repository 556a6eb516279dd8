#!/usr/bin/env python3
"""How long `gpumem view`'s page takes to be usable: headless Chromium opens PAGE from file:// and
the page's own clock (performance.now() when it finished drawing, window.gpumemView.drawnMs, which
counts from the start of navigation) is read back. Best of RUNS loads. Prints one line:
"load-to-drawn MS ms (best of RUNS)". Exit 77 without Chromium.

Usage: view_load_time.py PAGE [RUNS]
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "viewer"))
import browser_test  # noqa: E402  (the DevTools-pipe driver the browser test uses)


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    page = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) == 3 else 3
    binary = browser_test.find_browser()
    if binary is None:
        print("load-to-drawn: skipped (no Chromium)")
        return browser_test.SKIP
    profile = tempfile.mkdtemp(prefix="gpumem-chromium-")
    browser = browser_test.Browser(binary, profile)
    try:
        browser.open_page()
        times = []
        for _ in range(runs):
            browser_test.load_page(browser, page)
            errors = browser.errors()
            if errors:
                print("page errors: " + "; ".join(errors))
                return 1
            times.append(browser.evaluate("gpumemView.drawnMs"))
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)
    print(f"load-to-drawn {min(times):.0f} ms (best of {runs}; all: "
          + ", ".join(f"{t:.0f}" for t in times) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
