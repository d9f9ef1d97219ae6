"""Within- and across-group head diversity of a GQA model, on cases whose answer is known, against
scipy, and beside its baseline (every other equal-size partition of the heads)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from mha.analyses import groups


def causal_rows(rng, H, T, sharp=True):
    """(H, T, T) causal attention: each head a random sharp (or flat) row per query."""
    w = np.zeros((H, T, T))
    for h in range(H):
        for t in range(T):
            logits = rng.normal(size=t + 1) * (8.0 if sharp else 0.0)
            w[h, t, : t + 1] = np.exp(logits) / np.exp(logits).sum()
    return w


def test_copies_within_groups_read_as_identical_and_rank_first():
    rng = np.random.default_rng(0)
    base = causal_rows(rng, 3, 12)  # three sharp, different heads
    attn = np.repeat(base, 3, axis=0)[None]  # (1, 9, T, T): each group of 3 is one head copied
    d = groups.layer_diversity(attn)
    g = groups.group_diversity([d], 9, 3)
    assert g.within[0] == pytest.approx(0.0, abs=1e-9) and g.across[0] > 0.1
    assert g.n_partitions == 280 and g.rank[0] == pytest.approx(1 / 280) and g.layers_more_alike == 1


def test_flat_heads_do_not_read_as_groups():
    """Every head uniform over the keys it may read: no pair differs, so no grouping stands out."""
    flat = causal_rows(np.random.default_rng(1), 9, 10, sharp=False)[None]
    g = groups.group_diversity([groups.layer_diversity(flat)], 9, 3)
    assert g.within[0] == pytest.approx(0.0, abs=1e-9) and g.across[0] == pytest.approx(0.0, abs=1e-9)
    assert g.rank[0] == 1.0 and g.layers_more_alike == 0  # a tie is not "more alike"


def test_unrelated_heads_sit_among_the_partitions():
    rng = np.random.default_rng(2)
    maps = [causal_rows(rng, 9, 14)[None] for _ in range(12)]
    ranks = [groups.group_diversity([groups.layer_diversity(m)], 9, 3).rank[0] for m in maps]
    assert 0.15 < np.mean(ranks) < 0.85  # a grouping unrelated to the maps is nowhere in particular


def test_diversity_equals_scipy_and_leaves_out_the_forced_first_row():
    rng = np.random.default_rng(3)
    w = causal_rows(rng, 2, 6)
    d = groups.layer_diversity(w[None])[0]
    expect = np.mean([jensenshannon(w[0, t], w[1, t]) ** 2 for t in range(1, 6)])  # scipy: sqrt of JS, nats
    assert d[0, 1] == pytest.approx(expect, rel=1e-5) and d[0, 0] == 0
    assert w[0, 0, 0] == w[1, 0, 0] == 1.0  # the first row: one key, weight 1 in every head


def test_pair_means_by_brute_force():
    rng = np.random.default_rng(4)
    m = rng.random((6, 6))
    m = (m + m.T) / 2
    group = groups.groups_of(6, 2)  # [0 0 0 1 1 1]
    same = [m[a, b] for a in range(6) for b in range(a + 1, 6) if group[a] == group[b]]
    cross = [m[a, b] for a in range(6) for b in range(a + 1, 6) if group[a] != group[b]]
    assert groups.pair_means(m, group) == pytest.approx((np.mean(same), np.mean(cross)))
    with pytest.raises(ValueError, match="do not divide"):
        groups.groups_of(9, 2)


def test_partitions_and_the_shapes_the_measure_refuses():
    cuts = groups.partitions(12, 4)
    assert len(cuts) == 15_400 and len({tuple(c) for c in cuts}) == 15_400  # 12! / (3!^4 4!), none twice
    assert all(np.bincount(c).tolist() == [3, 3, 3, 3] for c in cuts[:500])
    for H, G in [(6, 6), (6, 1)]:  # no pair within a group, or none across
        with pytest.raises(ValueError, match="2 or more groups"):
            groups.groups_of(H, G)
    with pytest.raises(ValueError, match="too many"):
        groups.partitions(16, 4)
    with pytest.raises(ValueError, match="one token"):
        groups.layer_diversity(np.ones((1, 9, 1, 1)))


def test_random_subspaces_overlap_by_d_k_over_d_model_as_scipy_measures():
    """metrics.random_overlap, the floor a K/V overlap is read against: two random 16-dimensional
    subspaces of R^96 (Gaussian bases) have mean cos^2 of principal angles 16/96, by scipy."""
    from scipy.linalg import subspace_angles

    from mha.analyses import metrics

    rng = np.random.default_rng(0)
    got = [
        np.mean(np.cos(subspace_angles(rng.normal(size=(96, 16)), rng.normal(size=(96, 16)))) ** 2) for _ in range(300)
    ]
    assert np.mean(got) == pytest.approx(metrics.random_overlap(16, 96), abs=0.005)


def test_a_grouped_models_across_group_overlap_said_in_the_recap(smol):
    """SmolLM2's K across its K/V groups, computed here with scipy on the real W^K slices, is the
    figure the recap says beside the random floor; within a group the overlap is 1 by construction."""
    from scipy.linalg import subspace_angles

    from mha.analyses import collapse, metrics
    from mha.lesson import check_question, recap

    t = smol.traits
    run = smol.attend("The farmer sold the cow because she needed money.")
    layer = 2
    before = collapse.collapse_layer(smol, run, layer, collapse.CollapsePath().at(0.0))
    after = collapse.collapse_layer(smol, run, layer, collapse.CollapsePath())
    group = groups.groups_of(t.n_heads, t.kv_groups)
    across = {r: groups.pair_means(before.overlap[r], group)[1] for r in "kv"}
    w = smol.scratch_layer(layer).k_proj.weight.detach().double().numpy()  # (G * D, C): one slice per group
    D = t.d_model // t.n_heads
    slices = [w[g * D : (g + 1) * D].T for g in range(t.kv_groups)]
    pairs = [(group[i], group[j]) for i in range(t.n_heads) for j in range(i + 1, t.n_heads) if group[i] != group[j]]
    by_scipy = np.mean([np.mean(np.cos(subspace_angles(slices[a], slices[b])) ** 2) for a, b in pairs])
    assert across["k"] == pytest.approx(by_scipy, abs=1e-6)
    assert groups.pair_means(before.overlap["k"], group)[0] == pytest.approx(1.0, abs=1e-6)
    ans = check_question.answer(before.summary(), after.summary(), smol.d_model, smol.n_heads, collapse.CollapsePath())
    floor = metrics.random_overlap(D, t.d_model)
    said = recap.sharing(ans, layer, t.who, across, floor)
    assert f"across groups {t.who}'s are $W^K$ {across['k']:.2f} and $W^V$ {across['v']:.2f}" in said
    assert f"against {floor:.2f} for random subspaces" in said and floor == pytest.approx(64 / 576)
