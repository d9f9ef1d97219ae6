"""Parity of the from-scratch layers with Transformers' own eager attention, one row per family:
the bundled BERT, the offline SmolLM2 decoder (python -m mha.models.fetch first) and a random GPT-2
of GPT-2 small's shape (built here: GPT-2's own weights are on the Hub). For every layer of each, the
largest |from-scratch - Transformers| attention weight and attention output on one 64-token text.

    python bench/bench_parity.py
"""

from __future__ import annotations

import os
import tempfile

import common  # noqa: F401  (this checkout first on sys.path, HF_HUB_OFFLINE)
import torch

WORDS = "the sailor told a story about an old ship that sank near the island while children listened".split()


def text(tokens: int) -> str:
    """About `tokens` tokens of ordinary words (every tokenizer here keeps these words whole)."""
    return " ".join(WORDS[i * 5 % len(WORDS)] for i in range(tokens - 1)) + "."


def worst(model, run) -> tuple[float, float]:
    """(max |weights difference|, max |output difference|) over every layer."""
    w_max = o_max = 0.0
    with torch.inference_mode():
        for layer in range(model.n_layers):
            ref_out, ref_w = model.reference_attention(run, layer)
            out, w = model.scratch_layer(layer)(run.layer_input(layer))
            w_max = max(w_max, float((w - ref_w).abs().max()))
            o_max = max(o_max, float((out - ref_out).abs().max()))
    return w_max, o_max


def main() -> None:
    from mha.models import catalog
    from mha.models.gpt2 import save_random_gpt2

    print(f"torch {torch.__version__}; one text of about 64 tokens; every layer")
    print(f"{'model':<34} {'L x H x C':>13} {'K/V heads':>9} {'max |dw|':>10} {'max |dout|':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ[catalog.LOCAL_ENV] = save_random_gpt2(tmp)
        for name, label in (
            (catalog.DEFAULT_MODEL, catalog.DEFAULT_MODEL),
            (catalog.DECODER_MODEL, catalog.DECODER_MODEL),
            (catalog.LOCAL_MODEL, "random GPT-2 (GPT-2 small's shape)"),
        ):
            model = catalog.load_model(name)
            t = model.traits
            w, o = worst(model, model.attend(text(64)))
            shape = f"{t.n_layers} x {t.n_heads} x {t.d_model}"
            print(f"{label:<34} {shape:>13} {t.kv_groups:>9} {w:>10.2e} {o:>10.2e}")


if __name__ == "__main__":
    main()
