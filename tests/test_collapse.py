"""Sharing Q/K/V across heads, on real BERT weights: the heads collapse, measurably."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.stats
import torch
from conftest import SENTENCES

from mha import MultiHeadAttention
from mha.analyses import collapse, metrics
from mha.analyses.collapse import CollapsePath
from mha.lesson import check_question

TOL = dict(rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def run(bert):
    return bert.attend(SENTENCES[0])


@pytest.mark.parametrize("source", [0, 5, "mean", "scaled"])
def test_fully_shared_heads_are_identical_in_every_layer(bert, run, source):
    H = bert.n_heads
    for layer in range(bert.n_layers):
        c = collapse.collapse_layer(bert, run, layer, CollapsePath(1.0, source))
        assert np.abs(c.weights - c.weights[:1]).max() < 1e-6
        assert metrics.mean_off_diagonal(c.diversity) < 1e-9
        for role in "qkv":
            np.testing.assert_allclose(c.overlap[role], np.ones((H, H)), atol=1e-6)
        assert c.effective_heads == pytest.approx(1.0, abs=1e-6) and c.distinct_maps == 1


def test_alpha_zero_is_bert_itself(bert, run):
    for layer in range(bert.n_layers):
        c = collapse.collapse_layer(bert, run, layer, CollapsePath(0.0))
        torch.testing.assert_close(torch.from_numpy(c.weights), torch.from_numpy(run.attentions[layer]), **TOL)
        assert metrics.mean_off_diagonal(c.diversity) > 0.05  # clearly different heads


def test_head_diversity_falls_monotonically_along_the_path(bert, run):
    for layer in (0, 3, 5):
        sweep = collapse.alpha_sweep(bert, run, layer, CollapsePath())
        js = [s["head diversity (JS)"] for s in sweep]
        assert all(a > b for a, b in zip(js, js[1:])), (layer, js)
        assert js[-1] < 1e-9 and js[0] > 0.05


def test_the_sweep_follows_the_overlap_of_every_projection(bert, run):
    """Sharing only K and V leaves W^Q where it was: the sweep must show W^K and W^V moving, not
    only W^Q (it followed W^Q alone, as if the three moved the same way)."""
    sweep = collapse.alpha_sweep(bert, run, 2, CollapsePath(roles=("k", "v")), steps=3)
    q = [s["subspace overlap W^Q"] for s in sweep]
    assert max(q) - min(q) < 1e-9  # W^Q is not shared: its overlap stays BERT's
    for role in "KV":
        moved = [s[f"subspace overlap W^{role}"] for s in sweep]
        assert moved[0] < 0.5 and moved[-1] == pytest.approx(1.0)


def test_sharing_only_q_and_k_collapses_patterns_but_not_values(bert, run):
    c = collapse.collapse_layer(bert, run, 2, CollapsePath(1.0, roles=("q", "k")))
    assert np.abs(c.weights - c.weights[:1]).max() < 1e-6  # same attention in every head ...
    assert metrics.mean_off_diagonal(c.overlap["v"]) < 0.5  # ... but values still differ
    D = bert.d_model // bert.n_heads
    heads = c.concat.reshape(len(c.concat), bert.n_heads, D)  # (T, H, D)
    assert np.abs(heads - heads[:, :1]).max() > 1e-2  # so the heads' outputs still differ
    full = collapse.collapse_layer(bert, run, 2, CollapsePath(1.0))
    full_heads = full.concat.reshape(len(full.concat), bert.n_heads, D)
    assert np.abs(full_heads - full_heads[:, :1]).max() < 1e-5  # unlike sharing Q, K and V


def test_shared_module_equals_interpolation_at_one_and_saves_parameters(bert, run):
    base = bert.scratch_layer(1)
    shared = collapse.shared_module(base, 3)
    end = collapse.interpolate(base, 1.0, 3)
    x = torch.from_numpy(run.hidden_states[1]).unsqueeze(0)
    with torch.no_grad():
        torch.testing.assert_close(shared(x)[0], end(x)[0], **TOL)
    assert shared.num_parameters() < base.num_parameters()
    C, H = bert.d_model, bert.n_heads
    assert base.num_parameters() - shared.num_parameters() == 3 * (C * C + C) - 3 * (C * C // H + C // H)


@pytest.mark.parametrize("roles", [("q",), ("v",), ("k", "q"), ("k", "v"), ("q", "v")])
def test_sharing_some_roles_is_structure_not_equal_values(bert, run, roles):
    """At alpha = 1 a shared role is ONE projection (C x D) for every head: fewer parameters,
    and the same outputs as the interpolated module whose heads merely hold equal weights."""
    base = bert.scratch_layer(3)
    C, H = bert.d_model, bert.n_heads
    shared = collapse.shared_module(base, "mean", roles)
    assert shared.role_heads == tuple(1 if r in roles else H for r in "qkv") and shared.shared_roles == tuple(
        r for r in "qkv" if r in roles
    )
    assert shared.num_parameters() == MultiHeadAttention.parameter_count(C, H, heads=shared.role_heads)
    assert shared.num_parameters() == base.num_parameters() - len(roles) * ((C * C + C) - (C * C // H + C // H))
    x = torch.from_numpy(run.hidden_states[3]).unsqueeze(0)
    with torch.no_grad():
        for got, want in zip(shared(x), collapse.interpolate(base, 1.0, "mean", roles)(x)):
            torch.testing.assert_close(got, want, **TOL)
    # the collapse page's module at alpha = 1 is this structure; below 1 every head keeps its weights
    at_one = collapse.collapse_layer(bert, run, 3, CollapsePath(1.0, "mean", roles), overlap_roles=roles)
    assert at_one.parameters == shared.num_parameters() < base.num_parameters()
    assert (
        collapse.collapse_layer(bert, run, 3, CollapsePath(0.5, "mean", roles), overlap_roles=()).parameters
        == base.num_parameters()
    )
    for r in roles:
        np.testing.assert_array_equal(at_one.overlap[r], np.ones((H, H)))  # one subspace, exactly


def test_collapse_leaves_the_source_module_and_model_untouched(bert):
    base = bert.scratch_layer(0)
    before = {k: v.clone() for k, v in base.state_dict().items()}
    collapse.interpolate(base, 0.7)
    collapse.shared_module(base, "mean")
    for k, v in base.state_dict().items():
        assert torch.equal(v, before[k])
    torch.testing.assert_close(bert.model.encoder.layer[0].attention.self.query.weight, before["q_proj.weight"])


def test_invalid_collapse_arguments_raise():
    m = MultiHeadAttention(32, 4)
    with pytest.raises(ValueError, match="alpha"):
        collapse.interpolate(m, 1.5)
    with pytest.raises(ValueError, match="roles"):
        collapse.interpolate(m, 0.5, roles=("x",))
    with pytest.raises(ValueError, match="source"):
        collapse.shared_module(m, 9)
    with pytest.raises(ValueError, match="per head"):
        collapse.shared_module(MultiHeadAttention(32, 4, (1, 1, 1)))
    with pytest.raises(ValueError, match="per head"):
        collapse.interpolate(MultiHeadAttention(32, 4, (1, 4, 4)), 0.5)  # Q already shared: nothing to start from
    with pytest.raises(ValueError, match="per head"):
        collapse.interpolate(MultiHeadAttention(32, 4, (4, 1, 4)), 0.5)  # K and V split apart: no model's structure
    # multi-query is a model's own structure (Gemma 3 270M): the path starts there, and shared Q, K, V at the end
    # is one map for every head
    mqa = MultiHeadAttention(32, 4, (4, 1, 1))
    shared = collapse.shared_module(mqa, "mean")
    assert shared.role_heads == (1, 1, 1)
    w = shared(torch.randn(1, 6, 32))[1][0]  # (H, T, T)
    assert all(torch.equal(w[0], w[h]) for h in range(4))
    with pytest.raises(ValueError, match="alpha"):
        CollapsePath(1.5)
    with pytest.raises(ValueError, match="roles"):
        CollapsePath(0.5, roles=("x",))
    with pytest.raises(ValueError, match="source"):
        CollapsePath(0.5, source="first")
    assert CollapsePath(0.3, roles=("v", "q", "q")) == CollapsePath(0.3, roles=("q", "v"))  # one value per setting
    with pytest.raises(ValueError, match="alpha = 0 and alpha = 1"):
        check_question.answer({"alpha": 0.0}, {"alpha": 0.5}, 32, 4, CollapsePath(roles=("q",)))


def test_encode_with_no_replacement_reproduces_bert(bert, run):
    np.testing.assert_allclose(bert.encode_with(run), run.hidden_states, atol=2e-5)


def test_whole_model_effect_costs_more_when_more_layers_share(bert, run):
    none = collapse.whole_model_effect(bert, run, [], CollapsePath(1.0))
    one = collapse.whole_model_effect(bert, run, [3], CollapsePath(1.0))
    every = collapse.whole_model_effect(bert, run, range(bert.n_layers), CollapsePath(1.0))
    assert none["sentence embedding cosine"] > 0.9999
    assert every["sentence embedding cosine"] < one["sentence embedding cosine"] < 0.9999
    assert every["mean token cosine"] < 0.9


# ---- the measures themselves, against hand-built cases and scipy


def test_head_diversity_matches_scipy_and_is_symmetric():
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(7), size=(4, 7)).astype(np.float32)  # (H, T, T)
    d = metrics.head_diversity(w)
    assert np.allclose(d, d.T) and np.all(np.diag(d) == 0)
    from scipy.spatial.distance import jensenshannon

    expect = np.mean([jensenshannon(w[1, t], w[2, t]) ** 2 for t in range(7)])
    assert d[1, 2] == pytest.approx(expect, rel=1e-5)
    same = np.stack([w[0]] * 3)
    assert metrics.mean_off_diagonal(metrics.head_diversity(same)) == 0
    # heads with the same rows (computed once) among different ones: every pair still scipy's
    mixed = w[[0, 1, 0, 2, 1, 3]]  # (6, T, T)
    d = metrics.head_diversity(mixed)
    expect = [[np.mean(jensenshannon(a, b, axis=-1) ** 2) for b in mixed.astype(np.float64)] for a in mixed]
    np.testing.assert_allclose(d, np.nan_to_num(expect), atol=1e-6)
    assert d[0, 2] == d[1, 4] == 0 and d[2, 5] == d[0, 5] > 0
    one_hot = np.stack([np.eye(5), np.roll(np.eye(5), 1, axis=1)])  # disjoint supports
    assert metrics.head_diversity(one_hot)[0, 1] == pytest.approx(np.log(2), rel=1e-5)


def test_head_diversity_equals_scipy_on_real_attention_at_512_tokens(bert):
    from scipy.spatial.distance import jensenshannon

    from mha.lesson.examples import DEFAULT_TEXT

    run = bert.attend(" ".join([DEFAULT_TEXT] * 40))  # truncated to 512 tokens
    assert run.n_tokens == 512
    w = run.attentions[2].copy()
    w[:, 5] = 0.0  # a masked query row: no attention at all
    w[1, 7] *= 3.0  # a row that does not sum to 1: normalised, as scipy does
    H = w.shape[0]
    expect = np.zeros((H, H))
    for a in range(H):
        for b in range(H):
            d = jensenshannon(w[a].astype(np.float64), w[b].astype(np.float64), axis=-1) ** 2  # (T,)
            expect[a, b] = np.nan_to_num(d, nan=0.0).mean()
    np.testing.assert_allclose(metrics.head_diversity(w), expect, atol=1e-6)
    # the same measure between the same head of two layers (the ladder's drift): one implementation
    other = run.attentions[3]
    drift = np.nan_to_num(jensenshannon(w.astype(np.float64), other.astype(np.float64), axis=-1) ** 2, nan=0.0)
    np.testing.assert_allclose(metrics.js_divergence(w, other), drift, atol=2e-6)  # float32, per row


def test_subspace_overlap_matches_scipy_subspace_angles():
    rng = np.random.default_rng(1)
    H, D, C = 3, 4, 12
    W = rng.normal(size=(H * D, C))
    o = metrics.subspace_overlap(W, H)
    for i, j in [(0, 1), (1, 2)]:
        angles = scipy.linalg.subspace_angles(W[i * D : (i + 1) * D].T, W[j * D : (j + 1) * D].T)
        assert o[i, j] == pytest.approx(np.mean(np.cos(angles) ** 2), rel=1e-6)
    same = np.concatenate([W[:D]] * H)
    np.testing.assert_allclose(metrics.subspace_overlap(same, H), 1.0, atol=1e-9)
    ortho = np.eye(H * D, C)  # heads on disjoint coordinate axes
    np.testing.assert_allclose(metrics.subspace_overlap(ortho, H), np.eye(H), atol=1e-12)


def test_effective_rank_bounds():
    rng = np.random.default_rng(2)
    assert metrics.effective_rank(np.eye(6)) == pytest.approx(6)
    assert metrics.effective_rank(np.outer(rng.normal(size=5), rng.normal(size=8))) == pytest.approx(1)
    h = rng.normal(size=(20, 4))
    assert metrics.effective_rank(np.concatenate([h] * 6, axis=1)) <= 4 + 1e-9  # H copies of D columns
    assert 1 <= metrics.effective_rank(rng.normal(size=(20, 24))) <= 20


def test_answer_numbers_and_csv(bert, run):
    import io

    import pandas as pd

    sweep = collapse.alpha_sweep(bert, run, 2, CollapsePath(1.0, 0), steps=3)
    a = check_question.answer(sweep[0], sweep[-1], bert.d_model, bert.n_heads, CollapsePath(roles=("v", "q", "k")))
    C, D = bert.d_model, bert.d_model // bert.n_heads
    assert a.roles == ("k", "q", "v") and a.same_attention and a.one_head
    assert a.heads_bert > 10 and a.heads_shared == pytest.approx(1.0, abs=1e-6)
    assert a.maps_bert == bert.n_heads and a.maps_shared == 1
    assert a.overlap_shared == {"k": 1.0, "q": 1.0, "v": 1.0}
    assert a.diversity_bert == sweep[0]["head diversity (JS)"] > 0.05 and a.diversity_shared < 1e-9
    assert a.params_distinct == MultiHeadAttention.parameter_count(C, bert.n_heads)
    assert a.params_shared == MultiHeadAttention.parameter_count(C, bert.n_heads, (1, 1, 1))
    kv_path = CollapsePath(1.0, 0, ("k", "v"))
    kv_sweep = collapse.alpha_sweep(bert, run, 2, kv_path, steps=2)
    kv = check_question.answer(kv_sweep[0], kv_sweep[-1], C, bert.n_heads, kv_path)  # parameters: the modules' own
    assert set(kv.overlap_bert) == {"k", "v"}  # the overlap of what is shared, not of W^Q
    assert not kv.same_attention and not kv.one_head
    assert kv.params_saved == 2 * ((C * C + C) - (C * D + D))  # only W^K and W^V (and biases) shrink
    table = pd.read_csv(io.BytesIO(collapse.sweep_csv(sweep)))
    assert list(table.columns) == list(sweep[0]) and len(table) == 3
    np.testing.assert_allclose(table["head diversity (JS)"], [r["head diversity (JS)"] for r in sweep], rtol=1e-5)


@pytest.mark.parametrize("layers", [[3], [1, 4], range(6)])
def test_whole_model_effect_equals_the_full_forward_pass(bert, run, layers):
    """Starting at the first changed layer from the run's own states = running BERT from its
    embeddings with the changed layers (encode_with, checked against Transformers above)."""
    got = collapse.whole_model_effect(bert, run, layers, CollapsePath(0.7, "mean", ("q", "v")))
    replace = {i: collapse.interpolate(bert.scratch_layer(i), 0.7, "mean", ("q", "v")) for i in layers}
    new, old = bert.encode_with(run, replace=replace)[-1], run.hidden_states[-1]  # (T, C) each
    cos = (new * old).sum(-1) / np.linalg.norm(new, axis=-1) / np.linalg.norm(old, axis=-1)
    emb = new.mean(0) @ old.mean(0) / np.linalg.norm(new.mean(0)) / np.linalg.norm(old.mean(0))
    assert got["sentence embedding cosine"] == pytest.approx(emb, abs=2e-5)
    assert got["mean token cosine"] == pytest.approx(cos.mean(), abs=2e-5)
    assert got["min token cosine"] == pytest.approx(cos.min(), abs=2e-5)


def test_whole_model_effect_runs_only_the_layers_from_the_first_changed_one(bert, run):
    ran = []
    hooks = [
        layer.intermediate.register_forward_hook(lambda *_, i=i: ran.append(i))
        for i, layer in enumerate(bert.model.encoder.layer)
    ]
    try:
        collapse.whole_model_effect(bert, run, [5], CollapsePath(1.0))
        collapse.whole_model_effect(bert, run, [4, 2], CollapsePath(1.0))
    finally:
        for h in hooks:
            h.remove()
    assert ran == [5, 2, 3, 4, 5]  # the layers before are the run's own hidden states


def test_head_spread_reads_identical_heads_as_zero_and_distinct_ones_by_their_largest_gap():
    """Known answers: copies of one sharp head read 0 (one map); a flat head beside a sharp one
    reads the sharp head's largest weight minus 1/T; the lesson, the build and the training pages
    use this one function."""
    from mha.analyses import metrics

    T = 8
    sharp = np.eye(T)[np.roll(np.arange(T), 1)]  # (T, T): every token reads the one before it
    assert metrics.head_spread(np.stack([sharp] * 4)) == 0.0
    flat = np.full((T, T), 1 / T)
    assert metrics.head_spread(np.stack([sharp, flat])) == pytest.approx(1 - 1 / T)
    # between any two heads, not only from head 0: two sharp heads reading different tokens
    # differ by 1, though each differs from the flat head 0 by 1 - 1/T
    assert metrics.head_spread(np.stack([flat, sharp, np.eye(T)])) == pytest.approx(1.0)


def _expanded(m: MultiHeadAttention) -> MultiHeadAttention:
    """A distinct-projection copy of a grouped-query module: each K/V group's rows repeated for
    its heads (the same function, computed the way a distinct module computes it)."""
    H, D = m.n_heads, m.d_head
    out = m.with_heads(None)
    with torch.no_grad():
        out.q_proj.load_state_dict(m.q_proj.state_dict())
        out.out_proj.load_state_dict(m.out_proj.state_dict())
        for role in "kv":
            src, dst = getattr(m, f"{role}_proj"), getattr(out, f"{role}_proj")
            n = src.weight.shape[0] // D
            dst.weight.copy_(src.weight.reshape(n, D, -1).repeat_interleave(H // n, 0).reshape(H * D, -1))
            if src.bias is not None:
                dst.bias.copy_(src.bias.reshape(n, D).repeat_interleave(H // n, 0).reshape(H * D))
    return out.eval()


@pytest.mark.parametrize("roles", [("q",), ("k", "v"), ("k", "q"), ("k", "q", "v")])
@pytest.mark.parametrize("source", ["scaled", "mean", 4])
def test_a_grouped_query_layer_collapses_like_its_distinct_expansion(roles, source):
    """The path from a GQA layer (heads=(6, 2, 2), causal, rotary) works on its own structure, a K/V
    group pulled as one; checked against the same path from the distinct layer that repeats each
    group's K/V for its heads (independent: the distinct path is the one BERT takes)."""
    torch.manual_seed(0)
    gqa = MultiHeadAttention(48, 6, (6, 2, 2), bias=False, causal=True, rope_theta=10_000.0).eval()
    x = torch.randn(1, 7, 48)
    flat = _expanded(gqa)
    with torch.no_grad():
        torch.testing.assert_close(flat(x)[0], gqa(x)[0], atol=1e-5, rtol=0)  # the expansion is the same layer
        for alpha in (0.0, 0.4, 1.0):
            path = CollapsePath(alpha, source, roles)
            ours, theirs = collapse.module_at(gqa, path), collapse.module_at(flat, path)
            torch.testing.assert_close(ours(x)[1], theirs(x)[1], atol=1e-5, rtol=0)  # attention weights
            torch.testing.assert_close(ours(x)[0], theirs(x)[0], atol=1e-5, rtol=0)  # outputs
            if alpha == 1.0:  # structure: a shared role is one projection; the others keep theirs
                assert ours.role_heads == tuple(1 if r in roles else n for r, n in zip("qkv", (6, 2, 2)))
                assert ours.causal and ours.rope_theta == 10_000.0
            else:
                assert ours.role_heads == (6, 2, 2)


