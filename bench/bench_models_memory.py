"""One real server that offers every model: its peak memory with every page visited on each, and
Gemma 3's load time from the cache.

`streamlit run app.py` (background warm-up off) and one browser. For each model in turn (the
bundled BERT, SmolLM2, Gemma 3; a decoder evicts the other, ui/cache.py), every page is opened on a
512-token sentence and then on a 10,000-character text (each model cuts it at its own limit),
every visit a new session. After each model, the server's RSS and its peak (VmHWM, /proc) against
the bar (2.0 GB; Community Cloud gives about 2.7 GB). Then the converted Gemma 3 is loaded from the
cache in a fresh process, --runs times, beside SmolLM2 in the same run (the ratio), against its
bar (30 s).

    python bench/bench_models_memory.py [--runs 3] [--skip-server] [--models NAME ...]
Needs Debian's chromium, the playwright package (requirements-dev.txt) and both decoders fetched
(python -m mha.models.fetch).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from urllib.parse import quote

from common import ROOT, sentence

from livetest import CHROMIUM_FLAGS, IDLE, chromium, fresh_page, memory_mb, streamlit_server

BAR_BYTES = 2.0e9  # issue 58: every model, every page, one process
LOAD_BAR_S = 30.0
SKIP = {"classroom.py", "glossary.py"}  # no model at work
LONG = 10_000  # characters: the most a text box takes (catalog.MAX_CHARS)


def split_mb(pid: int) -> tuple[float, float]:
    """(anonymous, file-backed) resident MB of a process: the weights read through safetensors' memory
    map are file pages (the kernel can drop and reread them), the rest is the process's own."""
    fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines())
    return int(fields["RssAnon"].split()[0]) / 1024, int(fields["RssFile"].split()[0]) / 1024


def long_text() -> str:
    """10,000 characters of words (each model reads at most its own token limit of them)."""
    text = sentence(3000, 7)
    return text[:LONG]


def server_peak(models: list[str]) -> float:
    """Visit every page on each model in turn; print RSS after each model, and each page that raised the
    peak by more than 100 MB; return the peak in bytes."""
    from playwright.sync_api import sync_playwright

    from ui.pages import PAGES

    pages = [p for p in PAGES if p.file not in SKIP]
    with streamlit_server(env={"MHA_WARM": "0"}, timeout=180) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        pid, last_peak = server.process.pid, 0.0
        for model in models:
            t0, anon_max = time.perf_counter(), 0.0
            for text in (sentence(512, 3), long_text()):
                for pg in pages:
                    page, _ = fresh_page(browser)
                    page.goto(f"{server.url}/{pg.url_path}?model={quote(model)}&text={quote(text)}")
                    page.wait_for_selector('[data-testid="stApp"]', timeout=900_000)
                    page.wait_for_timeout(300)  # the script run starts
                    page.wait_for_selector(IDLE, timeout=900_000)
                    page.context.close()
                    anon_max = max(anon_max, split_mb(pid)[0])
                    now = memory_mb(pid)[1]
                    if now > last_peak + 100:  # which page raised the peak, and by how much
                        print(f"  {pg.url_path} ({len(text):,} characters): peak {last_peak:,.0f} -> {now:,.0f} MB")
                    last_peak = max(last_peak, now)
            rss, peak = memory_mb(pid)
            anon, file = split_mb(pid)
            print(
                f"{model}: every page, 512 tokens and {LONG:,} characters, in {time.perf_counter() - t0:.0f} s: "
                f"RSS {rss:,.0f} MB ({anon:,.0f} anonymous, {file:,.0f} file-backed), peak so far {peak:,.0f} MB; "
                f"largest anonymous RSS after a page {anon_max:,.0f} MB",
                flush=True,
            )
        browser.close()
        return peak * 2**20


LOAD = (
    "import os, time; os.environ['HF_HUB_OFFLINE'] = '1'; from mha.models import catalog; "
    "t0 = time.perf_counter(); catalog.load_model({name!r}); print(time.perf_counter() - t0)"
)


def load_seconds(name: str) -> float:
    """Seconds to load `name` from the cache in a fresh Python (imports not counted)."""
    out = subprocess.run(
        [sys.executable, "-c", LOAD.format(name=name)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-server", action="store_true")
    parser.add_argument("--models", nargs="+", help="default: the bundled BERT, SmolLM2, Gemma 3")
    args = parser.parse_args()
    from mha.models.catalog import DECODER_MODEL, DEFAULT_MODEL, GEMMA_MODEL

    if not args.skip_server:
        peak = server_peak(args.models or [DEFAULT_MODEL, DECODER_MODEL, GEMMA_MODEL])
        verdict = "OK" if peak <= BAR_BYTES else "OVER"
        print(f"peak RSS of the server: {peak / 1e9:.2f} GB, bar {BAR_BYTES / 1e9:.1f} GB: {verdict}")
    gemma = [load_seconds(GEMMA_MODEL) for _ in range(args.runs)]
    smol = [load_seconds(DECODER_MODEL) for _ in range(args.runs)]
    g, s = statistics.median(gemma), statistics.median(smol)
    print(
        f"load from the cache, median of {args.runs} fresh processes: Gemma 3 {g:.1f} s, SmolLM2 {s:.1f} s "
        f"({g / s:.1f}x); bar {LOAD_BAR_S:.0f} s: {'OK' if g <= LOAD_BAR_S else 'OVER'}"
    )


if __name__ == "__main__":
    main()
