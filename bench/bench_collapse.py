"""Budget of the collapse page on the bundled model (model loaded, no cache), at 128 and 512 tokens.

Parts, median of --runs:
- one layer recomputed with shared Q/K/V plus every measure: target <= 0.3 s at 128 tokens
- the alpha sweep (11 points): target <= 2 s
- head diversity (Jensen-Shannon between every two heads) against scipy's jensenshannon, the
  reference, on the same attention: the ratio
- the whole-model effect (one layer shared, every layer shared)
- the task with Q, K and V shared in one layer or every layer (the Spearman figures)
The page: a new sentence on the collapse page, through Streamlit's AppTest (server-side time of
the whole script, every cache cold for that sentence): target <= 2 s at 512 tokens; with
--browser also typed in a real browser, until the page is drawn.

    python bench/bench_collapse.py [--runs 5] [--browser]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from common import median_seconds, sentence, server_threads

server_threads()
from livetest import ROOT  # noqa: E402
from mha.analyses import collapse, metrics  # noqa: E402
from mha.analyses.collapse import CollapsePath  # noqa: E402
from mha.lesson import check_question  # noqa: E402
from mha.models.catalog import load_model  # noqa: E402


def scipy_diversity(w: np.ndarray) -> np.ndarray:
    """The reference: scipy's jensenshannon per pair of heads (what metrics.head_diversity was)."""
    from scipy.spatial.distance import jensenshannon

    H = w.shape[0]
    i, j = np.triu_indices(H, 1)
    out = np.zeros((H, H))
    out[i, j] = out[j, i] = np.nan_to_num(jensenshannon(w[i], w[j], axis=-1) ** 2, nan=0.0).mean(-1)
    return out


def parts(bert, run) -> list:
    """(name, budget or None, function) of every part the page computes for a new sentence."""
    w = run.attentions[2]
    L = bert.n_layers
    return [
        (
            "one layer, shared, all measures",
            0.3 if run.n_tokens == 128 else None,
            lambda: collapse.collapse_layer(bert, run, 2, CollapsePath()),
        ),
        ("alpha sweep, 11 points", 2.0, lambda: collapse.alpha_sweep(bert, run, 2, CollapsePath())),
        ("head diversity (ours)", None, lambda: metrics.head_diversity(w)),
        ("head diversity (scipy reference)", None, lambda: scipy_diversity(w)),
        ("whole model, layer 2 shared", None, lambda: collapse.whole_model_effect(bert, run, [2], CollapsePath())),
        (
            "whole model, every layer shared",
            None,
            lambda: collapse.whole_model_effect(bert, run, range(L), CollapsePath()),
        ),
    ]


def page_seconds(T: int, runs: int) -> list[float]:
    """Server-side time of the collapse page for `runs` new sentences of T tokens."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.switch_page("app_pages/collapse.py").run()
    times = []
    for r in range(runs):
        at.text_area(key="_w_text").input(sentence(T, 100 + r))
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
        waits = any(b.key == "collapse_path" for b in at.button)  # the path's points wait on a long sentence
        assert not at.exception and len(at.get("plotly_chart")) >= (6 if waits else 7), "the page did not draw"
    return times


def browser_seconds(T: int, runs: int) -> list[float]:
    """In a real browser: a new sentence of T tokens typed on the collapse page, until the run
    has finished and the charts in view are drawn (seconds, one per sentence)."""
    from playwright.sync_api import sync_playwright

    from livetest import CHROMIUM_FLAGS, chromium, streamlit_server, wait_idle

    times = []
    with streamlit_server() as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{server.url}/collapse")
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=120_000)
        wait_idle(page, 120_000)
        box = page.locator('[data-testid="stSidebar"] textarea').first
        for r in range(runs + 1):  # the first one warms the task scores of this setting up
            box.fill(sentence(T, 200 + r))
            t0 = time.perf_counter()
            box.press("Control+Enter")
            wait_idle(page, 120_000)
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
            if r:
                times.append(time.perf_counter() - t0)
        browser.close()
    return times


def work_estimate(bert, run, sweep_s: float, runs: int) -> None:
    """mha.models.cost's estimate of the alpha sweep (runs of the layer, maps measured, pairs compared, one
    measured weight as COMPARE_MACS multiply-adds) against its time, both as forward passes of the
    model on the same sentence, and the COMPARE_MACS this machine's times imply."""
    import torch

    from mha.models import cost

    enc, _ = bert.encode(" ".join(run.tokens[1:-1]))

    def forward() -> None:
        with torch.inference_mode():
            bert.model(**enc, output_attentions=True)

    T, fwd = run.n_tokens, median_seconds(forward, runs)
    counts = collapse.sweep_counts(bert.n_heads)
    one_pass = cost.runs_macs(bert, T, [(0, 0)])
    estimate = cost.measures_macs(bert, T, *counts) / one_pass
    per_mac = fwd / one_pass
    layers, maps, pairs = counts
    implied = (sweep_s / per_mac - layers * cost.layer_macs(bert, T)) / ((maps + pairs) * T * T)
    waits = not cost.measures_at_once(bert, T, estimate * one_pass)
    print(
        f"  alpha sweep in forward passes ({fwd:.3f} s each): estimated {estimate:.1f} (mha.models.cost), measured "
        f"{sweep_s / fwd:.1f}; a measured weight costs {implied:.0f} multiply-adds here "
        f"(COMPARE_MACS = {cost.COMPARE_MACS}); waits for a button: {waits}"
    )


