"""Load on one real server (loopback only): N concurrent browser sessions through every page.

Reports the server's peak RSS, the median and worst page-update latency and failed sessions
(targets for the bundled model: peak RSS <= 1.2 GB, no failure, worst update <= 5 s). Then one
session types 200 distinct sentences of mixed lengths (BERT heads page, then the atlas) and the
growth of the server's RSS from the page's first opening is reported (target <= 200 MB: the
caches are bounded).

--proxy: the sessions go through Debian's nginx with deploy/nginx.conf in front of --replicas
servers (a school's set-up, docs/school-server.md); RSS and script runs are then of
every replica.

    python bench/bench_load.py [--sessions 8 (0: memory only)] [--rounds 2] [--sentences 200] [--shape 12x12x768]
                               [--proxy [--replicas 1]]
Needs Debian's chromium and the playwright package (requirements-dev.txt).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from pathlib import Path

from common import CLASS_WORDS as WORDS

from livetest import (
    CHROMIUM_FLAGS,
    cpu_seconds,
    low_priority_chromium,
    memory_mb,
    nginx_proxy,
    settle,
    streamlit_server,
)
from ui.pages import PAGES

TIMING_LOG = Path("/tmp/mha_bench_timing.tsv")


def server_times() -> list[float]:
    """Durations of every script run the server recorded (seconds)."""
    if not TIMING_LOG.exists():
        return []
    return [float(line.split("\t")[1]) for line in TIMING_LOG.read_text().splitlines() if "\t" in line]


steps: list[tuple[int, str, float]] = []  # (session, what, seconds)


async def session(browser, url: str, i: int, rounds: int, latencies: list, failures: list) -> None:
    context = await browser.new_context(viewport={"width": 1300, "height": 900})
    page = await context.new_page()
    try:
        await page.goto(url, wait_until="commit", timeout=180_000)  # 40 browsers on 2 cores: slow "load"
        await page.wait_for_selector('[data-testid="stSidebar"] textarea', timeout=300_000)
        latencies.append(await settle(page, 60_000))
        steps.append((i, "open", latencies[-1]))
        for r in range(rounds):
            text = f"The {WORDS[i % 12]} by the {WORDS[(i + r + 5) % 12]} was older than session {i} round {r}."
            box = page.locator('[data-testid="stSidebar"] textarea').first
            await box.fill(text)
            await box.press("Control+Enter")
            latencies.append(await settle(page, 60_000))
            steps.append((i, "type", latencies[-1]))
            if await box.input_value() != text:
                failures.append((i, "type", f"typed text not kept: {(await box.input_value())[:60]!r}"))
            for n, spec in enumerate(PAGES):
                await page.locator('[data-testid="stSidebarNav"] a').nth(n).click()
                latencies.append(await settle(page, 60_000))
                steps.append((i, spec.url_path, latencies[-1]))
                if await page.locator('[data-testid="stException"]').count():
                    error = await page.locator('[data-testid="stException"]').first.inner_text()
                    failures.append((i, spec.url_path, error[:300]))
            shown = await page.locator('[data-testid="stSidebar"] textarea').first.input_value()
            if shown != text:
                failures.append((i, "sidebar", f"text lost: shows {shown[:60]!r}, url {page.url[-80:]}"))
    except Exception as e:  # a session that cannot finish is a failure, not a crash of the bench
        failures.append((i, "session", repr(e)[:200]))
    finally:
        await context.close()


async def many_sentences(browser, url: str, n: int, pid: int) -> tuple[float, float, float]:
    """One session types n distinct sentences, each seen on the BERT heads page and then on the
    atlas; returns the server's RSS (MB) with the page open on the default sentence, after 10
    sentences and after n."""
    page = await browser.new_page(viewport={"width": 1300, "height": 900})
    await page.goto(f"{url}/bert_heads")
    await page.wait_for_selector('[data-testid="stSidebar"] textarea', timeout=120_000)
    await settle(page)
    box = page.locator('[data-testid="stSidebar"] textarea').first
    nav = page.locator('[data-testid="stSidebarNav"] a')
    heads, atlas = (next(n for n, p in enumerate(PAGES) if p.url_path == name) for name in ("bert_heads", "atlas"))
    opened, before = memory_mb(pid)[0], None
    for k in range(n):
        words = 5 + (k * 37) % 300  # 5 to 305 words: every cache tier gets entries
        text = " ".join(WORDS[(k * 7 + j) % 12] for j in range(words)) + f" {k}."
        await nav.nth(heads).click()
        await settle(page)
        await box.fill(text)
        await box.press("Control+Enter")
        await settle(page)
        await nav.nth(atlas).click()
        await settle(page)
        if k == 9:
            before = memory_mb(pid)[0]
        if (k + 1) % 50 == 0:
            print(f"  {k + 1} sentences: RSS {memory_mb(pid)[0]:.0f} MB", flush=True)
    return opened, before, memory_mb(pid)[0]


async def main_async(args) -> None:
    from playwright.async_api import async_playwright

    exe = low_priority_chromium()  # the browsers share the server's cores: measure the server
    TIMING_LOG.unlink(missing_ok=True)
    env = {"MHA_TIMING_LOG": str(TIMING_LOG)}
    if args.shape:  # a random BERT of that shape, made the default model of the server
        import tempfile

        from mha.models.bert import save_random_bert

        L, H, C = (int(v) for v in args.shape.split("x"))
        env |= {
            "MHA_MODEL_DIR": save_random_bert(tempfile.mkdtemp(prefix="mha_bert_"), L, H, C),
            "MHA_DEFAULT_MODEL": "local",
        }
        print(f"server model: a random BERT, {L} layers x {H} heads x {C} wide")
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(streamlit_server(env=env, timeout=120)) for _ in range(args.replicas)]
        proc = servers[0].process
        url = servers[0].url
        if args.proxy:
            url = stack.enter_context(nginx_proxy([s.url.removeprefix("http://") for s in servers])).url
            print(f"{args.replicas} replica(s) behind nginx (deploy/nginx.conf)")
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
            if args.sessions:  # 0: the memory part only
                latencies, failures = [], []
                t0, cpu0 = time.perf_counter(), sum(cpu_seconds(s.process.pid) for s in servers)
                await asyncio.gather(
                    *(session(browser, url, i, args.rounds, latencies, failures) for i in range(args.sessions))
                )
                wall = time.perf_counter() - t0
                cpu = sum(cpu_seconds(s.process.pid) for s in servers) - cpu0
                rss, peak = (sum(memory_mb(s.process.pid)[i] for s in servers) for i in (0, 1))
                if not latencies:
                    raise SystemExit(f"every session failed: {failures[:5]}")
                print(
                    f"{args.sessions} sessions x {args.rounds} rounds x {len(PAGES)} pages in {wall:.0f} s; "
                    f"server CPU {cpu:.0f} s ({cpu / wall:.2f} cores busy on average)"
                )
                print(
                    f"page updates seen in the browsers: {len(latencies)}, median "
                    f"{statistics.median(latencies):.2f} s, worst {max(latencies):.2f} s (the browsers share "
                    "the server's 2 cores)"
                )
                runs = server_times()
                print(
                    f"server-side script runs: {len(runs)}, median {statistics.median(runs):.2f} s, "
                    f"worst {max(runs):.2f} s (target <= 5)"
                )
                print(f"failed sessions: {len({f[0] for f in failures})} {failures[:8]}")
                slow = sorted(steps, key=lambda x: -x[2])[:5]
                print("slowest updates:", ", ".join(f"session {i} {what} {t:.1f} s" for i, what, t in slow))
                print(
                    f"server RSS now {rss:.0f} MB, peak {peak:.0f} MB (target <= 1200 per replica"
                    + (f"; the sum of {args.replicas} replicas)" if args.replicas > 1 else ")")
                )
            if args.sentences:
                opened, before, after = await many_sentences(browser, url, args.sentences, proc.pid)
                print(
                    f"{args.sentences} distinct sentences (5-305 words) on the BERT heads page and the atlas: "
                    f"RSS {opened:.0f} MB with the page open, {before:.0f} MB after 10, {after:.0f} MB after "
                    f"{args.sentences}: +{after - opened:.0f} MB in all (target <= 200), +{after - before:.0f} MB "
                    f"after the first 10; peak {memory_mb(proc.pid)[1]:.0f} MB"
                )
            await browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--proxy", action="store_true", help="through nginx with deploy/nginx.conf")
    parser.add_argument("--replicas", type=int, default=1, help="servers behind the proxy (with --proxy)")
    parser.add_argument("--shape", default="", help="LxHxC: serve a random BERT of that shape, e.g. 12x12x768")
    args = parser.parse_args()
    if args.replicas > 1 and (args.sentences or not args.proxy):
        parser.error("--replicas > 1 needs --proxy and --sentences 0 (that part reads one replica's RSS)")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
