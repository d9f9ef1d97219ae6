"""A class at the recommended setup: two replicas behind nginx (deploy/nginx.conf) sharing
PostgreSQL, the class's students each in a real Chromium page on the lesson. The whole class presses
*Next* on one step at once: each student's wait from the click to the next step drawn in the
browser, median and worst, the servers' script runs meanwhile (ui.server.timed: a run's time on
the server, waiting for the interpreter included) and their CPU seconds per student; then the same
while a training run ("Why many heads", defaults) runs on one replica. Prints the measured rows
and the sizing table they give.

    python bench/bench_class.py [--sizes 10 20 40] [--db postgresql+psycopg://...]

The database (default $MHA_BENCH_PG, else mha_bench on the local PostgreSQL with role mha/mha, as
.ci/run makes the tests' one) must exist; the bench adds its classes to it.

The browsers run on the same 2 cores as the servers (at the lowest priority, nice 19): the waits
are an upper bound for a class whose browsers are its own laptops."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import common  # noqa: F401  (this checkout first on sys.path)

from livetest import (
    CHROMIUM_FLAGS,
    cpu_seconds,
    low_priority_chromium,
    nginx_proxy,
    settle,
    streamlit_server,
)

TARGET = 5.0  # s: the worst wait a class should see after pressing Next


async def seat_pages(browser, url: str, code: str, n: int, db: str) -> list:
    """n students seated in the class (the database's join, then each browser holding its seat's
    cookie as one that joined on the Class page would), each on the lesson at step 1."""
    from classroom import classes

    pages = []
    for i in range(n):
        seat = classes.join(code, f"Student {i + 1}", url=db)
        context = await browser.new_context(viewport={"width": 1280, "height": 720})
        await context.add_cookies([{"name": "mha_seat", "value": seat.token, "url": url}])
        pages.append(await context.new_page())
    for start in range(0, n, 10):  # a class arrives over a minute, not in one millisecond: ten at a time
        batch = pages[start : start + 10]
        await asyncio.gather(*(p.goto(url + "/", timeout=300_000) for p in batch))
        await asyncio.gather(*(p.wait_for_selector("text=Step 1 of 8", timeout=300_000) for p in batch))
    await asyncio.gather(*(settle(p) for p in pages))
    return pages


TIMING_LOG = Path(tempfile.gettempdir()) / "mha_bench_class_runs.tsv"  # every script run's seconds (ui.server.timed)


async def next_at_once(pages, step: int, servers) -> tuple[list[float], float, list[float]]:
    """Every page presses Next at once: each one's seconds until step `step` is drawn and its run
    has ended; the servers' CPU seconds per student; the servers' script runs meanwhile (s)."""
    cpu0 = sum(cpu_seconds(s.process.pid) for s in servers)
    seen = len(TIMING_LOG.read_text().splitlines()) if TIMING_LOG.exists() else 0

    async def one(page) -> float:
        t0 = time.perf_counter()
        await page.get_by_role("button", name="Next →").click()
        try:
            await page.wait_for_selector(f"text=Step {step} of 8", timeout=120_000)
        except Exception:
            shot = Path(tempfile.gettempdir()) / f"mha_bench_class_stuck_{step}_{id(page)}.png"
            await page.screenshot(path=str(shot), full_page=True)
            raise AssertionError(f"a student's page did not show step {step}: {shot}, {page.url}") from None
        await settle(page)
        return time.perf_counter() - t0

    waits = await asyncio.gather(*(one(p) for p in pages))
    cpu = (sum(cpu_seconds(s.process.pid) for s in servers) - cpu0) / len(pages)
    runs = [float(line.split("\t")[1]) for line in TIMING_LOG.read_text().splitlines()[seen:]]
    return list(waits), cpu, runs


async def run(sizes: list[int], db: str) -> list[dict]:
    from playwright.async_api import async_playwright

    from classroom import classes
    from mha.lesson.examples import DEFAULT_TEXT

    rows = []
    TIMING_LOG.unlink(missing_ok=True)
    env = {"MHA_CLASS_DB": db, "MHA_WARM": "1", "MHA_TIMING_LOG": str(TIMING_LOG)}
    with streamlit_server(env, timeout=180) as a, streamlit_server(env, timeout=180) as b:
        servers = [a, b]
        with nginx_proxy([s.url.removeprefix("http://") for s in servers]) as proxy:
            async with async_playwright() as p:
                browser = await p.chromium.launch(executable_path=low_priority_chromium(), args=CHROMIUM_FLAGS)
                for n in sizes:
                    code, _teacher = classes.start_class("all-MiniLM-L6-v2", DEFAULT_TEXT, 1, url=db)
                    pages = await seat_pages(browser, proxy.url, code, n, db)
                    waits, cpu, runs = await next_at_once(pages, 2, servers)
                    rows.append({"students": n, "training": "no", "waits": waits, "cpu": cpu, "runs": runs})
                    print(row(rows[-1]), flush=True)
                    # a training run on one replica meanwhile (a new seed: not a kept result)
                    trainer = await (await browser.new_context()).new_page()
                    await trainer.goto(f"{proxy.url}/why_heads?why_seed={100 + n}")
                    await trainer.get_by_role("button", name="Train the five models").click()
                    await trainer.wait_for_selector("text=still training", timeout=120_000)
                    waits, cpu, runs = await next_at_once(pages, 3, servers)
                    rows.append({"students": n, "training": "yes", "waits": waits, "cpu": cpu, "runs": runs})
                    print(row(rows[-1]), flush=True)
                    await trainer.wait_for_selector("text=Result on 2,048 new sequences", timeout=300_000)
                    for page in [*pages, trainer]:
                        await page.context.close()
                await browser.close()
    return rows


def row(r: dict) -> str:
    """One measured row of the table."""
    w, runs = sorted(r["waits"]), sorted(r["runs"]) or [float("nan")]
    return (
        f"| {r['students']} | {r['training']} | {statistics.median(w):.2f} s | {w[-1]:.2f} s | "
        f"{statistics.median(runs):.2f} s | {runs[-1]:.2f} s | {r['cpu']:.3f} s |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 40])
    parser.add_argument(
        "--db", default=os.environ.get("MHA_TEST_PG", "postgresql+psycopg://mha:mha@127.0.0.1:5432/mha_test")
    )
    args = parser.parse_args()
    rows = asyncio.run(run(args.sizes, args.db))
    print(f"{os.cpu_count()} cores here, 2 replicas behind nginx, PostgreSQL; the whole class presses Next at once")
    print(
        "| students | a training run meanwhile | median wait | worst wait | median script run | longest script run "
        "| server CPU per student |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(row(r))
    quiet = [r for r in rows if r["training"] == "no"]
    cpu = max(r["cpu"] for r in quiet)  # the most any class size cost per student
    print(
        f"\nSizing (the worst wait about students x {cpu:.3f} CPU s / cores; target {TARGET:.0f} s; "
        "a replica of 2 cores; one more core per training run at a time):"
    )
    print("| class | cores needed | replicas of 2 cores |")
    print("|---|---|---|")
    for n in (20, 40, 80, 160):
        cores = max(1, math.ceil(n * cpu / TARGET))
        print(f"| {n} | {cores} | {math.ceil(cores / 2)} |")


if __name__ == "__main__":
    main()
