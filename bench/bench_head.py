"""The decoders' LM head with the Q8_0 token table (mha/models/q8.py) against the float32 one it
replaced, in the same run: one next-token score of the held-out texts (next_token.evaluate, as the
task and the verdict run it), the median of --runs; the memory each table takes; and each head's
cross-entropy against a float64 computation on the same logits (the largest difference per token).

    python bench/bench_head.py [--runs 3] [--models SmolLM2-135M-Instruct gemma-3-270m]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import median_seconds  # noqa: E402, I001

import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from mha.models import catalog, q8  # noqa: E402
from mha.tasks import next_token  # noqa: E402


def float32_twin(model):
    """The same model with the float32 table Transformers read (the Q8_0 swap left out)."""
    attach = q8.attach
    q8.attach = lambda *args: False
    try:
        return type(model).load(model.model.name_or_path, model.name)
    finally:
        q8.attach = attach


def worst_nats(model, float32_loss: bool = False, n_texts: int = 8) -> float:
    """The largest |cross-entropy - float64's| over the tokens of n_texts held-out texts, nats: the
    model's own next_token_nats, or (float32_loss) torch's cross_entropy on its float32 logits."""
    ids, lengths = model.encode_batch(next_token.texts()[:n_texts])
    with torch.inference_mode():
        last = model.run_layers(model.embed(ids), keep=False)[0][-1]
        logits = model.logits(last)[:, :-1]  # (N, T - 1, V)
        if float32_loss:
            nats = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        else:
            nats = model.next_token_nats(last, ids)  # (N, T - 1)
        exact = torch.logsumexp(logits.double(), -1) - logits.double().gather(-1, ids[:, 1:, None])[..., 0]
    real = torch.arange(ids.shape[1] - 1)[None] < (lengths - 1)[:, None]
    return float(((nats.double() - exact).abs() * real).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=[catalog.DECODER_MODEL, catalog.GEMMA_MODEL])
    args = parser.parse_args()
    for name in args.models:
        quantised = catalog.load_model(name)
        plain = float32_twin(quantised)
        head = quantised.model.lm_head
        assert isinstance(head, q8.Q8Head) and not isinstance(plain.model.lm_head, q8.Q8Head)
        table = head.table.codes.numel() + head.table.scales.numel() * 2
        weight = plain.model.lm_head.weight
        q, f = (median_seconds(lambda m=m: next_token.evaluate(m), args.runs) for m in (quantised, plain))
        print(
            f"{name}: one next-token score of {len(next_token.texts())} texts, median of {args.runs}: "
            f"Q8_0 head {q:.2f} s, float32 head {f:.2f} s ({f / q:.1f}x faster); "
            f"table {table / 1e6:,.0f} MB against {weight.numel() * 4 / 1e6:,.0f} MB; largest difference "
            f"from float64 per token: Q8_0 head's blockwise loss {worst_nats(quantised):.1e} nats, "
            f"float32 head with torch's cross_entropy {worst_nats(plain, float32_loss=True):.1e} nats"
        )


if __name__ == "__main__":
    main()