def _distinct_the_long_way(maps: np.ndarray, tolerance: float) -> int:
    """metrics.distinct_maps by its definition: every pair compared whole, in float64."""
    kept: list[np.ndarray] = []
    for m in maps.astype(np.float64):
        if all(np.abs(m - k).max() > tolerance for k in kept):
            kept.append(m)
    return len(kept)


def test_distinct_maps_and_entropy_share_against_the_long_way_round():
    """The shortcuts of metrics.distinct_maps (the first rows first) and entropy_share (float32 in
    one pass) against their definitions in float64: maps that differ only in their last row or by
    less than the tolerance, and rows with zero weights."""
    rng = np.random.default_rng(7)
    T = 9
    maps = rng.dirichlet(np.ones(T), size=(4, T)).astype(np.float32)  # (4, T, T)
    maps[1] = maps[0]
    maps[1, -1] = np.roll(maps[0, -1], 1)  # differs from head 0 in its last row only
    maps[2] = maps[0] + np.float32(4e-6)  # within the tolerance of head 0
    maps[3] = maps[1]  # the same as head 1
    assert metrics.distinct_maps(maps, 1e-5) == _distinct_the_long_way(maps, 1e-5) == 2
    assert metrics.distinct_maps(maps, 1e-7) == _distinct_the_long_way(maps, 1e-7) == 3
    maps[:, :, 0] = 0  # a key no head reads
    w = maps.astype(np.float64) / maps.astype(np.float64).sum(-1, keepdims=True)
    ent = scipy.stats.entropy(w, axis=-1)  # (H, T), nats
    assert metrics.entropy_share(w.astype(np.float32)) == pytest.approx(ent.mean() / np.log(T), rel=1e-6)
    assert metrics.entropy_share(w) == pytest.approx(ent.mean() / np.log(T), rel=1e-12)


