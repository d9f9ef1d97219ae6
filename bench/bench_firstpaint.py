"""First paint of a fresh visit: a new browser (empty cache) opens the BERT heads page of a server
that already has the model and the sentence's result. Median of --runs visits.

For each visit, from navigation start: the HTML, the first contentful paint, the page title, the
first chart drawn, every chart drawn and the script idle; and what came over the wire: the
frontend's scripts (count, MB), the rest of the HTTP responses, and the app's own messages on
the websocket (MB). Time to the first chart minus time to the title is what the charts cost.
Beside it, in turn, the same visit to a bare Streamlit page holding one small Plotly chart
(bench/bare_page.py, its own server; the issue's reference), and to that page at its own address
in a two-page app (bench/bare_pages.py at /bare, as the app's page is at /bert_heads): the ratio
of the first charts is what the app adds, against a page at the root and at a page's address.

With --profile N, N more visits of each (the page and the bare page) under Chromium's sampling CPU
profiler, stopped once the first chart is drawn: where the renderer's main thread spent the time
up to it (medians): in Plotly's module's JavaScript, in other JavaScript (the rest of Streamlit's
frontend), in the browser's own work (parsing, compiling, style, layout, paint, garbage
collection, and Playwright's polling) and idle (waiting between tasks: for the network or the
server). Printed beside it: how long those visits took to their first chart, and how much of
that time the profile's samples cover.

    python bench/bench_firstpaint.py [--runs 5] [--page bert_heads] [--tokens 512] [--profile 3]
Needs Debian's chromium and the playwright package (requirements-dev.txt).
"""

from __future__ import annotations

import argparse
import statistics
import time
from urllib.parse import quote

import numpy as np
from common import sentence

from livetest import CHROMIUM_FLAGS, IDLE, chromium, fresh_page, streamlit_server

TEXT = "The mole on his arm was not a mole but a rare insect."

CHARTS_DRAWN = """() => {
  const charts = document.querySelectorAll('[data-testid="stPlotlyChart"]');
  const drawn = [...charts].filter(c => c.querySelector('.main-svg')).length;
  return [charts.length, drawn];
}"""


def visit(browser, url: str, title: str) -> dict[str, float]:
    """One fresh visit (new context: nothing cached in the browser); times in seconds."""
    page, frames = fresh_page(browser)
    t0 = time.perf_counter()
    page.goto(url, wait_until="commit")
    marks = {}
    page.wait_for_selector(f"h1:has-text('{title}')", timeout=120_000)
    marks["title"] = time.perf_counter() - t0
    while True:
        total, drawn = page.evaluate(CHARTS_DRAWN)
        if drawn and "first chart" not in marks:
            marks["first chart"] = time.perf_counter() - t0
        if total and drawn == total and page.locator(IDLE).count():
            marks["every chart"] = time.perf_counter() - t0
            break
        if time.perf_counter() - t0 > 120:
            raise RuntimeError(f"charts not drawn: {drawn} of {total}")
        page.wait_for_timeout(20)
    marks["charts"] = float(total)
    timing = page.evaluate(
        """() => {
      const nav = performance.getEntriesByType('navigation')[0];
      const fcp = performance.getEntriesByName('first-contentful-paint')[0];
      const res = performance.getEntriesByType('resource');
      const js = res.filter(r => r.name.endsWith('.js'));
      return {html: nav.responseEnd / 1000, fcp: fcp ? fcp.startTime / 1000 : null,
              js_n: js.length, js_bytes: js.reduce((s, r) => s + r.encodedBodySize, 0),
              js_end: Math.max(0, ...js.map(r => r.responseEnd)) / 1000,
              other_bytes: res.filter(r => !r.name.endsWith('.js')).reduce((s, r) => s + r.encodedBodySize, 0)};
    }"""
    )
    page.context.close()
    return {
        **marks,
        "html": timing["html"],
        "first paint": timing["fcp"] or float("nan"),
        "scripts loaded": timing["js_end"],
        "scripts": timing["js_n"],
        "scripts MB": timing["js_bytes"] / 1e6,
        "other MB": timing["other_bytes"] / 1e6,
        "websocket MB": sum(frames) / 1e6,
    }


def profiled_visit(browser, url: str) -> dict[str, float]:
    """One fresh visit under the sampling CPU profiler, until the first chart is drawn: seconds of
    the main thread's samples in each of PLOTLY, FRONTEND, BROWSER and IDLE_TIME, their sum
    (COVERED) and the visit's time to its first chart (WALL)."""
    page, _frames = fresh_page(browser)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Profiler.enable")
    cdp.send("Profiler.setSamplingInterval", {"interval": 1000})  # microseconds
    cdp.send("Profiler.start")
    t0 = time.perf_counter()
    page.goto(url, wait_until="commit")
    while not page.evaluate(CHARTS_DRAWN)[1]:
        if time.perf_counter() - t0 > 120:
            raise RuntimeError("no chart drawn")
        page.wait_for_timeout(20)
    wall = time.perf_counter() - t0
    profile = cdp.send("Profiler.stop")["profile"]
    page.context.close()
    seconds = main_thread(profile)
    return {**seconds, COVERED: sum(seconds.values()), WALL: wall}


