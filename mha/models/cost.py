"""How much work a run of the model's layers is, counted before running it: multiply-adds, from the
model's shape and the sentence's length alone (deterministic, the same on every machine).

A page runs a changed layer and the layers after it once per variant it measures; on a long
sentence, many variants are many forward passes. `at_once` says whether such runs are small
enough to run as the page opens; otherwise the page asks first (ui.whole_model_runs).

A page also measures a layer's variants against one another, head by head, over every T x T weight
(Jensen-Shannon divergences, entropies): work that grows as heads^2 T^2 whatever the model's width,
so on a narrow model and a long sentence it outgrows the forward pass. `measures_macs` counts it
in multiply-adds (one measured weight as COMPARE_MACS of them) and `measures_at_once` says whether
it runs as the page opens (ui.long_measures).

Per layer and token: the attention projections 2 C (C_q + C_kv) (W^Q and W^O of C x C, W^K and
W^V of C x G D), the scores and the mix 2 T C (Q K^T and weights V; causal or not, counted whole),
and the feed-forward 2 C F, or 3 C F for a gated MLP (Traits.gated_mlp), F its width.
"""

from __future__ import annotations

from mha.models.family import LoadedModel

AT_ONCE = 2e10  # multiply-adds: about a third of a second on one core of this machine (bench_scale.py)
COMPARE_MACS = 100  # one attention weight measured (add, log, multiply, sum) takes about as long as 100
# multiply-adds of the model's matrix products on one core (bench/bench_collapse.py prints the ratio)
MEASURES_AT_ONCE = 3.0  # forward passes of the model: measures beyond this (and beyond AT_ONCE) wait


def layer_macs(model: LoadedModel, n_tokens: int, heads: bool = True) -> float:
    """Multiply-adds of one layer of `model` on n_tokens tokens (one sentence); heads=False: a
    layer whose every head is removed, which runs its feed-forward only (LoadedModel.run_layers)."""
    C, HD = model.d_model, model.traits.heads_width  # HD: every query head side by side (C unless d_k is set)
    kv = model.traits.kv_groups * model.traits.d_head  # width of K (and of V)
    ffn = model.traits.mlp_width
    gated = 3 if model.traits.gated_mlp else 2
    attention = 2 * C * HD + 2 * C * kv + 2 * n_tokens * HD if heads else 0  # W^Q, W^O; W^K, W^V; scores, sums
    return float(n_tokens * (attention + gated * C * ffn))


Run = tuple[int, int]  # (the first layer run, how many layers from it run with every head removed)


def runs_macs(model: LoadedModel, n_tokens: int, runs: list[Run]) -> float:
    """Multiply-adds of one run of layers start..L-1 on n_tokens tokens for each (start, silent):
    its first `silent` layers run their feed-forward only, the rest whole."""
    full, ffn = layer_macs(model, n_tokens), layer_macs(model, n_tokens, heads=False)
    total = 0.0
    for start, silent in runs:
        n = max(0, model.n_layers - start)
        total += min(silent, n) * ffn + max(0, n - silent) * full
    return total


def forward_passes(model: LoadedModel, n_tokens: int, runs: list[Run]) -> float:
    """The same work in forward passes of the whole model on the sentence."""
    return runs_macs(model, n_tokens, runs) / runs_macs(model, n_tokens, [(0, 0)])


def at_once(model: LoadedModel, n_tokens: int, runs: list[Run]) -> bool:
    """Whether these runs are small enough to run without asking."""
    return runs_macs(model, n_tokens, runs) <= AT_ONCE


def measures_macs(model: LoadedModel, n_tokens: int, layer_runs: int, maps: int, pairs: int) -> float:
    """Multiply-adds of `layer_runs` runs of one layer, `maps` head maps measured alone (normalised,
    entropy, spread, drift) and `pairs` pairs of head maps compared (Jensen-Shannon), all T x T."""
    return layer_runs * layer_macs(model, n_tokens) + COMPARE_MACS * (maps + pairs) * float(n_tokens) ** 2


def measures_at_once(model: LoadedModel, n_tokens: int, macs: float) -> bool:
    """Whether measures of `macs` multiply-adds run as the page opens: small ones always, others
    when they are at most MEASURES_AT_ONCE forward passes of the model."""
    return macs <= AT_ONCE or macs <= MEASURES_AT_ONCE * runs_macs(model, n_tokens, [(0, 0)])
