"""Cold start: from `streamlit run app.py` to the first page drawn in a real browser (the lesson's
first chart), median of N fresh servers, bundled model; and whether the page showed its loading
message while the model loaded.

    python bench/bench_coldstart.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from livetest import CHROMIUM_FLAGS, chromium, streamlit_server


def once(browser) -> tuple[float, float, bool]:
    """(seconds to a healthy server, seconds to the first chart, loading message seen)."""
    t0 = time.perf_counter()
    with streamlit_server() as server:
        healthy = time.perf_counter() - t0
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(server.url, wait_until="domcontentloaded")
        try:
            page.wait_for_selector("text=Loading all-MiniLM-L6-v2", timeout=30_000)
            seen = True
        except Exception:
            seen = False
        page.wait_for_selector('[data-testid="stPlotlyChart"]', timeout=120_000)
        drawn = time.perf_counter() - t0
        page.close()
    return healthy, drawn, seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        runs = [once(browser) for _ in range(args.runs)]
        browser.close()
    for n, (healthy, drawn, seen) in enumerate(runs, 1):
        print(
            f"run {n}: server healthy after {healthy:.1f} s, first chart drawn after {drawn:.1f} s, "
            f"loading message {'shown' if seen else 'NOT seen'}"
        )
    print(
        f"median: healthy {statistics.median(r[0] for r in runs):.1f} s, "
        f"first page drawn {statistics.median(r[1] for r in runs):.1f} s"
    )


if __name__ == "__main__":
    main()