PLOTLY, FRONTEND = "Plotly's module (JS)", "other JavaScript"
BROWSER, IDLE_TIME = "the browser's own work", "idle"
COVERED, WALL = "covered by the profile", "first chart (this visit)"


def main_thread(profile: dict) -> dict[str, float]:
    """Seconds of a CPU profile's samples by where they ran: a stack with a frame of Plotly's chart
    module (PlotlyChart.*.js) is PLOTLY, any other script's is FRONTEND; (program) and (garbage
    collector) are BROWSER, (idle) is IDLE_TIME. A sample lasts until the next one (as in
    Chrome's DevTools); ValueError if no frame is Plotly's (its file renamed by an upgrade)."""
    nodes = {n["id"]: n for n in profile["nodes"]}
    parent = {c: n["id"] for n in profile["nodes"] for c in n.get("children", [])}
    where: dict[int, str] = {}
    for node_id in nodes:
        urls, name, i = [], nodes[node_id]["callFrame"]["functionName"], node_id
        while i in nodes:
            urls.append(nodes[i]["callFrame"]["url"])
            i = parent.get(i)
        if any("/PlotlyChart." in u for u in urls):
            where[node_id] = PLOTLY
        elif any(urls):
            where[node_id] = FRONTEND
        else:
            where[node_id] = IDLE_TIME if name == "(idle)" else BROWSER
    if PLOTLY not in where.values():
        raise ValueError("no frame of Plotly's module (PlotlyChart.*.js) in the profile")
    stamps = np.cumsum(profile["timeDeltas"])  # microseconds from the profile's start; can go back
    order = np.argsort(stamps, kind="stable")
    samples, stamps = np.asarray(profile["samples"])[order], stamps[order]
    seconds = dict.fromkeys((PLOTLY, FRONTEND, BROWSER, IDLE_TIME), 0.0)
    for sample, duration in zip(samples[:-1], np.diff(stamps)):
        seconds[where[int(sample)]] += float(duration) / 1e6
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--page", default="bert_heads")
    parser.add_argument("--title", default="Attention heads")
    parser.add_argument("--tokens", type=int, default=0, help="a text of this many tokens (default: a short sentence)")
    parser.add_argument("--profile", type=int, default=0, help="this many more visits of each under the CPU profiler")
    args = parser.parse_args()
    text = sentence(args.tokens, 1) if args.tokens else TEXT
    from playwright.sync_api import sync_playwright

    with (
        streamlit_server() as server,
        streamlit_server(script="bench/bare_page.py") as bare_server,
        streamlit_server(script="bench/bare_pages.py") as paged_server,
        sync_playwright() as p,
    ):
        url = f"{server.url}/{args.page}?text={quote(text)}"
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        visit(browser, url, args.title)  # the server loads the model and caches the result
        visit(browser, bare_server.url, "A bare page")
        visit(browser, f"{paged_server.url}/bare", "A bare page")
        visits, bare, paged = [], [], []
        for _ in range(args.runs):  # side by side: one of each, in turn
            visits.append(visit(browser, url, args.title))
            bare.append(visit(browser, bare_server.url, "A bare page"))
            paged.append(visit(browser, f"{paged_server.url}/bare", "A bare page"))
        profiled = [
            (profiled_visit(browser, url), profiled_visit(browser, bare_server.url)) for _ in range(args.profile)
        ]
        browser.close()
    length = f"{args.tokens} tokens" if args.tokens else "a 16-token sentence"
    print(f"{args.page}, {length}, fresh browser per visit, server warm: median of {args.runs} visits")
    print(f"  {'':<16} {'the page':>9} {'bare page':>10} {'at /bare':>10}")
    for name in visits[0]:
        values, ref, ref2 = ([v[name] for v in vs] for vs in (visits, bare, paged))
        unit = "" if name in ("charts", "scripts") or "MB" in name else " s"
        print(
            f"  {name:<16} {statistics.median(values):8.2f}{unit:<2} {statistics.median(ref):8.2f}{unit:<2}"
            f" {statistics.median(ref2):8.2f}{unit:<2}   (page min {min(values):.2f}, max {max(values):.2f})"
        )
    first = statistics.median(v["first chart"] for v in visits)
    first_bare = statistics.median(v["first chart"] for v in bare)
    first_paged = statistics.median(v["first chart"] for v in paged)
    print(
        f"first chart: {first:.2f} s against {first_bare:.2f} s for the bare page: {first / first_bare:.2f}x "
        f"(goal <= 1.2x); against {first_paged:.2f} s for it at a page's address (/bare): {first / first_paged:.2f}x"
    )
    if profiled:
        print(f"the main thread up to the first chart, under the CPU profiler: median of {args.profile} visits")
        print(f"  {'':<26} {'the page':>9} {'bare page':>10}")
        for name in (PLOTLY, FRONTEND, BROWSER, IDLE_TIME, COVERED, WALL):
            ours, ref = (statistics.median(v[k][name] for v in profiled) for k in (0, 1))
            print(f"  {name:<26} {ours:8.2f} s {ref:8.2f} s")


if __name__ == "__main__":
    main()
