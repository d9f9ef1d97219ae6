"""How each page's server time grows with the sentence and the model, as multiples of one forward pass.

For each model shape (the bundled all-MiniLM-L6-v2, randomly initialised BERTs of bert-base's and
bert-large's shapes: 12 x 12 x 768 and 24 x 16 x 1024, and the real decoder SmolLM2-135M-Instruct,
30 x 9 x 576 with 3 K/V groups) and each length (32, 128, 512 tokens):
every page opened by a fresh session (Streamlit's AppTest, in this process: the app's real script,
sidebar and caches) on a sentence no session has typed, with the model already loaded and each
page visited once before on a short sentence (its per-model work done: printed apart). The time of
that one script run (app.py's `server.timed`: what a server spends on it; AppTest's own setup around
it, a scan of the installed packages for components on every new AppTest that a server does once,
is printed apart) is divided by the median time of three Transformers forward passes with
attentions on sentences of the same length, measured in the same process just before that run
(the machine's speed drifts within a minute); with --runs N, the median of the N ratios. The
forward row gives the median of three passes measured before the length's first page. The exponent is the
least-squares slope of log(time) against log(T) over the lengths (2 = the page grows like T^2).

Each shape runs in its own process (`--child`), so its peak RSS (after every page at every length)
is its own: the bar is 1.5 GB on bert-base's shape and 3.5 GB on bert-large's. The reference passes
beside the pages are the bench's own work, not a server's: what they free is given back to the
system before the page runs (as the app does after each run), and their peak is printed apart.

    python bench/bench_scale.py [--shapes bundled 12x12x768 24x16x1024] [--tokens 32 128 512] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, sentence, server_threads

SKIP = {"classroom.py", "glossary.py"}  # no model at work
BUDGET = 4.0  # forward passes, every page at 512 tokens
REF_RUNS = 3  # forward passes measured just before each page run: their median is its reference
TIMING = Path(tempfile.mkdtemp(prefix="mha_timing_")) / "runs.tsv"
RSS_BUDGET = {"12x12x768": 1.5e9, "24x16x1024": 3.5e9}


def child(shape: str, tokens: list[int], runs: int) -> dict:
    """Every page at every length on one shape, in this process: {page: {T: ratio}}, forward s, RSS."""
    os.environ["MHA_WARM"] = "0"  # no background warm-up: the page's own work only
    os.environ["MHA_TIMING_LOG"] = str(TIMING)  # the script run's own time, as a server measures it
    server_threads()
    import torch
    from streamlit.testing.v1 import AppTest

    from ui import cache
    from ui.pages import PAGES
    from ui.server import release_memory

    if shape == "bundled":
        name = "all-MiniLM-L6-v2"
    elif shape == "decoder":
        name = "SmolLM2-135M-Instruct"  # the real one (python -m mha.models.fetch converts it once)
    else:  # MHA_MODEL_DIR: the parent saved a random BERT of this shape there
        name = "local"
    model = cache.load_model(name)
    with open("/proc/self/status") as f:  # VmHWM: this process's own (getrusage's maxrss counts the parent's too)
        rss_loaded = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))

    def forward(text: str) -> float:
        tok = model.tokenize(text)
        if model.traits.causal:
            out["tokens"][len(text.split()) + 2] = int(tok.ids.shape[1])
        call = lambda: model._states(tok.ids, tok.segments, None)  # noqa: E731  (Transformers' own forward pass)
        with torch.inference_mode():
            t0 = time.perf_counter()
            call()
            return time.perf_counter() - t0

    def reference(T: int, first: int) -> float:
        """The median of REF_RUNS forward passes on sentences of T tokens (salts first, first + 1, ...)."""
        return statistics.median(forward(sentence(T, first + r)) for r in range(REF_RUNS))

    overhead: list[float] = []  # AppTest's own time around each script run (its component scan)
    peaks: dict[str, int] = {}  # what set the high-water mark: page (or step) -> its peak RSS
    now = {"T": 16}  # the length being measured (16: the first visits)

    def high_water(step: str) -> None:
        """Record the peak RSS since the last call (Linux: VmHWM, reset through clear_refs)."""
        with open("/proc/self/status") as f:
            hwm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))
        peaks[step] = max(peaks.get(step, 0), hwm)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")

    def page_run(page: str, text: str) -> float:
        high_water("before")
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=900)
        at.query_params["model"] = name
        at.query_params["text"] = text
        at.switch_page(page)
        t0 = time.perf_counter()
        at.run()
        wall = time.perf_counter() - t0
        high_water(f"{Path(page).stem} @{now['T']}")
        if at.exception:
            raise RuntimeError(f"{page}: {[e.value for e in at.exception]}")
        seconds = float(TIMING.read_text().splitlines()[-1].split("\t")[1])  # app.py's server.timed: this run
        overhead.append(wall - seconds)
        return seconds

    pages = [p for p in PAGES if p.file not in SKIP]
    page_run(pages[0].path, sentence(16, 999))  # the app's imports, once
    out: dict = {"shape": shape, "forward": {}, "pages": {p.url_path: {} for p in pages}, "first": {}, "tokens": {}}
    out["ratios"] = {p.url_path: {} for p in pages}
    for p in pages:  # per-model work (task scores, the pool's runs, spectra): once per model, not per sentence
        out["first"][p.url_path] = page_run(p.path, sentence(16, 998))
    salt = 1000
    for T in tokens:
        now["T"] = T
        high_water("before")
        forward(sentence(T, 0))
        out["forward"][T] = reference(T, 1)
        high_water(f"forward @{T}")
        for p in pages:
            times, ratios = [], []
            for _ in range(runs):
                # this run's own reference, measured just before it: the machine's speed drifts
                # within a minute (by up to a third here), and a ratio should not follow the drift
                ref = reference(T, 7000)
                release_memory(every=0)  # what they freed goes back to the system: no server runs them
                high_water(f"reference @{T}")  # their peak apart: the bench's own, not a page's
                salt += 1
                times.append(page_run(p.path, sentence(T, salt)))
                ratios.append(times[-1] / ref)
            out["pages"][p.url_path][T] = statistics.median(times)
            out["ratios"][p.url_path][T] = statistics.median(ratios)
            print(f"  {shape} {p.url_path} {T}: {out['pages'][p.url_path][T]:.2f} s", file=sys.stderr, flush=True)
    out["rss_loaded"] = rss_loaded
    out["overhead"] = statistics.median(overhead)
    high_water("after")
    # VmHWM between resets (getrusage's maxrss follows the resets); the reference passes apart
    out["rss_peak"] = max(v for k, v in peaks.items() if not k.startswith("reference"))
    out["rss_reference"] = max(v for k, v in peaks.items() if k.startswith("reference"))
    out["peaks"] = peaks
    return out


def exponent(t: dict, lengths: list[int]) -> float:
    """The least-squares slope of log(time) against log(T) over `lengths`: time ~ T^exponent."""
    x = [math.log(T) for T in lengths]
    y = [math.log(t[T]) for T in lengths]
    mx, my = statistics.fmean(x), statistics.fmean(y)
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / sum((a - mx) ** 2 for a in x)


def report(results: list[dict], tokens: list[int]) -> None:
    for res in results:
        fwd = res["forward"]
        print(f"\n{res['shape']}: forward pass with attentions " + ", ".join(f"{fwd[T]:.3f} s @{T}" for T in tokens))
        if res.get("tokens"):  # the decoder's tokenizer cuts the same words into other counts
            print("  its tokens for the lengths: " + ", ".join(f"{T} -> {n}" for T, n in res["tokens"].items()))
        print(
            f"peak RSS {res['rss_peak'] / 2**30:.2f} GiB (after the model's load {res['rss_loaded'] / 2**30:.2f} GiB)"
            + (
                f", budget {RSS_BUDGET[res['shape']] / 1e9:.1f} GB: "
                f"{'OK' if res['rss_peak'] <= RSS_BUDGET[res['shape']] else 'OVER'}"
                if res["shape"] in RSS_BUDGET
                else ""
            )
        )
        print(
            "first visit of each page for the model (per-model work, on a 16-token sentence): "
            + ", ".join(f"{p} {t:.1f} s" for p, t in res["first"].items() if t >= 0.5)
        )
        print(f"AppTest's own time around each script run (not counted): {res['overhead']:.2f} s (median)")
        print(f"the reference passes beside the pages (not counted): peak {res['rss_reference'] / 2**30:.2f} GiB")
        top = sorted(res["peaks"].items(), key=lambda kv: -kv[1])[:5]
        print("highest peaks: " + ", ".join(f"{k} {v / 2**30:.2f} GiB" for k, v in top))
        head = f"{'page':<14}" + "".join(f"{f'{T} tok':>10}" for T in tokens) + f"{'s @' + str(tokens[-1]):>9}"
        fit = len(tokens) >= 2
        print(head + ("  exponent" if fit else ""))
        for page, t in res["pages"].items():
            ratio = res["ratios"][page]
            row = f"{page:<14}" + "".join(f"{ratio[T]:>9.1f}x" for T in tokens) + f"{t[tokens[-1]]:>9.2f}"
            if fit:
                row += f"  {exponent(t, tokens):8.2f}"
            if tokens[-1] == 512:
                row += "  OK" if ratio[512] <= BUDGET else "  OVER"
            print(row)
        print(f"{'forward':<14}" + "".join(f"{1.0:>9.1f}x" for _ in tokens) + f"{fwd[tokens[-1]]:>9.2f}", end="")
        print(f"  {exponent(fwd, tokens):8.2f}" if fit else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=["bundled", "12x12x768", "24x16x1024", "decoder"])
    parser.add_argument("--tokens", nargs="+", type=int, default=[32, 128, 512])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.tokens, args.runs)))
        return
    results = []
    for shape in args.shapes:
        env = dict(os.environ)
        if shape not in ("bundled", "decoder"):
            from mha.models.bert import save_random_bert

            L, H, C = (int(v) for v in shape.split("x"))
            env["MHA_MODEL_DIR"] = save_random_bert(tempfile.mkdtemp(prefix="mha_bert_"), L, H, C)
        cmd = [sys.executable, __file__, "--child", shape, "--runs", str(args.runs), "--tokens", *map(str, args.tokens)]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True, env=env)
        res = json.loads(done.stdout.strip().splitlines()[-1])
        res["forward"] = {int(k): v for k, v in res["forward"].items()}
        for part in ("pages", "ratios"):
            res[part] = {p: {int(k): v for k, v in t.items()} for p, t in res[part].items()}
        results.append(res)
    report(results, args.tokens)


if __name__ == "__main__":
    main()
