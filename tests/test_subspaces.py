"""Each head's query/key picture on the real bundled weights: the same numbers as trace, faithful
to the scores, different per head, and one picture when W^Q and W^K are shared."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.special
import torch
from conftest import SENTENCES, weights_digest
from scipy.spatial import procrustes

from mha import MultiHeadAttention
from mha.analyses import subspaces
from mha.analyses.collapse import CollapsePath


@pytest.fixture(scope="module")
def run(bert):
    return bert.attend(SENTENCES[0])


def test_head_spaces_are_the_trace_queries_and_keys(bert, run):
    m = bert.scratch_layer(3)
    x = torch.from_numpy(run.hidden_states[3])
    with torch.no_grad():
        tr = m.trace(x.unsqueeze(0))
    for given in (x, x.unsqueeze(0), run.hidden_states[3]):
        sp = subspaces.head_spaces(m, given)
        assert sp.queries.dtype == np.float32 and sp.queries.shape == (bert.n_heads, run.n_tokens, 32)
        np.testing.assert_array_equal(sp.queries, tr.q[0].numpy())
        np.testing.assert_array_equal(sp.keys, tr.k[0].numpy())
    with pytest.raises(ValueError, match="shape"):
        subspaces.head_spaces(m, x.unsqueeze(0).repeat(2, 1, 1))


def test_the_picture_is_the_best_rank_two_match_to_the_centred_scores(bert, run):
    sp = subspaces.head_spaces(bert.scratch_layer(2), run.hidden_states[2])
    maps = subspaces.head_maps(sp)
    for h in (0, 5, 11):
        keys = sp.keys[h] - sp.keys[h].mean(0)
        S = sp.queries[h].astype(np.float64) @ keys.T / np.sqrt(32)  # (T, T) what the softmax sees
        u, s, vt = np.linalg.svd(S)
        best = (u[:, :2] * s[:2]) @ vt[:2]  # Eckart-Young: the best rank-2 approximation
        np.testing.assert_allclose(maps.queries[h] @ maps.keys[h].T, best, atol=1e-4)
        assert maps.fidelity[h] == pytest.approx((s[:2] ** 2).sum() / (s**2).sum(), rel=1e-6)
        # centring the keys changes no softmax: every row shifts by one constant
        raw = sp.queries[h] @ sp.keys[h].T / np.sqrt(32)
        np.testing.assert_allclose(scipy.special.softmax(raw, -1), scipy.special.softmax(S, -1), atol=1e-6)
    assert np.all((maps.fidelity > 0) & (maps.fidelity <= 1 + 1e-9))


def test_fidelity_is_one_for_rank_two_scores_and_lower_otherwise():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((1, 20, 8)), rng.standard_normal((1, 20, 8))
    low_q, low_k = q.copy(), k.copy()
    low_q[..., 2:] = 0  # queries in a 2-D subspace: the scores have rank <= 2
    full = subspaces.head_maps(subspaces.HeadSpaces(q.astype(np.float32), k.astype(np.float32)))
    low = subspaces.head_maps(subspaces.HeadSpaces(low_q.astype(np.float32), low_k.astype(np.float32)))
    assert low.fidelity[0] == pytest.approx(1.0, abs=1e-9)
    assert 0 < full.fidelity[0] < low.fidelity[0]


def test_distinct_heads_give_different_pictures_in_every_layer(bert, run):
    for layer in range(bert.n_layers):
        maps = subspaces.layer_maps(bert, run, layer)
        points = np.concatenate([maps.queries, maps.keys], 1)  # (H, 2T, 2)
        H = points.shape[0]
        disparity = [procrustes(points[i], points[j])[2] for i in range(H) for j in range(i + 1, H)]
        assert np.median(disparity) > 0.1, layer
        assert maps.weights.shape == (H, run.n_tokens, run.n_tokens)
        np.testing.assert_allclose(maps.weights, run.attentions[layer], atol=1e-5)


@pytest.mark.parametrize("roles", [("q", "k"), ("q", "k", "v")])
def test_shared_queries_and_keys_give_one_picture(bert, run, roles):
    for layer in range(bert.n_layers):
        maps = subspaces.layer_maps(bert, run, layer, CollapsePath(1.0, 4, roles))
        assert np.abs(maps.queries - maps.queries[:1]).max() < 1e-5
        assert np.abs(maps.keys - maps.keys[:1]).max() < 1e-5
        assert subspaces.max_map_difference(maps) < 1e-5
    kv = subspaces.layer_maps(bert, run, 0, CollapsePath(1.0, 4, ("k", "v")))  # queries still distinct
    assert subspaces.max_map_difference(kv) > 0.1


def dots(maps):
    """Every head's query . key matrix of a picture (H, T, T): what an alignment must keep."""
    return maps.queries.astype(np.float64) @ maps.keys.astype(np.float64).transpose(0, 2, 1)