def test_interpolate_borrows_what_it_does_not_pull_as_its_docstring_says(bert):
    """collapse.interpolate: the pulled projections are new tensors, W^O and the unpulled ones are
    the model's own (the same storage), so the docstring's "borrowed, not a copy" is the truth."""
    m = bert.scratch_layer(0)
    pulled = collapse.interpolate(m, 0.5, roles=("q", "k"))
    same = lambda a, b: a.data_ptr() == b.data_ptr()  # noqa: E731
    assert not same(pulled.q_proj.weight, m.q_proj.weight) and not same(pulled.k_proj.weight, m.k_proj.weight)
    assert same(pulled.v_proj.weight, m.v_proj.weight) and same(pulled.out_proj.weight, m.out_proj.weight)


def test_random_maps_as_sharp_as_the_heads_are_the_diversity_baseline():
    """Known answers: identical one-hot heads have diversity 0, yet random maps exactly as sharp
    differ by about ln 2 (1 - 1/T) (two one-hot rows: ln 2 unless on one key); flat heads give 0
    both ways (a flat head is not a collapse: random flat maps are identical too). On attention
    with rows of mixed sharpness the shuffle keeps every row's sorted weights, a causal row's
    keys 0..i only, and its diversity is scipy's jensenshannon between the shuffled heads."""
    from scipy.spatial.distance import jensenshannon

    T = 16
    sharp = np.broadcast_to(np.eye(T, dtype=np.float32), (5, T, T)).copy()
    assert metrics.mean_off_diagonal(metrics.head_diversity(sharp)) == 0.0
    assert metrics.shuffled_diversity(sharp, seeds=40) == pytest.approx(np.log(2) * (1 - 1 / T), rel=0.03)
    flat = np.full((5, T, T), 1 / T, dtype=np.float32)
    assert metrics.shuffled_diversity(flat) == pytest.approx(0.0, abs=1e-6)
    rng = np.random.default_rng(5)
    causal = np.tril(rng.gamma(0.3, size=(4, T, T))).astype(np.float32)  # (H, T, T), mixed sharpness
    causal /= causal.sum(-1, keepdims=True)
    got = metrics.shuffled_diversity(causal, causal=True, seeds=1)
    mixed = np.zeros_like(causal)
    draw = np.random.default_rng(0)
    for i in range(T):
        mixed[:, i, : i + 1] = draw.permuted(causal[:, i, : i + 1], axis=-1)
    np.testing.assert_array_equal(np.sort(mixed, -1), np.sort(causal, -1))  # the same weights in every row
    assert not np.triu(mixed, 1).any()  # nothing after the query
    p = mixed[:, 1:].astype(np.float64)  # the first row has one key: left out, as diversity leaves it
    pairs = [(a, b) for a in range(4) for b in range(a + 1, 4)]
    want = np.mean([np.mean(jensenshannon(p[a], p[b], axis=-1) ** 2) for a, b in pairs])
    assert got == pytest.approx(want, abs=1e-5)
