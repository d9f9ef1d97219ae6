"""The lesson and the Subspaces page as a learner meets them, in a real browser: from a click to the
page drawn (the script idle and every chart drawn), for the lesson's sentence on a warm server.

Per run, a fresh browser page opens the lesson at step 1, answers step 1's question where it asks
one first (the chart it reveals: the page's first chart, so Plotly's JS loads then) and picks
another token, clicks Next through every step (timing each), then switches to Subspaces in the
sidebar. Medians over --runs; budget 1.5 s each.

    python bench/bench_browser_lesson.py [--runs 3]
Needs Debian's chromium and the playwright package (requirements-dev.txt).
"""

from __future__ import annotations

import argparse
import statistics
import time
from urllib.parse import quote

import common  # noqa: F401  (this checkout first on sys.path)

from livetest import CHROMIUM_FLAGS, IDLE, chromium, fresh_page, streamlit_server, wait_idle

TEXT = "The mole on his arm was not a mole but a rare insect."
BUDGET = 1.5
DRAWN = """() => {
  const charts = document.querySelectorAll('[data-testid="stPlotlyChart"]');
  return [...charts].every(c => c.querySelector('.main-svg'));
}"""


def settled(page, start: float, text: str | None = None, charts: int = 0) -> float:
    """Seconds from `start` until `text` (if given) and at least `charts` charts are shown, the
    script is idle and every chart drawn (polled every 20 ms)."""
    if text:
        page.wait_for_selector(f"text={text}", timeout=120_000)
    count = '[data-testid="stPlotlyChart"]'
    while not (page.locator(IDLE).count() and page.locator(count).count() >= charts and page.evaluate(DRAWN)):
        if time.perf_counter() - start > 120:
            raise RuntimeError("the page was not drawn in 120 s")
        page.wait_for_timeout(20)
    return time.perf_counter() - start


def one_run(browser, url: str) -> dict[str, float]:
    page, _ = fresh_page(browser)
    page.goto(f"{url}/?step=1&text={quote(TEXT)}")
    wait_idle(page, 120_000)
    settled(page, time.perf_counter(), "Step 1 of")
    times = {}
    steps = int(page.locator("text=/Step 1 of \\d+/").inner_text().split(" of ")[1].split(":")[0])
    first = page.get_by_text("2 or 3 words")  # step 1 asks before it draws (a lesson without it: nothing to click)
    if first.count():
        t0 = time.perf_counter()
        first.first.click()
        times["step 1: answer -> chart"] = settled(page, t0, charts=1)  # a fresh page loads Plotly's JS here
        page.wait_for_timeout(1000)  # the answer has scrolled the page to its feedback (ui.scroll_here)
        picker = page.get_by_test_id("stSelectbox").filter(has_text="Token to follow")
        picker.scroll_into_view_if_needed()  # back up to the picker: a picker opened while the page
        page.wait_for_timeout(300)  # still scrolls closes again
        t0 = time.perf_counter()
        picker.click()
        page.get_by_role("option").nth(5).click()
        times["step 1: another token"] = settled(page, t0)  # its own question, asked before any chart
    for step in range(2, steps + 1):
        t0 = time.perf_counter()
        page.get_by_role("button", name="Next →").click()
        times[f"step {step}"] = settled(page, t0, f"Step {step} of {steps}")
    t0 = time.perf_counter()
    page.locator('[data-testid="stSidebarNav"] a', has_text="Subspaces").click()
    times["Subspaces from the lesson"] = settled(page, t0, "The weights themselves", charts=2)
    page.context.close()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    exe = chromium()
    if exe is None:
        raise SystemExit("needs Debian's chromium (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with streamlit_server() as live, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        one_run(browser, live.url)  # warm-up: the model, the sentence's results, the frontend
        runs = [one_run(browser, live.url) for _ in range(args.runs)]
        browser.close()
    print(f"{'click -> drawn':34s} median s  (of {args.runs})  min - max")
    for name in runs[0]:
        got = [r[name] for r in runs]
        median = statistics.median(got)
        print(f"{name:34s} {median:8.2f}  {'OK  ' if median < BUDGET else 'OVER'}  {min(got):.2f} - {max(got):.2f}")


if __name__ == "__main__":
    main()
