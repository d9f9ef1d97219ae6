"""What one student costs a replica, measured through the proxy, and the sizing rule it implies.

One replica of the app (the bundled model, warmed) behind Debian's nginx with deploy/nginx.conf,
real Chromium sessions through the proxy. The server's own CPU time (user + system, /proc) and
RSS are read around each step:

- CPU per interaction: one session, --rounds times: a new sentence typed on the BERT heads page,
  then every page opened in turn (each a script run on that sentence). CPU seconds per update,
  by page; the median and mean over all updates; the CPU an idle server uses.
- CPU per training run: "Why many heads" at its default settings (1,000 steps), trained once.
- Memory per session: --sessions sessions opened one after another and left open, each on the
  BERT heads page with its own sentence; the server's RSS after every 5; MB per extra session is
  the slope of RSS against sessions from the 10th on (the shared result store, at most
  MHA_CACHE_MB, is full by then: what grows after it is the sessions' own state).

The rule printed at the end: a class that acts at once (the teacher says "now open the next
page") queues students x CPU per update on a replica's cores, so the last student waits about
students x cpu / cores seconds (if the replica's script runs use its cores in parallel); with the
heaviest page's CPU, the students per replica for a --wait second wait, the replicas and cores
for --class-size students, and the memory that many sessions take.

    python bench/bench_sizing.py [--rounds 3] [--sessions 40] [--wait 5] [--class-size 40]
Needs Debian's chromium and nginx and the playwright package (requirements-dev.txt).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from pathlib import Path

from common import CLASS_WORDS as WORDS
from scipy import stats

from livetest import (
    CHROMIUM_FLAGS,
    cpu_seconds,
    low_priority_chromium,
    memory_mb,
    nginx_proxy,
    streamlit_server,
    wait_idle,
)
from ui.pages import PAGES

BOX = '[data-testid="stSidebar"] textarea'
NAV = '[data-testid="stSidebarNav"] a'


def sentence(i: int) -> str:
    """A distinct sentence of 9-21 words per i (what a class types)."""
    words = " ".join(WORDS[(i * 5 + j) % 12] for j in range(2 + i % 7))
    return f"The {WORDS[i % 12]} near the {WORDS[(i + 3) % 12]} watched {words} until morning {i}."


def warmed(log: Path, timeout: float = 180) -> None:
    """Wait until the server's log says its background warm-up (ui/warm.py) is done."""
    end = time.time() + timeout
    while "mha: warmed" not in log.read_text():
        if time.time() > end:
            raise RuntimeError("the server did not finish warming up")
        time.sleep(0.5)


def opened(page, url: str, timeout: float = 90_000) -> None:
    """`page` at `url`, its sidebar drawn and its run finished."""
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector(BOX, timeout=120_000)
    wait_idle(page, timeout)


def measured(pid: int, action) -> tuple[float, float]:
    """(server CPU seconds, wall seconds) of action() and the script run it started."""
    cpu, t0 = cpu_seconds(pid), time.perf_counter()
    action()
    return cpu_seconds(pid) - cpu, time.perf_counter() - t0


def interactions(page, pid: int, rounds: int) -> dict[str, list[float]]:
    """CPU seconds of each update, by page ("type": a new sentence on the BERT heads page)."""
    heads = next(n for n, p in enumerate(PAGES) if p.url_path == "bert_heads")
    cpu: dict[str, list[float]] = {}
    for r in range(rounds):
        page.locator(NAV).nth(heads).click()
        wait_idle(page)
        box = page.locator(BOX).first
        box.fill(sentence(1000 + r))
        typed, _ = measured(pid, lambda box=box: (box.press("Control+Enter"), wait_idle(page)))
        cpu.setdefault("type", []).append(typed)
        for n, spec in enumerate(PAGES):
            if spec.url_path == "bert_heads":
                continue
            used, _ = measured(pid, lambda n=n: (page.locator(NAV).nth(n).click(), wait_idle(page)))
            cpu.setdefault(spec.url_path, []).append(used)
    return cpu


