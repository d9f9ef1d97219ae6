"""Sharing measured honestly (issue 30): identical heads are told apart from flat ones, and every
number is checked against an independent computation: numpy on Transformers' own weights and
hidden states, not the engine's helpers.

- A shared projection keeps the heads' scale by default (the mean of the slices rescaled to a
  slice's norm): the one head left attends about as sharply as BERT's heads; the plain mean
  flattens it to nearly uniform.
- The effective number of heads counts heads: H copies of one head read 1, sharp or flat;
  distinct flat heads do not read as a collapse; BERT's heads read about H.
- The baselines (a layer's heads removed, every head removed) equal a forward pass of
  Transformers' BertModel with those heads' outputs zeroed.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon
from scipy.special import softmax

from mha.analyses import collapse, ladder, metrics
from mha.analyses.collapse import CollapsePath

UNTUNED = [  # sentences nobody tuned the app for
    "The committee that reviewed the proposal rejected it because the budget was unrealistic.",
    "Rain fell on the quiet harbour while two fishermen argued about the price of bait.",
]


def _hf(bert, text: str):
    """Transformers' own hidden states and attentions for one sentence (numpy)."""
    enc = bert.tokenizer(text, return_tensors="pt")
    with torch.inference_mode():
        out = bert.model(**enc, output_hidden_states=True, output_attentions=True)
    return [h[0].float().numpy() for h in out.hidden_states], [a[0].float().numpy() for a in out.attentions]


