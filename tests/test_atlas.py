"""Per-head measures on hand-built attention, against scipy, and on the real bundled BERT."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import SENTENCES
from scipy.stats import entropy as scipy_entropy

from mha import MultiHeadAttention
from mha.analyses import atlas, metrics

T = 6
TOKENS = ["[CLS]", "the", "cat", ",", "sat", "[SEP]"]


def stack(*maps):
    return np.stack(maps)[None].astype(np.float32)  # (1, H, T, T)


IDENTITY = np.eye(T)
UNIFORM = np.full((T, T), 1 / T)
PREVIOUS = np.eye(T, k=-1)
PREVIOUS[0, 0] = 1.0  # the first token has no previous one: it reads itself
NEXT = np.eye(T, k=1)
NEXT[-1, -1] = 1.0
TO_CLS = np.zeros((T, T))
TO_CLS[:, 0] = 1.0


def test_a_cls_sink_is_not_confident():
    m = atlas.head_measures(stack(TO_CLS), TOKENS)
    assert m["to [CLS]"][0, 0] == pytest.approx(1) and m["confidence"][0, 0] == pytest.approx(0)


def test_identity_attention():
    m = atlas.head_measures(stack(IDENTITY), TOKENS)
    assert m["to itself"][0, 0] == pytest.approx(1)
    assert m["entropy"][0, 0] == pytest.approx(0, abs=1e-6)
    # the largest weight outside [CLS] and [SEP]: their own rows put everything on themselves
    assert m["confidence"][0, 0] == pytest.approx(np.mean([IDENTITY[i, 1:-1].max() for i in range(T)])) == 4 / 6
    assert m["positional"][0, 0] and m["argmax offset"][0, 0] == 0


def test_uniform_attention_has_entropy_ln_t():
    m = atlas.head_measures(stack(UNIFORM), TOKENS)
    assert m["entropy"][0, 0] == pytest.approx(np.log(T), rel=1e-5)
    assert m["entropy"][0, 0] == pytest.approx(scipy_entropy(UNIFORM[0]), rel=1e-5)
    assert m["confidence"][0, 0] == pytest.approx(1 / T)
    assert m["to [CLS]"][0, 0] == pytest.approx(1 / T)
    assert m["to punctuation"][0, 0] == pytest.approx(1 / T)  # one "," of six tokens


def test_entropy_matches_scipy_on_random_rows():
    rng = np.random.default_rng(0)
    att = rng.dirichlet(np.ones(T), size=(2, 3, T))  # (L, H, T, T)
    expect = np.array([[np.mean([scipy_entropy(att[l, h, i]) for i in range(T)]) for h in range(3)] for l in range(2)])
    np.testing.assert_allclose(atlas.entropy(att), expect, rtol=1e-6)


def test_previous_and_next_heads_are_positional():
    m = atlas.head_measures(stack(PREVIOUS, NEXT), TOKENS)
    # every query that has a previous (next) token puts all its weight there: the first (last) has none
    assert m["to previous"][0, 0] == pytest.approx(np.mean([PREVIOUS[i, i - 1] for i in range(1, T)])) == 1.0
    assert m["to next"][0, 1] == pytest.approx(np.mean([NEXT[i, i + 1] for i in range(T - 1)])) == 1.0
    assert m["to previous"][0, 1] == 0 and m["to next"][0, 0] == 0
    pure_previous = stack(np.eye(T, k=-1) + np.eye(T, k=T - 1))  # first token wraps to the last
    m2 = atlas.head_measures(pure_previous, TOKENS)
    assert m2["to previous"][0, 0] == pytest.approx(1.0)
    assert not m["positional"][0, 0]  # 5 of 6 queries (83%) read the previous token: below 90%
    labels = atlas.pattern_labels(m, T)
    assert list(labels[0]) == ["diagonal", "diagonal"]


def test_positional_threshold():
    att = np.tile(np.eye(20, k=-1), (1, 1, 1, 1)).astype(np.float32)
    att[..., 0, 0] = 1  # 19 of 20 queries (95%) read the previous token
    flag, offset = atlas.positional(att)
    assert flag[0, 0] and offset[0, 0] == -1
    att[..., 2:4, :] = 0
    att[..., 2:4, 0] = 1  # now 17 of 20 (85%)
    flag, _ = atlas.positional(att)
    assert not flag[0, 0]


def test_pattern_labels_vertical_and_block():
    m = atlas.head_measures(stack(TO_CLS, UNIFORM), TOKENS)
    assert list(atlas.pattern_labels(m, T)[0]) == ["vertical", "heterogeneous"]
    seg = [0, 0, 0, 0, 1, 1]
    block = np.zeros((T, T))
    block[:4, 1:3] = 0.5
    block[4:, 4] = 1.0
    m = atlas.head_measures(stack(block), TOKENS, seg)
    assert m["within sentence"][0, 0] == pytest.approx(1)
    assert atlas.pattern_labels(m, T)[0, 0] == "block"


def test_rollout_rows_sum_to_one_and_one_layer_is_half_attention_half_identity():
    rng = np.random.default_rng(1)
    att = rng.dirichlet(np.ones(T), size=(3, 4, T))  # (L, H, T, T)
    R = atlas.rollout(att)
    np.testing.assert_allclose(R.sum(-1), 1, atol=1e-12)
    one = 0.5 * att[0].mean(0) + 0.5 * np.eye(T)
    np.testing.assert_allclose(R[0], one / one.sum(-1, keepdims=True), atol=1e-12)
    a1 = 0.5 * att[1].mean(0) + 0.5 * np.eye(T)
    np.testing.assert_allclose(R[1], a1 @ R[0], atol=1e-12)


def test_js_of_a_head_with_itself_is_zero():
    rng = np.random.default_rng(2)
    w = rng.dirichlet(np.ones(T), size=(3, T))
    d = metrics.head_diversity(np.stack([w[0], w[0], w[1]]))
    assert d[0, 1] == 0 and d[0, 2] == d[2, 0] > 0


def test_link_ranking_top_is_the_argmax():
    rng = np.random.default_rng(3)
    att = rng.dirichlet(np.ones(T), size=(2, 3, T))
    ranking = atlas.link_ranking(att, 2, 4)
    l, h = np.unravel_index(att[:, :, 2, 4].argmax(), (2, 3))
    assert ranking[0][:2] == (l, h) and len(ranking) == 6
    assert [r[2] for r in ranking] == sorted((r[2] for r in ranking), reverse=True)


def test_value_weighted_is_attention_times_contribution_norm():
    torch.manual_seed(0)
    m = MultiHeadAttention(16, 4).eval()
    x = torch.randn(1, 5, 16)
    vw = atlas.value_weighted(m, x)
    with torch.no_grad():
        tr = m.trace(x)
        Wo = m.out_proj.weight  # (C, C)
        i, j, h = 1, 3, 2
        f = tr.v[0, h, j] @ Wo[:, h * 4 : (h + 1) * 4].T  # key j's contribution through head h
        assert vw[h, i, j] == pytest.approx(float(tr.weights[0, h, i, j] * f.norm()), rel=1e-5)


def test_measures_on_the_bundled_bert_are_finite_bounded_and_find_positional_heads(bert):
    for text in SENTENCES:
        run = bert.attend(text)
        m = atlas.head_measures(run.attentions, run.tokens, run.segment_ids)
        T_ = run.n_tokens
        for k, v in m.items():
            assert np.all(np.isfinite(v)), k
            if k.startswith("to "):
                assert np.all((v >= -1e-6) & (v <= 1 + 1e-6)), k
        assert np.all(m["entropy"] <= np.log(T_) + 1e-5) and np.all(m["entropy"] >= 0)
        assert np.all(m["confidence"] >= 0) and np.all(m["confidence"] <= 1 + 1e-6)
        # a head that parks on [CLS] is not confident (Voita et al. leave out the parking token)
        special = np.isin(run.tokens, ["[CLS]", "[SEP]"])
        expect = run.attentions[:, :, :, ~special].max(-1).mean(-1)  # (L, H)
        np.testing.assert_allclose(m["confidence"], expect, atol=1e-6)
        # what the bundled all-MiniLM-L6-v2 really does (checked on these sentences):
        assert m["to previous"].max() > 0.5 and m["to previous"][0, 2] > 0.9  # layer 0, head 2
        assert m["to next"].max() > 0.5 and m["to next"][1, 8] > 0.5  # layer 1, head 8
        assert m["to [CLS]"].max() > 0.7  # MiniLM's "vertical" heads read [CLS] more than [SEP]
        labels = atlas.pattern_labels(m, T_)
        assert {"vertical", "diagonal"} <= set(labels.ravel())
        R = atlas.rollout(run.attentions)
        np.testing.assert_allclose(R.sum(-1), 1, atol=1e-9)
        assert atlas.link_ranking(run.attentions, 2, 5)[0][:2] == tuple(
            np.unravel_index(run.attentions[:, :, 2, 5].argmax(), run.attentions.shape[:2])
        )


def test_punctuation_share_counts_only_periods_and_commas_as_clark_et_al():
    tokens = ["[CLS]", "wait", "!", "yes", ",", "now", ".", "[SEP]"]
    rng = np.random.default_rng(4)
    att = rng.dirichlet(np.ones(len(tokens)), size=(2, 3, len(tokens)))  # (L, H, T, T)
    m = atlas.head_measures(att, tokens)
    # Clark et al.'s notebook: a mask of the "." and "," keys, tiled over queries, summed, / T
    puncts = np.array([t in (".", ",") for t in tokens], dtype=float)
    selector = np.tile(puncts[None], (len(tokens), 1))
    expect = (att * selector[None, None]).sum(-1).sum(-1) / len(tokens)
    np.testing.assert_allclose(m["to punctuation"], expect, rtol=1e-6)
    assert not np.allclose(m["to punctuation"], expect + att[..., 2].mean(-1))  # "!" is not counted


def test_value_weighted_row_is_the_norm_of_the_sum_over_heads():
    torch.manual_seed(1)
    m = MultiHeadAttention(16, 4).eval()
    x = torch.randn(1, 5, 16)
    row = atlas.value_weighted_row(m, x, 2)
    with torch.no_grad():
        tr = m.trace(x)
        Wo = m.out_proj.weight  # (C, C)
        for j in range(5):  # Kobayashi et al. 2020: || sum_h alpha^h_ij f_h(x_j) ||
            total = sum(tr.weights[0, h, 2, j] * (tr.v[0, h, j] @ Wo[:, h * 4 : (h + 1) * 4].T) for h in range(4))
            assert row[j] == pytest.approx(float(total.norm()), rel=1e-5)
        per_head = atlas.value_weighted(m, x)[:, 2]  # (H, T)
    assert np.all(row <= per_head.sum(0) + 1e-6)  # triangle inequality: not the sum of norms
    assert not np.allclose(row, per_head.mean(0))


def test_describe_says_mostly_only_above_a_threshold():
    """A near-uniform head whose largest share is [CLS] at 14% was described as attending
    "mostly" to [CLS]; "mostly" needs half the weight, "widely" 90% of ln T."""
    T = 16
    tokens = ["[CLS]", *[f"w{i}" for i in range(T - 2)], "[SEP]"]
    uniform = np.full((1, 2, T, T), 1.0 / T, dtype=np.float32)
    uniform[0, 1] = np.eye(T, k=-1)  # head 1 reads the previous token ...
    uniform[0, 1, 0, 0] = 1.0  # ... and the first token itself
    m = atlas.head_measures(uniform, tokens)
    flat = atlas.describe(m, "heterogeneous", 0, 0, T)
    assert "mostly" not in flat and "widely (at least 90% of the most entropy" in flat
    assert f"ln T = {np.log(T):.2f}" in flat
    prev = atlas.describe(m, "diagonal", 0, 1, T)
    assert "attends mostly to the previous token" in prev
    assert m["entropy / ln T"][0, 0] == pytest.approx(1.0, rel=1e-5) and m["entropy / ln T"][0, 1] < 0.01


def test_a_sliding_window_caps_what_a_query_can_read_in_every_bound():
    """Past a sliding window of W, query i reads W keys, not i + 1: the entropy bound, the entropy
    share and the random-map baseline count only those (known answers, computed here by hand)."""
    import math

    from mha.analyses import metrics

    T, W, H = 9, 3, 4
    assert metrics.readable_keys(T, True, W).tolist() == [1, 2, 3, 3, 3, 3, 3, 3, 3]
    assert metrics.readable_keys(T, True).tolist() == list(range(1, T + 1))
    assert metrics.readable_keys(T).tolist() == [T] * T
    by_hand = sum(math.log(min(i + 1, W)) for i in range(1, T)) / (T - 1)
    assert atlas.most_entropy(T, True, W) == pytest.approx(by_hand, abs=1e-12)
    assert atlas.most_entropy(T, True) == pytest.approx(sum(math.log(i + 1) for i in range(1, T)) / (T - 1))
    even = np.zeros((H, T, T))  # every head even over the keys its window lets it read
    for i in range(T):
        lo = max(0, i - W + 1)
        even[:, i, lo : i + 1] = 1 / (i + 1 - lo)
    assert metrics.entropy_share(even, True, W) == pytest.approx(1.0)  # as even as it can be
    assert metrics.entropy_share(even, True) < 0.9  # against i + 1 keys it would look sharp
    # identical even heads: their shuffles within the window stay identical (0); over keys the
    # window hides, they would not
    assert metrics.shuffled_diversity(even, True, 4, W) == pytest.approx(0.0, abs=1e-9)
    assert metrics.shuffled_diversity(even, True, 4) > 0.05
    m = atlas.head_measures(even[None], [f"t{i}" for i in range(T)], causal=True, windows=(W,))
    assert m["entropy / ln T"][0] == pytest.approx(np.ones(H))


def test_the_even_rollout_baseline_is_the_rollout_of_even_maps():
    """even_rollout_share carries one row down the layers; it equals rollout() of the stacked even maps
    (with and without a window), and one full layer gives the share by hand: 0.5 / (i + 1)."""
    from mha.core.masks import attention_mask_for

    def by_rollout(L, T, token, windows):
        maps = []
        for layer in range(L):
            allowed = attention_mask_for(None, T, True, window=windows[layer]).numpy().astype(float)
            maps.append(allowed / allowed.sum(1, keepdims=True))
        return atlas.rollout(np.stack(maps)[:, None])[-1, token, 0]  # (L, 1, T, T) in

    for windows in [(None, None, None), (3, None, 3)]:
        for token in (0, 4, 11):
            got = atlas.even_rollout_share(3, 12, token, windows)
            assert got == pytest.approx(by_rollout(3, 12, token, windows), abs=1e-12)
    assert atlas.even_rollout_share(1, 12, 7) == pytest.approx(0.5 / 8)
    assert atlas.even_rollout_share(1, 12, 7, (3,)) == 0.0  # key 0 is outside query 7's window of 3


def test_the_sink_share_counts_only_queries_whose_window_reaches_the_sink():
    """Even causal maps over 5 tokens, the sink at 0: a full layer counts queries 1..4 (shares 1/2 ..
    1/5); a layer with a window of 2 keys counts query 1 alone (share 1/2): queries 2..4 cannot read
    the sink, and their zero weight there says nothing about parking."""
    from mha.analyses import sinks
    from mha.core.masks import attention_mask_for

    maps = []
    for w in (None, 2):
        allowed = attention_mask_for(None, 5, True, window=w).numpy().astype(float)
        maps.append((allowed / allowed.sum(1, keepdims=True))[None])  # (1, T, T)
    park = sinks.sink_share(np.stack(maps), [0], True, (None, 2))  # (L=2, H=1, T, T)
    assert park.counted == (4, 1) and park.windowed and park.queries == 4
    assert park.per_head[0, 0] == pytest.approx(np.mean([1 / 2, 1 / 3, 1 / 4, 1 / 5]))
    assert park.per_head[1, 0] == pytest.approx(0.5)
    assert not sinks.sink_share(np.stack(maps), [0], True).windowed  # no windows given: every layer counts 4