def training(page, url: str, pid: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one training run on "Why many heads" at its defaults."""
    opened(page, f"{url}/why_heads")
    button = page.get_by_role("button", name="Train the five models")

    def train() -> None:
        button.click()
        page.wait_for_selector("text=Result on 2,048 new sequences", timeout=900_000)
        wait_idle(page)

    return measured(pid, train)


def memory(browser, url: str, pid: int, n: int) -> list[tuple[int, float]]:
    """(sessions open, server RSS MB) as n sessions open one after another and stay open."""
    points, contexts = [], []
    for i in range(n):
        context = browser.new_context(viewport={"width": 1300, "height": 900})
        page = context.new_page()
        opened(page, f"{url}/bert_heads")
        box = page.locator(BOX).first
        box.fill(sentence(i))
        box.press("Control+Enter")
        wait_idle(page)
        contexts.append(context)
        if (i + 1) % 5 == 0:
            time.sleep(2.5)  # the server gives freed memory back at most every 2 s (MHA_TRIM_SECONDS)
            points.append((i + 1, memory_mb(pid)[0]))
            print(f"  {i + 1} sessions open: server RSS {points[-1][1]:.0f} MB", flush=True)
    for context in contexts:
        context.close()
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="sentences typed for the CPU per update")
    parser.add_argument("--sessions", type=int, default=40, help="sessions opened for the memory per session")
    parser.add_argument("--wait", type=float, default=5.0, help="longest wait (s) for the last student of a burst")
    parser.add_argument("--class-size", type=int, default=40, help="students the rule sizes for")
    parser.add_argument("--course", type=int, default=2000, help="students of a course (deploy/k8s/course)")
    parser.add_argument("--at-once", type=int, default=300, help="of them, connected at once")
    parser.add_argument("--node-cores", type=int, default=8, help="cores of one Kubernetes node")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    exe = low_priority_chromium()  # the browsers share the server's cores: measure the server
    with streamlit_server(timeout=120) as server, nginx_proxy([server.url.removeprefix("http://")]) as proxy:
        pid = server.process.pid
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
            page = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
            opened(page, f"{proxy.url}/bert_heads", 120_000)
            warmed(server.log)
            base = memory_mb(pid)[0]
            idle_cpu, idle_wall = measured(pid, lambda: time.sleep(5))
            cpu = interactions(page, pid, args.rounds)
            updates = [c for v in cpu.values() for c in v]
            train_cpu, train_wall = training(page, proxy.url, pid)
            page.context.close()
            points = memory(browser, proxy.url, pid, args.sessions)
            browser.close()
        peak = memory_mb(pid)[1]
    cores = len(os.sched_getaffinity(0))
    print(f"\none replica behind nginx (deploy/nginx.conf), the bundled model, {cores} cores")
    print(f"server RSS warmed, one session open: {base:.0f} MB; idle CPU {idle_cpu / idle_wall:.3f} cores")
    print(f"CPU s per update (median of {args.rounds} sentences), by page:")
    for name, values in cpu.items():
        print(f"  {name:14s} {statistics.median(values):5.2f}")
    per_update = statistics.mean(updates)
    print(
        f"every update: median {statistics.median(updates):.2f} CPU s, mean {per_update:.2f}, "
        f"worst {max(updates):.2f}; one sentence through every page: {sum(updates) / args.rounds:.1f} CPU s"
    )
    print(f"one training run (Why many heads, defaults): {train_cpu:.0f} CPU s in {train_wall:.0f} s")
    fit = stats.linregress(*zip(*[(k, mb) for k, mb in points if k >= 10], strict=True))
    print(
        f"memory per extra session (slope from 10 to {args.sessions} sessions): {fit.slope:.1f} MB "
        f"(r = {fit.rvalue:.2f}); {args.sessions} sessions: {points[-1][1]:.0f} MB, peak {peak:.0f} MB"
    )
    heaviest = max(cpu, key=lambda name: statistics.median(cpu[name]))
    worst = statistics.median(cpu[heaviest])
    per_replica = math.floor(args.wait * cores / worst)
    replicas = math.ceil(args.class_size / per_replica)
    print(
        f"\nrule: when a class asks at once, the last of n students on a {cores}-core replica waits about "
        f"n x (CPU per update) / {cores} s; on the heaviest page ({heaviest}, {worst:.2f} CPU s) that is "
        f"<= {args.wait:.0f} s for n <= {per_replica}: {replicas} replicas ({replicas * cores} cores) for "
        f"{args.class_size} students, each about {fit.intercept + fit.slope * per_replica:.0f} MB "
        f"(RSS fit at {per_replica} sessions); every distinct training run: {train_cpu:.0f} CPU s on one core, "
        "shared by everyone who picks its settings"
    )
    limit = memory_limit_mb()
    views = 1 / per_update
    pods = math.ceil(args.at_once / per_replica)  # CPU decides; memory is checked against what was measured
    fits = peak <= limit
    print(
        f"\ncapacity: {views:.2f} page views per second per core (1 / mean CPU s per update); "
        f"{per_replica} students per replica clicking at once for a {args.wait:.0f} s wait; {args.sessions} open "
        f"sessions measured at a peak of {peak:,.0f} MB, {'under' if fits else 'OVER'} a replica's {limit:,} MB "
        f"limit (deploy/compose.yaml, deploy/k8s). A course of {args.course:,} students with {args.at_once} at "
        f"once, clicking together: {pods} pods of {cores} cores ({args.at_once} / {per_replica}), "
        f"{math.ceil(pods * cores / args.node_cores)} nodes of {args.node_cores} cores for their limits; "
        f"memory alone, at the {args.sessions} sessions per pod measured: {math.ceil(args.at_once / args.sessions)} "
        f"pods; the other {args.course - args.at_once:,} students cost nothing until they "
        "connect"
    )


def memory_limit_mb() -> int:
    """The memory limit every deployment gives a replica (deploy/compose.yaml's, MiB)."""
    import re

    text = (Path(__file__).resolve().parents[1] / "deploy" / "compose.yaml").read_text()
    return int(re.search(r"memory: (\d+)M", text).group(1))


if __name__ == "__main__":
    main()