def _weights(bert, layer: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Layer `layer`'s Q, K, V weights and biases from Transformers' module (numpy, float64)."""
    s = bert.model.encoder.layer[layer].attention.self
    return {
        r: (getattr(s, n).weight.detach().double().numpy(), getattr(s, n).bias.detach().double().numpy())
        for r, n in (("q", "query"), ("k", "key"), ("v", "value"))
    }


def _shared_head(bert, x: np.ndarray, layer: int, rescale: bool) -> tuple[np.ndarray, np.ndarray]:
    """One head from the mean of the heads' slices (times sqrt(mean ||W_i||^2) / ||mean W_i||
    if rescale), in numpy: its attention (T, T) and output (T, D)."""
    H = bert.n_heads
    D = bert.d_model // H
    proj = {}
    for r, (w, b) in _weights(bert, layer).items():
        ws, bs = w.reshape(H, D, -1), b.reshape(H, D)
        mw, mb = ws.mean(0), bs.mean(0)
        f = np.sqrt((ws**2).sum((1, 2)).mean()) / np.linalg.norm(mw) if rescale else 1.0
        proj[r] = x.astype(np.float64) @ (mw * f).T + mb * f  # (T, D)
    a = softmax(proj["q"] @ proj["k"].T / np.sqrt(D), axis=-1)  # (T, T)
    return a, a @ proj["v"]


def _entropy_share(a: np.ndarray) -> np.ndarray:
    """Entropy of each row of (..., T, T) over ln T."""
    return -(a * np.log(a)).sum(-1) / np.log(a.shape[-1])


@pytest.mark.parametrize("text", UNTUNED)
@pytest.mark.parametrize("layer", [0, 5])
def test_the_default_shared_head_is_as_sharp_as_berts_and_the_plain_mean_is_flat(bert, text, layer):
    hidden, attentions = _hf(bert, text)
    per_head = _entropy_share(attentions[layer].astype(np.float64)).mean(-1)  # (H,) BERT's heads
    scaled, _ = _shared_head(bert, hidden[layer], layer, rescale=True)
    plain, _ = _shared_head(bert, hidden[layer], layer, rescale=False)
    e_scaled, e_plain = _entropy_share(scaled).mean(), _entropy_share(plain).mean()
    assert e_plain > 0.98  # nearly uniform: what averaging does, not sharing
    assert per_head.min() <= e_scaled <= per_head.max()  # among BERT's own heads, not uniform
    assert e_scaled < 0.8
    # the engine's default shared layer is that head, in every one of its heads
    run = bert.attend(text)
    c = collapse.collapse_layer(bert, run, layer, CollapsePath(1.0))
    assert collapse.DEFAULT_SOURCE == "scaled"
    np.testing.assert_allclose(c.weights, np.broadcast_to(scaled, c.weights.shape), atol=2e-5)
    assert c.summary()["entropy / ln T"] == pytest.approx(e_scaled, abs=1e-4)
    # and the score spread says which one is flat
    mean_c = collapse.collapse_layer(bert, run, layer, CollapsePath(1.0, "mean"))
    assert mean_c.score_spread.mean() < 0.3 * c.score_spread.mean()


def _effective_rank(rows: np.ndarray) -> float:
    """exp(entropy of the normalised singular values) of unit-length rows, in plain numpy."""
    rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    s = np.linalg.svd(rows, compute_uv=False)
    s = s[s > 1e-6 * s.max()]
    p = s / s.sum()
    return float(np.exp(-(p * np.log(p)).sum()))


def test_the_effective_number_of_heads_counts_heads_not_sharpness():
    rng = np.random.default_rng(0)
    H, T, D = 12, 10, 32  # as the bundled model: a flat head outputs one D-vector per token
    sharp = np.eye(T)[rng.integers(0, T, T)]  # every query on one key
    v = rng.normal(size=(T, D))
    same_sharp = np.broadcast_to(sharp @ v, (H, T, D))
    assert metrics.effective_heads(same_sharp) == pytest.approx(1.0, abs=1e-9)  # identical heads: 1
    assert metrics.distinct_maps(np.broadcast_to(sharp, (H, T, T))) == 1
    flat = np.full((T, T), 1 / T)
    vs = rng.normal(size=(H, T, D))  # each head its own values
    distinct_flat = flat @ vs  # (H, T, D): flat maps, different values
    assert metrics.effective_heads(distinct_flat) > H - 1.5  # flat is not a collapse
    assert metrics.effective_heads(distinct_flat) == pytest.approx(_effective_rank(distinct_flat.reshape(H, -1)))
    assert metrics.distinct_maps(np.broadcast_to(flat, (H, T, T))) == 1  # one map, but 12 different heads
    same_flat = np.broadcast_to(flat @ v, (H, T, D))
    assert metrics.effective_heads(same_flat) == pytest.approx(1.0, abs=1e-9)  # identical and flat: 1


@pytest.mark.parametrize("text", UNTUNED)
@pytest.mark.parametrize("layer", [0, 5])
def test_bert_has_about_h_heads_and_any_shared_slice_leaves_one(bert, text, layer):
    hidden, attentions = _hf(bert, text)
    H, D = bert.n_heads, bert.d_model // bert.n_heads
    w, b = _weights(bert, layer)["v"]
    values = (hidden[layer].astype(np.float64) @ w.T + b).reshape(-1, H, D).transpose(1, 0, 2)  # (H, T, D)
    outputs = attentions[layer].astype(np.float64) @ values  # (H, T, D) BERT's head outputs
    expect = _effective_rank(outputs.reshape(H, -1))
    assert expect > H - 1  # about H
    run = bert.attend(text)
    c0 = collapse.collapse_layer(bert, run, layer, CollapsePath(0.0))
    assert c0.effective_heads == pytest.approx(expect, abs=1e-3) and c0.distinct_maps == H
    for source in ("scaled", "mean", 0, 7):
        c1 = collapse.collapse_layer(bert, run, layer, CollapsePath(1.0, source))
        assert c1.effective_heads == pytest.approx(1.0, abs=1e-6) and c1.distinct_maps == 1, source
    _, out = _shared_head(bert, hidden[layer], layer, rescale=True)
    np.testing.assert_allclose(c1.concat.reshape(-1, H, D)[:, 0], c1.concat.reshape(-1, H, D)[:, 3], atol=1e-6)
    shared = collapse.collapse_layer(bert, run, layer, CollapsePath(1.0)).concat.reshape(-1, H, D)  # (T, H, D)
    np.testing.assert_allclose(shared[:, 5], out, atol=2e-4)


def _hf_without(bert, text: str, layers: list[int]) -> np.ndarray:
    """Transformers' last hidden state with every head of `layers` removed: the self-attention's
    context (the heads' outputs before W^O) zeroed by a forward hook."""

    def zero(_module, _inputs, output):
        return (torch.zeros_like(output[0]), *output[1:])

    hooks = [bert.model.encoder.layer[i].attention.self.register_forward_hook(zero) for i in layers]
    try:
        enc = bert.tokenizer(text, return_tensors="pt")
        with torch.inference_mode():
            return bert.model(**enc).last_hidden_state[0].float().numpy()
    finally:
        for h in hooks:
            h.remove()


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.mark.parametrize("text", UNTUNED)
def test_baselines_equal_transformers_with_the_heads_zeroed(bert, text):
    run = bert.attend(text)
    full = run.hidden_states[-1].mean(0)
    layer_gone = _hf_without(bert, text, [5]).mean(0)
    none_left = _hf_without(bert, text, list(range(bert.n_layers))).mean(0)
    got = ladder.baselines(bert, run, 5)
    assert got.sentence_cosine == pytest.approx(_cos(layer_gone, full), abs=1e-4)
    assert got.sentence_cosine_no_heads == pytest.approx(_cos(none_left, full), abs=1e-4)
    assert got.sentence_cosine_no_heads < got.sentence_cosine < 1.0
    assert collapse.removal_effect(bert, run, [5])["sentence embedding cosine"] == got.sentence_cosine
    # the hook is gone: the shared model is as it was
    np.testing.assert_allclose(_hf_without(bert, text, []), run.hidden_states[-1], atol=2e-5)


@pytest.mark.parametrize("text", UNTUNED)
@pytest.mark.parametrize("layer", [0, 5])
def test_mqa_with_its_scale_restored_keeps_the_heads_apart(bert, text, layer):
    """MQA mean-pooled as Ainslie et al. do shrinks K and so every score: most of the fall in
    head diversity is that scale. Numpy builds both conversions from Transformers' weights."""
    hidden, attentions = _hf(bert, text)
    H, D = bert.n_heads, bert.d_model // bert.n_heads
    x = hidden[layer].astype(np.float64)
    (wq, bq), (wk, bk) = _weights(bert, layer)["q"], _weights(bert, layer)["k"]
    q = (x @ wq.T + bq).reshape(-1, H, D).transpose(1, 0, 2)  # (H, T, D)
    ks, kb = wk.reshape(H, D, -1), bk.reshape(H, D)

    def diversity(f: float) -> float:
        k = x @ (ks.mean(0) * f).T + kb.mean(0) * f  # (T, D): one K for every head
        a = softmax(q @ k.T / np.sqrt(D), axis=-1)  # (H, T, T)
        js = [jensenshannon(a[i], a[j], axis=-1) ** 2 for i in range(H) for j in range(H) if i != j]
        return float(np.mean(js))

    plain = diversity(1.0)
    restored = diversity(np.sqrt((ks**2).sum((1, 2)).mean()) / np.linalg.norm(ks.mean(0)))
    run = bert.attend(text)
    got = {
        r.rescale: ladder.rung_measures(bert, run, layer, r)
        for r in (ladder.Rung("MQA", (H, 1, 1), H, s) for s in (False, True))
    }
    assert got[False].diversity == pytest.approx(plain, rel=1e-3, abs=1e-5)
    assert got[True].diversity == pytest.approx(restored, rel=1e-3, abs=1e-5)
    bert_div = np.mean(
        [
            jensenshannon(attentions[layer][i], attentions[layer][j], axis=-1) ** 2
            for i in range(H)
            for j in range(H)
            if i != j
        ]
    )
    assert restored > 2 * plain and restored > 0.5 * bert_div
