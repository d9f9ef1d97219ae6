"""Server-side budget of the BERT heads page: new sentence -> all its figures built and serialised.

Model already loaded; each run uses a fresh sentence (no cache). Prints the median time and the
bytes of figure JSON sent to the browser at 32, 128 and 512 tokens, and (if bertviz is installed,
bench environment only) our bytes against BertViz's model view HTML for the same 114-token input.

    python bench/bench_pages.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import sentence, server_threads

server_threads()
from mha import plots  # noqa: E402
from mha.analyses import map_views  # noqa: E402
from mha.models.catalog import load_model  # noqa: E402

BUDGET = {32: (0.25, 0.5e6), 128: (0.6, 2e6), 512: (1.5, 8e6)}


def page_figures(bert, text: str, layer: int = 0, head: int = 0) -> list:
    """Everything the BERT heads page computes for a new sentence, as it computes it."""
    run = bert.attend(text)
    att, labels, _ = map_views.view(run.attentions[layer], run.tokens, run.word_ids, run.segment_ids)
    return [
        plots.heads.model_view(run.attentions),
        plots.heads.attention_heatmap(att[head], labels, f"Layer {layer}, head {head}"),
        plots.heads.line_view(att[[head]], labels, [head]),
        plots.heads.token_focus(att, labels, min(2, len(labels) - 1)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--shape", default="", help="LxHxC: a random BERT of that shape, e.g. 12x12x768 (bert-base)")
    args = parser.parse_args()
    if args.shape:
        import os
        import tempfile

        from mha.models.bert import save_random_bert

        L, H, C = (int(v) for v in args.shape.split("x"))
        os.environ["MHA_MODEL_DIR"] = save_random_bert(tempfile.mkdtemp(prefix="mha_bert_"), L, H, C)
        bert = load_model("local")
        print(f"random BERT {L} layers x {H} heads x {C} wide")
    else:
        bert = load_model()
    page_figures(bert, sentence(32, 0))  # warm-up
    print(f"{'tokens':>6} {'median s':>9} {'budget s':>9} {'JSON MB':>8} {'budget MB':>9}  forward s")
    for T, (t_budget, b_budget) in BUDGET.items():
        times, fwd, size = [], [], 0
        for r in range(args.runs):
            text = sentence(T, r + 1)
            t0 = time.perf_counter()
            bert.attend(text)
            fwd.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            figs = page_figures(bert, text)
            size = sum(len(f.to_json().encode()) for f in figs)
            times.append(time.perf_counter() - t0)
        assert bert.attend(sentence(T, 0)).n_tokens == T
        med = statistics.median(times)
        print(
            f"{T:>6} {med:>9.3f} {t_budget:>9.2f} {size / 1e6:>8.3f} {b_budget / 1e6:>9.1f}  "
            f"{statistics.median(fwd):.3f}  {'OK' if med <= t_budget and size <= b_budget else 'OVER'}"
        )
    try:
        from bertviz import model_view
    except ImportError:
        print("bertviz not installed: pip install bertviz (bench only) for the size comparison")
        return
    text = sentence(114, 3)
    enc, _ = bert.encode(text)
    out = bert.model(**enc, output_attentions=True)
    tokens = bert.tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    html = model_view(out.attentions, tokens, html_action="return").data.encode()
    ours = sum(len(f.to_json().encode()) for f in page_figures(bert, text))
    print(
        f"114 tokens: ours {ours / 1e6:.3f} MB, BertViz model view {len(html) / 1e6:.1f} MB, "
        f"ratio {ours / len(html):.4f} (target <= 0.05)"
    )


if __name__ == "__main__":
    main()