def test_alpha_frames_run_from_bert_to_one_picture(bert, run):
    frames = subspaces.alpha_frames(bert, run, 1, CollapsePath())
    assert [a for a, _ in frames] == pytest.approx(np.linspace(0, 1, 11))
    assert frames[0][1].weights is None
    first, last = subspaces.layer_maps(bert, run, 1), subspaces.layer_maps(bert, run, 1, CollapsePath(1.0))
    np.testing.assert_allclose(dots(frames[0][1]), dots(first), atol=1e-4)  # the same picture, maybe turned
    np.testing.assert_array_equal(frames[-1][1].queries, last.queries)  # the shared end as it is
    assert subspaces.max_map_difference(frames[-1][1]) < 1e-5 < subspaces.max_map_difference(frames[0][1])


def test_frames_are_aligned_so_that_only_real_change_moves_a_point(bert, run):
    """Each frame has its own SVD basis and sign rule: without alignment an axis swap or a flip
    between two frames looks like movement. Aligned, a turned copy of the next frame lands on it,
    every query . key product is kept, and the steps between frames shrink."""
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(2, 5, 2)).astype(np.float32)  # (H = 2, T = 5, 2)
    swapped = pts[..., ::-1] * np.array([1, -1], np.float32)  # axes swapped, one flipped
    a = subspaces.HeadMaps(swapped, swapped * 0.5, np.ones(2))
    b = subspaces.HeadMaps(pts, pts * 0.5, np.ones(2))
    aligned = subspaces.aligned_frames([a, b])
    np.testing.assert_allclose(aligned[0].queries, b.queries, atol=1e-6)  # the swap is gone
    np.testing.assert_allclose(dots(aligned[0]), dots(a), atol=1e-5)
    raw = [
        subspaces.replace(subspaces.layer_maps(bert, run, 1, CollapsePath(float(al))), weights=None)
        for al in np.linspace(0, 1, 11)
    ]
    done = [m for _, m in subspaces.alpha_frames(bert, run, 1, CollapsePath())]
    for r, d in zip(raw, done):
        np.testing.assert_allclose(dots(d), dots(r), atol=1e-4)

    def steps(frames):
        return [
            np.abs(np.concatenate([f.queries, f.keys], 1) - np.concatenate([g.queries, g.keys], 1)).max()
            for f, g in zip(frames, frames[1:])
        ]

    assert sum(steps(done)) < 0.5 * sum(steps(raw))


def test_weight_spectra_against_scipy(bert):
    m = bert.scratch_layer(4)
    ws = subspaces.weight_spectra(m)
    D = m.d_head
    wq, wk = m.q_proj.weight.double().numpy(), m.k_proj.weight.double().numpy()
    for h in (0, 7):
        product = wq[h * D : (h + 1) * D].T @ wk[h * D : (h + 1) * D]  # W_i^Q W_i^K^T, C x C
        np.testing.assert_allclose(ws.per_head[h], scipy.linalg.svdvals(product)[:D], rtol=1e-6, atol=1e-9)
        assert scipy.linalg.svdvals(product)[D] < 1e-9 * ws.per_head[h][0]  # rank at most d_k
    np.testing.assert_allclose(ws.query, scipy.linalg.svdvals(wq), rtol=1e-9)
    np.testing.assert_allclose(ws.key, scipy.linalg.svdvals(wk), rtol=1e-9)
    # BERT's heads share directions: fewer for 90 % of the energy than unrelated random ones
    assert ws.energy_rank("query") < ws.energy_rank("reference") and ws.energy_rank("key") < ws.energy_rank("reference")
    with pytest.raises(ValueError, match="per head"):
        subspaces.weight_spectra(MultiHeadAttention(32, 4, (1, 1, 1)))


def test_weight_spectra_of_a_grouped_query_layer_read_each_heads_group():
    """With K/V in groups, head i's product is W_i^Q times its group's W^K (scipy, slice by slice)."""
    torch.manual_seed(1)
    m = MultiHeadAttention(48, 6, (6, 2, 2), bias=False, causal=True, rope_theta=10_000.0)
    ws = subspaces.weight_spectra(m)
    D = m.d_head
    wq, wk = m.q_proj.weight.double().detach().numpy(), m.k_proj.weight.double().detach().numpy()
    for h in range(6):
        g = h // 3
        product = wq[h * D : (h + 1) * D].T @ wk[g * D : (g + 1) * D]  # (C, C)
        np.testing.assert_allclose(ws.per_head[h], scipy.linalg.svdvals(product)[:D], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ws.key, scipy.linalg.svdvals(wk), rtol=1e-9)
    assert ws.key.shape == (2 * D,)


