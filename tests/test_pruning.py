"""The "Do we need every head?" study: folds, held-out and in-sample curves, the signed order, and
the study shipped with the package, partly computed again on the real bundled model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha import pruning, task
from mha.bert import LoadedBert


def test_folds_and_drops_measured_on_part_of_the_pairs(bert):
    """The heads are ranked on one part of the pairs and scored on another: the parts split the
    pairs with every kind in each; a drop measured on a part equals evaluate on that part alone."""
    folds = pruning.pair_folds(2)
    kinds = np.array(task.pair_kinds())
    P = len(task.similarity_pairs())
    assert sorted(np.concatenate(folds).tolist()) == list(range(P)) and abs(len(folds[0]) - len(folds[1])) <= 1
    assert all(set(kinds[f]) == set(kinds) for f in folds)
    pairs = task.similarity_pairs()[::16]  # 9 pairs: the bookkeeping, not the set, is under test
    abl = task.ablation_cosines(bert, pairs)
    part = np.arange(0, len(pairs), 2)
    sub = [pairs[i] for i in part]
    mask = np.ones((bert.n_layers, bert.n_heads))
    mask[4, 2] = 0
    expect = task.evaluate(bert, sub).spearman - task.evaluate(bert, sub, head_mask=mask).spearman
    assert abl.drop(part)[4, 2] == pytest.approx(expect, abs=1e-6)
    assert abl.spearman() == pytest.approx(task.evaluate(bert, pairs).spearman, abs=1e-9)


def test_least_important_first_is_by_signed_drop():
    """A head whose removal raises the score (negative drop) goes before one that costs nothing."""
    drop = np.zeros((2, 3))
    drop[1, 2], drop[0, 1] = -0.05, 0.04
    order = task.order_by(drop)
    assert order[0] == (1, 2) and order[-1] == (0, 1)


def test_held_out_curves_are_scored_on_pairs_the_ranking_never_saw():
    gold = np.arange(8, dtype=float)
    cos = np.array([gold, gold[::-1]])  # two points of a curve: perfect, then reversed
    part = np.array([0, 2, 4, 6])
    curve = task.curve_on([0, 5], cos, gold, part)
    assert curve.removed == [0, 5] and curve.spearman == pytest.approx([1.0, -1.0])
    assert task.curve_on([0, 5], cos, gold).spearman == pytest.approx([1.0, -1.0])


def test_the_shipped_study_is_this_models_own(bert):
    """The study shipped in mha/data (scripts/heads_study.py) is used only for the weights, pairs
    and settings it was computed on; part of it is computed again here and must agree."""
    study = pruning.shipped_study(bert)
    assert study is not None and study.origin == "shipped", "run scripts/heads_study.py after changing the study"
    pairs = task.similarity_pairs()
    folds = pruning.pair_folds(pruning.STUDY["n_folds"])
    assert all(np.array_equal(f.pairs, idx) for f, idx in zip(study.folds, folds))
    assert study.importance.base == pytest.approx(task.evaluate(bert).spearman, abs=1e-6)
    batch = task._batch(bert, pairs)
    gold = batch.gold
    with torch.inference_mode():
        base = task._cosines(task._embed(bert, batch), batch).double().numpy()
        for layer, head in [(0, 2), (3, 7), (5, 9)]:  # the drop of three heads, on every pair and on each part
            mask = torch.ones(bert.n_layers, bert.n_heads)
            mask[layer, head] = 0
            cos = task._cosines(task._embed(bert, batch, mask), batch).double().numpy()
            abl = task.Ablations(base, cos[None, None], gold)
            assert study.importance.drop[layer, head] == pytest.approx(abl.drop()[0, 0], abs=1e-5)
            for f in study.folds:
                assert f.drop[layer, head] == pytest.approx(abl.drop(f.pairs)[0, 0], abs=1e-5)
    # one point of a held-out curve: ranked by the other part's stored drops, scored on this part
    order = task.order_by(study.folds[1].drop)
    cos = task.curve_cosines(bert, order, [24], pairs)
    assert study.folds[0].held_out.spearman[4] == pytest.approx(
        task.curve_on([24], cos, gold, folds[0]).spearman[0], abs=1e-5
    )
    cos = task.curve_cosines(bert, task.random_order(bert.n_layers, bert.n_heads, study.seeds[0]), [12], pairs)
    assert study.folds[1].random[0].spearman[1] == pytest.approx(
        task.curve_on([12], cos, gold, folds[1]).spearman[0], abs=1e-5
    )
    # anything else: computed, never the shipped figures
    other = LoadedBert("another model", bert.model, bert.tokenizer)
    assert pruning.shipped_study(other) is None
    text = pruning.study_to_json(study, pruning.study_stamp(bert))
    again, stamp = pruning.study_from_json(text)
    assert stamp == pruning.study_stamp(bert) and again.held_out_can_go() == study.held_out_can_go()