UNTUNED = (  # two sentences nobody tuned the app for (tests/test_sharing_honest.py uses them too)
    "The committee that reviewed the proposal rejected it because the budget was unrealistic.",
    "Rain fell on the quiet harbour while two fishermen argued about the price of bait.",
)


def task_figures(bert) -> None:
    """The figures: the model's Spearman on the bundled pairs with Q, K and V shared
    (alpha = 1) in layer 0 and in every layer, for the rescaled mean slice (the default), the
    plain mean and head 0's, beside the baselines with those layers' heads removed, and the lesson
    sentence's embedding cosine."""
    from mha.lesson.examples import DEFAULT_TEXT
    from mha.tasks import similarity

    base = similarity.evaluate(bert).spearman
    lesson = bert.attend(DEFAULT_TEXT)
    print(f"task: Spearman on the bundled pairs {base:.3f}; with Q, K and V shared (alpha = 1):")
    for layers in ([0], list(range(bert.n_layers))):
        where = "layer 0" if layers == [0] else "every layer"
        for source in ("scaled", "mean", 0):
            replace = {i: collapse.shared_module(bert.scratch_layer(i), source) for i in layers}
            score = similarity.evaluate(bert, replace=replace).spearman
            cos = collapse.whole_model_effect(bert, lesson, layers, CollapsePath(1.0, source))[
                "sentence embedding cosine"
            ]
            print(
                f"  {collapse.source_label(source):<13} in {where:<11}: Spearman {score:.3f}; "
                f"the lesson sentence's cosine {cos:.3f}"
            )
        removed = similarity.head_mask(bert, [(i, h) for i in layers for h in range(bert.n_heads)])
        score = similarity.evaluate(bert, head_mask=removed).spearman
        cos = collapse.removal_effect(bert, lesson, layers)["sentence embedding cosine"]
        print(f"  {'heads removed':<13} in {where:<11}: Spearman {score:.3f}; the lesson sentence's cosine {cos:.3f}")


def sharing_figures(bert) -> None:
    """The closing note's figures: layers 0 and 5 on two untuned sentences, BERT's heads against
    one shared Q/K/V with each shared slice: diversity, effective number of heads, distinct maps,
    score spread and the entropy of a map / ln T."""
    print("one shared Q/K/V, alpha = 1 (BERT's heads -> shared):")
    for text in UNTUNED:
        run = bert.attend(text)
        for layer in (0, 5):
            for source in ("scaled", "mean", 2):
                sweep = collapse.alpha_sweep(bert, run, layer, CollapsePath(1.0, source), steps=2)
                a = check_question.answer(sweep[0], sweep[-1], bert.d_model, bert.n_heads, CollapsePath(1.0, source))
                print(
                    f"  {text[:18]}... layer {layer} {collapse.source_label(source):<13}: "
                    f"diversity {a.diversity_bert:.3f} -> {a.diversity_shared:.1e}, "
                    f"effective heads {a.heads_bert:.1f} -> {a.heads_shared:.2f}, "
                    f"maps {a.maps_bert} -> {a.maps_shared}, "
                    f"score spread {a.spread_bert:.2f} -> {a.spread_shared:.2f}, "
                    f"entropy/ln T {a.entropy_bert:.2f} -> {a.entropy_shared:.2f}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--browser", action="store_true", help="also in a real browser (needs chromium)")
    args = parser.parse_args()
    bert = load_model()
    for T in (128, 512):
        run = bert.attend(sentence(T, 1))
        assert run.n_tokens == T
        w = run.attentions[2]
        rows = parts(bert, run)
        print(f"{T} tokens, median of {args.runs} runs")
        measured = {}
        for name, budget, fn in rows:
            measured[name] = t = median_seconds(fn, args.runs)
            verdict = "" if budget is None else ("OK" if t <= budget else "OVER")
            print(f"  {name:<40} {t:7.3f} s  budget {budget if budget else '-':>4}  {verdict}")
        ours, ref = measured["head diversity (ours)"], measured["head diversity (scipy reference)"]
        err = np.abs(metrics.head_diversity(w) - scipy_diversity(w)).max()
        print(f"  head diversity: {ref / ours:.1f}x faster than scipy, max difference {err:.1e}")
        work_estimate(bert, run, measured["alpha sweep, 11 points"], args.runs)
    task_figures(bert)
    sharing_figures(bert)
    for T, budget in ((128, 1.0), (512, 2.0)):
        times = page_seconds(T, args.runs)
        med = statistics.median(times)
        print(
            f"collapse page, new {T}-token sentence (AppTest, server side): median {med:.2f} s, "
            f"worst {max(times):.2f} s, budget {budget} s {'OK' if med <= budget else 'OVER'}"
        )
    if args.browser:
        times = browser_seconds(512, args.runs)
        print(
            f"collapse page, new 512-token sentence typed in a browser, until drawn: median "
            f"{statistics.median(times):.2f} s, worst {max(times):.2f} s"
        )


if __name__ == "__main__":
    main()
