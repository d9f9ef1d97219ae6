"""A real server's peak memory after every page on a long sentence, at the size of the original BERT.

For each shape (a randomly initialised BERT of bert-base's shape, 12 x 12 x 768, and of
bert-large's, 24 x 16 x 1024): `streamlit run app.py` (background warm-up off: the pages' own
work only) and one browser. Every page is opened once on a 16-token sentence (the per-model
work), then --rounds times on a new 512-token sentence each, every visit a new session (a
reload: the last session stays on the server for server.disconnectedSessionTTL, 120 s). After
each visit, the server's RSS and its peak (VmHWM, /proc): the peak against the bar (1.5 GB on
bert-base's shape, 3.5 GB on bert-large's). bench/bench_scale.py measures the same pages in one
process through AppTest; this one counts what a server holds besides: sessions, Tornado, the
script runs' threads.

    python bench/bench_server_memory.py [--shapes 12x12x768 24x16x1024] [--rounds 2] [--tokens 512]
Needs Debian's chromium and the playwright package (requirements-dev.txt).
"""

from __future__ import annotations

import argparse
import tempfile
from urllib.parse import quote

from common import sentence

from livetest import CHROMIUM_FLAGS, IDLE, chromium, fresh_page, memory_mb, streamlit_server

BUDGET = {"12x12x768": 1.5e9, "24x16x1024": 3.5e9}
SKIP = {"classroom.py", "glossary.py"}  # no model at work


def measure(shape: str, rounds: int, tokens: int) -> None:
    from playwright.sync_api import sync_playwright

    from mha.models.bert import save_random_bert
    from ui.pages import PAGES

    L, H, C = (int(v) for v in shape.split("x"))
    folder = save_random_bert(tempfile.mkdtemp(prefix="mha_bert_"), L, H, C)
    pages = [p for p in PAGES if p.file not in SKIP]
    env = {"MHA_MODEL_DIR": folder, "MHA_WARM": "0"}
    with streamlit_server(env=env, timeout=180) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        page, _ = fresh_page(browser)
        pid = server.process.pid

        def visit(path: str, text: str) -> tuple[float, float]:
            page.goto(f"{server.url}/{path}?model=local&text={quote(text)}")
            page.wait_for_selector('[data-testid="stApp"]', timeout=600_000)
            page.wait_for_timeout(300)  # the script run starts
            page.wait_for_selector(IDLE, timeout=600_000)
            return memory_mb(pid)

        for pg in pages:
            visit(pg.url_path, sentence(16, 999))
        rss, peak = memory_mb(pid)
        print(f"{shape}: after the first visit of every page: RSS {rss / 1024:.2f} GiB, peak {peak / 1024:.2f} GiB")
        salt = 0
        for r in range(rounds):
            row = []
            for pg in pages:
                salt += 1
                rss, peak = visit(pg.url_path, sentence(tokens, salt))
                row.append(f"{pg.url_path} {rss / 1024:.2f}")
            print(f"  round {r + 1}, RSS after each page (GiB): " + ", ".join(row))
        browser.close()
    peak_bytes = peak * 2**20
    verdict = ""
    if shape in BUDGET:
        verdict = f", bar {BUDGET[shape] / 1e9:.1f} GB: {'OK' if peak_bytes <= BUDGET[shape] else 'OVER'}"
    print(f"  peak RSS {peak / 1024:.2f} GiB ({peak_bytes / 1e9:.2f} GB){verdict}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=["12x12x768", "24x16x1024"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=512)
    args = parser.parse_args()
    print(f"every page, {args.rounds} rounds of new {args.tokens}-token sentences, a new session per visit")
    for shape in args.shapes:
        measure(shape, args.rounds, args.tokens)


if __name__ == "__main__":
    main()
