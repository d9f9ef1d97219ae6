"""The bundled model's own task on the real weights: the score equals a direct computation with
the Hugging Face model, head removal and importance behave as defined, nothing is modified."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from conftest import weights_digest
from scipy.stats import spearmanr

from mha.analyses import collapse
from mha.models.bert import LoadedBert
from mha.tasks import similarity


@pytest.fixture(scope="module")
def score(bert):
    return similarity.evaluate(bert)


def test_the_bundled_set(score):
    pairs = similarity.similarity_pairs()
    assert len(pairs) >= 120 and len(similarity.pair_kinds()) == len(pairs)
    assert all(0 <= g <= 5 and a and b and a != b for a, b, g in pairs)
    assert {"paraphrase", "unrelated", "negation", "swapped", "antonym", "wordpiece"} <= set(similarity.pair_kinds())
    assert 0.75 <= score.spearman <= 0.9  # the bundled model does the task, far from perfectly


def test_evaluate_equals_a_direct_computation_with_the_model(bert, score):
    pairs = similarity.similarity_pairs()
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
    ones = similarity.evaluate(bert, head_mask=np.ones((bert.n_layers, bert.n_heads)))
    assert ones.spearman == score.spearman and np.array_equal(ones.per_pair, score.per_pair)
    none = similarity.evaluate(bert, head_mask=np.zeros((bert.n_layers, bert.n_heads)))
    assert none.spearman < score.spearman - 0.05
    one = np.ones((bert.n_layers, bert.n_heads))
    one[5, 9] = 0
    assert similarity.evaluate(bert, head_mask=one).spearman != score.spearman
    with pytest.raises(ValueError, match="head_mask"):
        similarity.evaluate(bert, head_mask=np.ones((2, 3)))
    with pytest.raises(ValueError, match="no sentence pairs"):
        similarity.evaluate(bert, pairs=[])


def test_replaced_layers_are_scored(bert, score):
    same = similarity.evaluate(bert, replace={2: bert.scratch_layer(2)})
    np.testing.assert_allclose(same.per_pair, score.per_pair, atol=1e-6)
    shared = similarity.evaluate(bert, replace={i: collapse.shared_module(bert.scratch_layer(i), 0) for i in range(6)})
    assert shared.spearman < score.spearman - 0.05


def test_importance_of_a_head_that_changes_nothing_is_zero(bert):
    pairs = similarity.similarity_pairs()[::10]  # 13 pairs: the measure, not the set, is under test
    model = copy.deepcopy(bert.model)
    with torch.no_grad():  # layer 2, head 3 writes nothing: its 32 columns of W^O are zero
        model.encoder.layer[2].attention.output.dense.weight[:, 3 * 32 : 4 * 32] = 0.0
    silent = LoadedBert("silent", model, bert.tokenizer)
    seen = []
    imp = similarity.head_importance(silent, pairs, progress=lambda done, total: seen.append((done, total)))
    assert imp.drop.shape == imp.gradient.shape == (bert.n_layers, bert.n_heads)
    assert imp.drop[2, 3] == 0 and imp.gradient[2, 3] == 0
    assert np.abs(imp.drop).max() > 0 and imp.gradient.min() >= 0 and np.count_nonzero(imp.gradient) == 71
    assert seen[-1][0] == seen[-1][1] and len(seen) == seen[-1][1]


def test_pruning_curves_and_orders(bert, score):
    drop = np.arange(72, dtype=float).reshape(6, 12)
    order = similarity.order_by(drop)
    assert order[0] == (0, 0) and order[-1] == (5, 11) and len(set(order)) == 72
    rand = similarity.random_order(6, 12, seed=3)
    assert sorted(rand) == sorted(order) and rand != order and rand == similarity.random_order(6, 12, seed=3)
    curve = similarity.curve_on([0, 12, 72], similarity.curve_cosines(bert, order, [0, 12, 72]), score.gold)
    assert curve.removed == [0, 12, 72] and curve.spearman[0] == pytest.approx(score.spearman, abs=1e-9)
    mask = np.ones((6, 12))
    mask[0] = 0  # the first 12 of this order: all of layer 0
    assert curve.spearman[1] == pytest.approx(similarity.evaluate(bert, head_mask=mask).spearman, abs=1e-9)
    assert similarity.PruningCurve([0, 6, 12, 18], [0.8, 0.79, 0.77, 0.79]).can_go(0.02) == 6


def test_the_cached_model_is_untouched(bert):
    before = weights_digest(bert.model)
    similarity.evaluate(bert, head_mask=np.zeros((6, 12)))
    similarity.gradient_importance(bert, similarity.similarity_pairs()[::13])
    assert weights_digest(bert.model) == before


def test_gradient_importance_against_finite_differences(bert):
    """Michel et al.'s I_h = mean over pairs of |d loss_i / d gate_h|, checked on a few heads by
    central differences of the task's own per-pair loss: pair i's loss depends only on its own
    gate (one gate for both of its sentences), so a gate of 1 +- eps on head h for every sentence
    moves each pair's loss by its own derivative."""
    pairs = similarity.similarity_pairs()[::16]  # 9 pairs
    grad = similarity.gradient_importance(bert, pairs)
    gold = np.array([g for *_, g in pairs])
    slope, intercept = np.polyfit(gold, similarity.evaluate(bert, pairs).per_pair, 1)
    eps = 1e-2

    def losses(layer, head, gate):
        mask = np.ones((bert.n_layers, bert.n_heads))
        mask[layer, head] = gate
        cos = similarity.evaluate(bert, pairs, head_mask=mask).per_pair
        return (cos - (intercept + slope * gold)) ** 2  # (P,)

    for layer, head in [(0, 3), (3, 7), (5, 9)]:
        derivative = (losses(layer, head, 1 + eps) - losses(layer, head, 1 - eps)) / (2 * eps)  # (P,)
        fd = np.abs(derivative).mean()
        assert grad[layer, head] == pytest.approx(fd, rel=0.03, abs=1e-5), (layer, head)
    assert grad[5, 9] > 0
