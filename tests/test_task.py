"""The bundled model's own task on the real weights: the score equals a direct computation with
the Hugging Face model, head removal and importance behave as defined, nothing is modified."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from conftest import weights_digest
from scipy.stats import spearmanr

from mha import collapse, task
from mha.bert import LoadedBert


@pytest.fixture(scope="module")
def score(bert):
    return task.evaluate(bert)


def test_the_bundled_set(score):
    pairs = task.similarity_pairs()
    assert len(pairs) >= 120 and len(task.pair_kinds()) == len(pairs)
    assert all(0 <= g <= 5 and a and b and a != b for a, b, g in pairs)
    assert {"paraphrase", "unrelated", "negation", "swapped", "antonym", "wordpiece"} <= set(task.pair_kinds())
    assert 0.75 <= score.spearman <= 0.9  # the bundled model does the task, far from perfectly


def test_evaluate_equals_a_direct_computation_with_the_model(bert, score):
    pairs = task.similarity_pairs()
    cache = {}

    def embed(text):  # the model's own forward pass, one sentence, mean of the last hidden states
        if text not in cache:
            with torch.no_grad():
                enc = bert.tokenizer(text, return_tensors="pt")
                cache[text] = bert.model(**enc).last_hidden_state[0].mean(0).numpy()
        return cache[text]

    cos = np.array([embed(a) @ embed(b) / np.linalg.norm(embed(a)) / np.linalg.norm(embed(b)) for a, b, _ in pairs])
    np.testing.assert_allclose(score.per_pair, cos, atol=1e-5)
    assert score.spearman == pytest.approx(spearmanr(cos, [g for *_, g in pairs]).statistic, abs=1e-6)


def test_head_masks(bert, score):
    ones = task.evaluate(bert, head_mask=np.ones((bert.n_layers, bert.n_heads)))
    assert ones.spearman == score.spearman and np.array_equal(ones.per_pair, score.per_pair)
    none = task.evaluate(bert, head_mask=np.zeros((bert.n_layers, bert.n_heads)))
    assert none.spearman < score.spearman - 0.05
    one = np.ones((bert.n_layers, bert.n_heads))
    one[5, 9] = 0
    assert task.evaluate(bert, head_mask=one).spearman != score.spearman
    with pytest.raises(ValueError, match="head_mask"):
        task.evaluate(bert, head_mask=np.ones((2, 3)))
    with pytest.raises(ValueError, match="no sentence pairs"):
        task.evaluate(bert, pairs=[])


def test_replaced_layers_are_scored(bert, score):
    same = task.evaluate(bert, replace={2: bert.scratch_layer(2)})
    np.testing.assert_allclose(same.per_pair, score.per_pair, atol=1e-6)
    shared = task.evaluate(bert, replace={i: collapse.shared_module(bert.scratch_layer(i), 0) for i in range(6)})
    assert shared.spearman < score.spearman - 0.05


def test_importance_of_a_head_that_changes_nothing_is_zero(bert):
    pairs = task.similarity_pairs()[::10]  # 13 pairs: the measure, not the set, is under test
    model = copy.deepcopy(bert.model)
    with torch.no_grad():  # layer 2, head 3 writes nothing: its 32 columns of W^O are zero
        model.encoder.layer[2].attention.output.dense.weight[:, 3 * 32 : 4 * 32] = 0.0
    silent = LoadedBert("silent", model, bert.tokenizer)
    seen = []
    imp = task.head_importance(silent, pairs, progress=lambda done, total: seen.append((done, total)))
    assert imp.drop.shape == imp.gradient.shape == (bert.n_layers, bert.n_heads)
    assert imp.drop[2, 3] == 0 and imp.gradient[2, 3] == 0
    assert np.abs(imp.drop).max() > 0 and imp.gradient.min() >= 0 and np.count_nonzero(imp.gradient) == 71
    assert seen[-1][0] == seen[-1][1] and len(seen) == seen[-1][1]


def test_pruning_curves_and_orders(bert, score):
    drop = np.arange(72, dtype=float).reshape(6, 12)
    order = task.order_by(drop)
    assert order[0] == (0, 0) and order[-1] == (5, 11) and len(set(order)) == 72
    rand = task.random_order(6, 12, seed=3)
    assert sorted(rand) == sorted(order) and rand != order and rand == task.random_order(6, 12, seed=3)
    curve = task.pruning_curve(bert, order, [0, 12, 72])
    assert curve.removed == [0, 12, 72] and curve.spearman[0] == pytest.approx(score.spearman, abs=1e-9)
    mask = np.ones((6, 12))
    mask[0] = 0  # the first 12 of this order: all of layer 0
    assert curve.spearman[1] == pytest.approx(task.evaluate(bert, head_mask=mask).spearman, abs=1e-9)
    assert task.PruningCurve([0, 6, 12, 18], [0.8, 0.79, 0.77, 0.79]).can_go(0.02) == 6


def test_the_cached_model_is_untouched(bert):
    before = weights_digest(bert.model)
    task.evaluate(bert, head_mask=np.zeros((6, 12)))
    task.gradient_importance(bert, task.similarity_pairs()[::13])
    assert weights_digest(bert.model) == before


def test_gradient_importance_against_finite_differences(bert):
    """Michel et al.'s I_h = mean over pairs of |d loss_i / d gate_h|, checked on a few heads by
    central differences of the task's own per-pair loss: pair i's loss depends only on its own
    gate (one gate for both of its sentences), so a gate of 1 +- eps on head h for every sentence
    moves each pair's loss by its own derivative."""
    pairs = task.similarity_pairs()[::16]  # 9 pairs
    grad = task.gradient_importance(bert, pairs)
    gold = np.array([g for *_, g in pairs])
    slope, intercept = np.polyfit(gold, task.evaluate(bert, pairs).per_pair, 1)
    eps = 1e-2

    def losses(layer, head, gate):
        mask = np.ones((bert.n_layers, bert.n_heads))
        mask[layer, head] = gate
        cos = task.evaluate(bert, pairs, head_mask=mask).per_pair
        return (cos - (intercept + slope * gold)) ** 2  # (P,)

    for layer, head in [(0, 3), (3, 7), (5, 9)]:
        derivative = (losses(layer, head, 1 + eps) - losses(layer, head, 1 - eps)) / (2 * eps)  # (P,)
        fd = np.abs(derivative).mean()
        assert grad[layer, head] == pytest.approx(fd, rel=0.03, abs=1e-5), (layer, head)
    assert grad[5, 9] > 0


def test_folds_and_drops_measured_on_part_of_the_pairs(bert):
    """The heads are ranked on one part of the pairs and scored on another: the parts split the
    pairs with every kind in each; a drop measured on a part equals evaluate on that part alone."""
    folds = task.pair_folds(2)
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
    study = task.shipped_study(bert)
    assert study is not None and study.origin == "shipped", "run scripts/heads_study.py after changing the study"
    pairs = task.similarity_pairs()
    folds = task.pair_folds(task.STUDY["n_folds"])
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
    assert task.shipped_study(other) is None
    text = task.study_to_json(study, task.study_stamp(bert))
    again, stamp = task.study_from_json(text)
    assert stamp == task.study_stamp(bert) and again.held_out_can_go() == study.held_out_can_go()
