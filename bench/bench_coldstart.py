"""Cold start, page by page: for every page, a fresh `streamlit run app.py` (nothing computed, no
model loaded) and a real browser opening that page first. Seconds from the start of the server
to a healthy server and to the model loaded (the page's loading message gone); from the model
loaded to the page's first chart, its last chart and the page done (the script finished: every
number in it). The budget: every chart within 3 s of the model loaded. Whether the loading
message was shown. Median of --runs fresh servers per page.

    python bench/bench_coldstart.py [--runs 1] [--pages lesson bert_heads ...] [--after-landing S]

--after-landing S: the server's first visitor lands on the lesson and opens the page S seconds
later (what ui/warm.py computes in the background is ready or under way); times from the page
opened. The lesson opens at step 5 (steps 1-4 draw their picture after an answer); "Why many
heads" draws nothing before a training run and the glossary has no chart.
"""

from __future__ import annotations

import argparse
import statistics
import time

import common  # noqa: F401  (this checkout first on sys.path)

from livetest import CHROMIUM_FLAGS, IDLE, chromium, streamlit_server
from ui.pages import DEFAULT, PAGES

BUDGET = 3.0
PICTURE = '[data-testid="stPlotlyChart"] .main-svg, [data-testid="stGraphVizChart"] svg'
NO_CHART = {"why_heads", "glossary"}
LOADING = "Loading all-MiniLM-L6-v2"
# In the page, every 25 ms: when the loading message went away, when the first chart and the last
# new chart appeared (performance.now(), ms).
WATCH = f"""
window.__mha = {{seen: false, model: null, first: null, last: null, charts: 0}};
setInterval(() => {{
  const m = window.__mha, now = performance.now();
  const spin = [...document.querySelectorAll('[data-testid="stSpinner"]')]
    .some(e => e.textContent.includes("{LOADING}"));
  if (spin) m.seen = true; else if (m.seen && m.model === null) m.model = now;
  const n = document.querySelectorAll('{PICTURE}').length;
  if (n > m.charts) {{ m.charts = n; if (m.first === null) m.first = now; m.last = now; }}
}}, 25);
"""


def once(browser, page_path: str, landing_wait: float | None) -> dict[str, float | None]:
    """One fresh server, `page_path` opened first (or, with landing_wait, after the lesson was open
    that long): seconds to a healthy server and to the model loaded (from the server's start), and
    from the model loaded (or the page opened, after a landing) to the first chart, the last chart
    and the page done."""
    t0 = time.perf_counter()
    with streamlit_server() as server:
        healthy = time.perf_counter() - t0
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.add_init_script(WATCH)
        query = "?step=5" if page_path == "" else ""
        loaded, start, seen = None, None, None
        if landing_wait is not None:
            page.goto(f"{server.url}/?step=5", wait_until="domcontentloaded")
            page.wait_for_function("window.__mha.model !== null", timeout=120_000, polling=100)
            loaded = time.perf_counter() - t0
            seen = page.evaluate("window.__mha.seen")  # on the landing page: the one that waits for the model
            page.wait_for_selector(IDLE, timeout=120_000)
            time.sleep(landing_wait)
            page.goto(f"{server.url}/{page_path}{query}", wait_until="commit")
            start = page.evaluate("performance.now()")
        else:
            page.goto(f"{server.url}/{page_path}{query}", wait_until="domcontentloaded")
            page.wait_for_function("window.__mha.model !== null", timeout=120_000, polling=100)
            loaded = time.perf_counter() - t0
        page.wait_for_selector(IDLE, timeout=120_000)
        if page_path not in NO_CHART:
            page.wait_for_selector(PICTURE, timeout=120_000)
        done = page.evaluate("performance.now()")
        m = page.evaluate("window.__mha")
        page.close()
    origin = m["model"] if start is None else start
    after = lambda t: None if t is None else (t - origin) / 1000  # noqa: E731
    return {
        "healthy": healthy,
        "model": loaded,
        "first": after(m["first"]),
        "last": after(m["last"]),
        "done": after(done),
        "seen": m["seen"] if seen is None else seen,
    }


def cell(values: list[float | None], width: int) -> str:
    """The median of the values, or '-' when there is none (a page without a chart)."""
    values = [v for v in values if v is not None]
    return f"{statistics.median(values):{width}.1f}" if values else f"{'-':>{width}s}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--pages", nargs="*", help="url paths (the lesson is 'lesson'); default: every page")
    parser.add_argument(
        "--after-landing",
        type=float,
        metavar="S",
        help="open the lesson first and the page S seconds later (the server's first visitor moving on)",
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    paths = ["" if p is DEFAULT else p.url_path for p in PAGES]  # the default page's address is "/"
    names = {("" if p is DEFAULT else p.url_path): p.url_path for p in PAGES}
    if args.pages:
        paths = [p for p in paths if names[p] in args.pages]
    since = "page opened" if args.after_landing is not None else "model loaded"
    print(
        f"{'page':14s} healthy  model  first chart  last chart  page done  loading message"
        f"   (s; charts and done from the {since}; median of {args.runs})"
    )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        for path in paths:
            runs = [once(browser, path, args.after_landing) for _ in range(args.runs)]
            col = {k: [r[k] for r in runs] for k in runs[0]}
            last = [v for v in col["last"] if v is not None]
            ok = not last or statistics.median(last) <= BUDGET
            print(
                f"{names[path]:14s} {cell(col['healthy'], 7)} {cell(col['model'], 6)} {cell(col['first'], 12)} "
                f"{cell(col['last'], 11)} {cell(col['done'], 10)}  "
                f"{'shown' if all(col['seen']) else 'NOT always seen':9s} {'OK' if ok else 'OVER'}",
                flush=True,
            )
        browser.close()


if __name__ == "__main__":
    main()