def test_the_rotated_baseline_tells_shared_directions_from_uneven_spectra():
    """Known answers: heads that are copies of one slice share every direction (the stack needs
    no more than d_k directions, far fewer than its baseline); heads with unrelated random
    directions and uneven spectra need about as many as the baseline (which keeps their spectra),
    while a plain Gaussian reference would wrongly call them shared."""
    rng = np.random.default_rng(3)
    H, D, C = 8, 8, 64
    uneven = np.geomspace(10, 0.1, D)  # (D,): one head's singular values, fast decay

    def head(v):  # (D, C): singular values `uneven` along the D orthonormal rows of v
        return uneven[:, None] * v

    one = np.linalg.qr(rng.standard_normal((C, D)))[0].T  # (D, C)
    copies = np.vstack([head(one)] * H)  # (H*D, C)
    unrelated = np.vstack([head(np.linalg.qr(rng.standard_normal((C, D)))[0].T) for _ in range(H)])

    def rank(s, share=0.9):
        s2 = s**2
        return int(np.searchsorted(np.cumsum(s2) / s2.sum(), share) + 1)

    shared = rank(scipy.linalg.svdvals(copies))
    assert shared <= D and 3 * shared <= rank(subspaces.rotated_stack(copies, H, rng))
    real, base = rank(scipy.linalg.svdvals(unrelated)), rank(subspaces.rotated_stack(unrelated, H, rng))
    gaussian = rank(scipy.linalg.svdvals(rng.standard_normal((H * D, C))))
    assert abs(real - base) <= 0.15 * base and real < gaussian / 2, (real, base, gaussian)


def test_pool_of_bundled_sentences(bert, run):
    texts = subspaces.pool_sentences()
    assert 45 <= len(texts) <= 60 and all(t and not t.startswith("#") for t in texts)
    runs = [run, *(bert.attend(t) for t in texts[:5])]
    p = subspaces.pool_spaces(bert, runs, 2)
    N = sum(r.n_tokens for r in runs)
    assert p.queries.shape == p.keys.shape == (bert.n_heads, N, 32) and len(p.tokens) == N
    assert (p.sentence == 0).sum() == run.n_tokens and p.position[0] == 0 and p.position[run.n_tokens - 1] == 1
    first = slice(0, run.n_tokens)
    np.testing.assert_allclose(p.keys[:, first].mean(1), 0, atol=1e-5)  # centred per sentence
    maps = subspaces.pool_maps(p)
    assert maps.queries.shape == (bert.n_heads, N, 2) and np.all(maps.fidelity <= 1 + 1e-9)
    # the fidelity counts only query-key pairs within a sentence, which a softmax compares
    h, scale = 3, 1 / np.sqrt(32)
    residual = energy = 0.0
    for n in range(len(runs)):
        i = p.sentence == n
        s = (p.queries[h, i] * scale).astype(np.float64) @ p.keys[h, i].astype(np.float64).T
        residual += ((s - maps.queries[h, i].astype(np.float64) @ maps.keys[h, i].astype(np.float64).T) ** 2).sum()
        energy += (s**2).sum()
    assert maps.fidelity[h] == pytest.approx(1 - residual / energy, rel=1e-6)
    # a pool of one sentence: the picture is that sentence's own best rank-2 fit, the same fidelity
    alone = subspaces.pool_maps(subspaces.pool_spaces(bert, [run], 2))
    np.testing.assert_allclose(alone.fidelity, subspaces.layer_maps(bert, run, 2).fidelity, atol=1e-5)
    assert subspaces.token_kinds(["[CLS]", "the", "##s", ",", "...", "[SEP]"]) == [
        "special",
        "word",
        "word",
        "punctuation",
        "punctuation",
        "special",
    ]


def test_the_cached_model_is_untouched(bert, run):
    before = weights_digest(bert.model)
    subspaces.alpha_frames(bert, run, 0, CollapsePath(1.0, 0, ("q", "k")))
    subspaces.layer_maps(bert, run, 5, CollapsePath(1.0))
    subspaces.weight_spectra(bert.scratch_layer(5))
    subspaces.pool_spaces(bert, [run], 3)
    assert weights_digest(bert.model) == before


def test_what_a_module_shares_is_read_from_its_structure():
    """A module sharing Q and K but not V is neither "distinct" nor "shared", and the weight spectra
    (per-head W_i^Q, W_i^K) refuse it with a message instead of reading one slice as twelve."""
    from mha import MultiHeadAttention

    assert MultiHeadAttention(32, 4).projection == "distinct"
    assert MultiHeadAttention(32, 4, (1, 1, 1)).projection == "shared"
    assert MultiHeadAttention(32, 4, heads=(1, 1, 4)).projection == "mixed"
    assert MultiHeadAttention(32, 4, (4, 2, 2)).projection == "mixed"
    assert MultiHeadAttention(32, 1).projection == "distinct"
    with pytest.raises(ValueError, match="W\\^Q per head"):
        subspaces.weight_spectra(MultiHeadAttention(32, 4, heads=(1, 1, 4)))
    mqa = subspaces.weight_spectra(MultiHeadAttention(32, 4, heads=(4, 1, 1)))  # one K for every head: multi-query
    assert mqa.per_head.shape == (4, 8) and mqa.key.shape == (8,)  # each head its W_i^Q with the one W^K (8 rows)
