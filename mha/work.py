"""How much work a run of the model's layers is, counted before running it: multiply-adds, from the
model's shape and the sentence's length alone (deterministic, the same on every machine).

A page runs a changed layer and the layers after it once per variant it measures; on a long
sentence, many variants are many forward passes. `at_once` says whether such runs are small
enough to run as the page opens; otherwise the page asks first (ui.whole_model_runs).

Per layer and token: the attention projections 2 C (C_q + C_kv) (W^Q and W^O of C x C, W^K and
W^V of C x G D), the scores and the mix 2 T C (Q K^T and weights V; causal or not, counted whole),
and the feed-forward 2 C F (BERT) or 3 C F (a gated decoder MLP), F its width.
"""

from __future__ import annotations

from .loaded import LoadedModel

AT_ONCE = 2e10  # multiply-adds: about a third of a second on one core of this machine (bench_scale.py)


def layer_macs(model: LoadedModel, n_tokens: int) -> float:
    """Multiply-adds of one layer of `model` on n_tokens tokens (one sentence)."""
    C, H = model.d_model, model.n_heads
    kv = model.kv_groups * (C // H)  # width of K (and of V)
    config = model.model.config
    ffn = getattr(config, "intermediate_size", 4 * C)
    gated = 3 if model.family == "decoder" else 2
    per_token = 2 * C * C + 2 * C * kv + 2 * n_tokens * C + gated * C * ffn
    return float(n_tokens * per_token)


def runs_macs(model: LoadedModel, n_tokens: int, starts: list[int]) -> float:
    """Multiply-adds of one run of layers start..L-1 on n_tokens tokens for each start in `starts`."""
    return sum(max(0, model.n_layers - start) for start in starts) * layer_macs(model, n_tokens)


def forward_passes(model: LoadedModel, n_tokens: int, starts: list[int]) -> float:
    """The same work in forward passes of the whole model on the sentence."""
    return runs_macs(model, n_tokens, starts) / runs_macs(model, n_tokens, [0])


def at_once(model: LoadedModel, n_tokens: int, starts: list[int]) -> bool:
    """Whether the runs of layers start..L-1, one per start, are small enough to run without asking."""
    return runs_macs(model, n_tokens, starts) <= AT_ONCE
