"""Cold start, page by page: for every page, a fresh `streamlit run app.py` (nothing computed, no
model loaded) and a real browser opening that page first. Times from the start of the server to
a healthy server, to the model loaded (the page's loading message gone), and to the page's first
chart drawn; the budget is 3 s from the model loaded to the first chart. Whether the loading
message was shown. Median of --runs fresh servers per page.

    python bench/bench_coldstart.py [--runs 1] [--pages lesson bert_heads ...]

The lesson opens at step 5 (steps 1-4 draw their picture after an answer); "Why many heads"
draws nothing before a training run and the glossary has no chart: for them, the page itself.
"""

from __future__ import annotations

import argparse
import statistics
import time

from livetest import CHROMIUM_FLAGS, IDLE, chromium, streamlit_server
from ui.pages import DEFAULT, PAGES

BUDGET = 3.0
PICTURE = '[data-testid="stPlotlyChart"] .main-svg, [data-testid="stGraphVizChart"] svg'
NO_CHART = {"why_heads", "glossary"}


def once(browser, page_path: str) -> tuple[float, float, float, bool]:
    """(s to a healthy server, s to the model loaded, s to the first chart, loading message seen)."""
    t0 = time.perf_counter()
    with streamlit_server() as server:
        healthy = time.perf_counter() - t0
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        url = f"{server.url}/{page_path}" + ("?step=5" if page_path == "" else "")
        page.goto(url, wait_until="domcontentloaded")
        try:
            page.wait_for_selector("text=Loading all-MiniLM-L6-v2", timeout=30_000)
            seen = True
        except Exception:
            seen = False
        page.wait_for_selector("text=Loading all-MiniLM-L6-v2", state="detached", timeout=120_000)
        loaded = time.perf_counter() - t0
        if page_path in NO_CHART:
            page.wait_for_selector(IDLE, timeout=120_000)
        else:
            page.wait_for_selector(PICTURE, timeout=120_000)
        drawn = time.perf_counter() - t0
        page.close()
    return healthy, loaded, drawn, seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--pages", nargs="*", help="url paths (the lesson is 'lesson'); default: every page")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    paths = ["" if p is DEFAULT else p.url_path for p in PAGES]  # the default page's address is "/"
    names = {("" if p is DEFAULT else p.url_path): p.url_path for p in PAGES}
    if args.pages:
        paths = [p for p in paths if names[p] in args.pages]
    print(f"{'page':14s} healthy  model  first chart  chart - model  loading message   (s, median of {args.runs})")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        for path in paths:
            runs = [once(browser, path) for _ in range(args.runs)]
            healthy, loaded, drawn = (statistics.median(r[i] for r in runs) for i in range(3))
            late = drawn - loaded
            print(
                f"{names[path]:14s} {healthy:7.1f} {loaded:6.1f} {drawn:12.1f} {late:14.1f}  "
                f"{'shown' if all(r[3] for r in runs) else 'NOT always seen':9s} {'OK' if late <= BUDGET else 'OVER'}",
                flush=True,
            )
        browser.close()


if __name__ == "__main__":
    main()
