"""The "Do we need every head?" study: human-graded pairs (the STS Benchmark's train and dev splits,
never its test split), held-out curves with bootstrap intervals, the signed order, and the study
shipped with the package, partly computed again on the real bundled model."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest
from scipy.stats import spearmanr

from mha.models.bert import LoadedBert
from mha.tasks import pruning, similarity


def test_the_sts_pairs_are_the_licensed_genres_of_train_and_dev_only():
    train, dev = similarity.sts_pairs("train"), similarity.sts_pairs("dev")
    assert len(train) == 1000 and len(dev) == 375
    assert set(similarity.sts_genres("train")) == {"images"} and set(similarity.sts_genres("dev")) == {
        "images",
        "track5.en-en",
    }
    assert similarity.sts_genres("dev").count("track5.en-en") == 125
    assert all(0 <= g <= 5 and a and b for a, b, g in train + dev)
    with pytest.raises(ValueError, match="test split"):
        similarity.sts_pairs("test")
    data = resources.files("mha").joinpath("data")
    text = data.joinpath("sts_pairs.tsv").read_text(encoding="utf-8")
    assert {line.split("\t")[0] for line in text.splitlines() if line and not line.startswith("#")} == {
        "split",
        "train",
        "dev",
    }
    notice = data.joinpath("stsbenchmark_LICENSE.txt").read_text(encoding="utf-8")
    assert "Share Alike 4.0" in notice and "track5.en-en" in notice and "image" in notice


def test_bootstrap_change_is_the_resampled_spearman_difference():
    """Checked against scipy's spearmanr on the same resamples, and on cases whose answer is known."""
    rng = np.random.default_rng(1)
    gold = np.round(rng.uniform(0, 5, 60), 1)  # ties, as real grades have
    base = gold + rng.normal(0, 1, 60)
    worse = gold + rng.normal(0, 3, 60)
    low, high = similarity.bootstrap_change(np.stack([base, base, worse]), gold, resamples=300, level=0.9, seed=4)
    assert low[0] == high[0] == 0 and low[1] == high[1] == 0  # no change: a zero-width interval
    idx = np.random.default_rng(4).integers(0, 60, size=(300, 60))
    changes = [spearmanr(worse[i], gold[i]).statistic - spearmanr(base[i], gold[i]).statistic for i in idx]
    assert low[2] == pytest.approx(np.percentile(changes, 5)) and high[2] == pytest.approx(np.percentile(changes, 95))
    assert high[2] < 0  # a much noisier model is clearly worse


def test_a_count_is_said_surely_only_while_the_interval_clears_the_tolerance():
    curve = similarity.PruningCurve([0, 6, 12, 18], [0.9, 0.895, 0.885, 0.85])
    held = pruning.HeldOut("dev", 100, curve, [0.0, -0.01, -0.03, -0.08], [0.0, 0.0, 0.01, -0.02], [6])
    assert held.can_go(0.02) == 12 and held.surely_can_go(0.02) == 6
    change, low, high = held.change_at(12)
    assert change == pytest.approx(-0.015) and (low, high) == (-0.03, 0.01)


def test_least_important_first_is_by_signed_drop():
    """A head whose removal raises the score (negative drop) goes before one that costs nothing."""
    drop = np.zeros((2, 3))
    drop[1, 2], drop[0, 1] = -0.05, 0.04
    order = similarity.order_by(drop)
    assert order[0] == (1, 2) and order[-1] == (0, 1)


def test_the_shipped_study_is_this_models_own(bert):
    """The study shipped in mha/data (scripts/heads_study.py) is used only for the weights, pairs
    and settings it was computed on; part of it is computed again here and must agree."""
    study = pruning.shipped_study(bert)
    assert study is not None and study.origin == "shipped", "run scripts/heads_study.py after changing the study"
    train, dev = similarity.sts_pairs("train"), similarity.sts_pairs("dev")
    assert study.n_rank == len(train) and [h.name for h in study.held_out] == ["dev", "written"]
    assert study.main.n_pairs == len(dev) and study.held_out[1].n_pairs == len(similarity.similarity_pairs())
    assert study.importance.base == pytest.approx(similarity.evaluate(bert, train).spearman, abs=1e-5)
    # one point of the held-out curve: the order from the stored drops (ranked on train), scored on dev
    order = similarity.order_by(study.importance.drop)
    k = study.main.curve.removed.index(24)
    full = similarity.evaluate(bert, dev)
    pruned = similarity.evaluate(bert, dev, head_mask=similarity.head_mask(bert, order[:24]))
    assert study.main.curve.spearman[0] == pytest.approx(full.spearman, abs=1e-5)
    assert study.main.curve.spearman[k] == pytest.approx(pruned.spearman, abs=1e-5)
    # its interval: the same resamples over the dev pairs (the study draws one set for the whole curve)
    low, high = similarity.bootstrap_change(
        np.stack([full.per_pair, pruned.per_pair]), full.gold, pruning.STUDY["resamples"], study.level
    )
    assert study.main.low[k] == pytest.approx(low[1], abs=1e-4) and study.main.high[k] == pytest.approx(
        high[1], abs=1e-4
    )
    # the written pairs' strict count under its lowest and highest bootstrap seeds, recomputed with
    # scipy's spearmanr resample by resample (the same draws): a count is said only with its spread
    written, pairs = study.held_out[1], similarity.similarity_pairs()
    assert len(written.strict) == pruning.STRICT_SEEDS
    curve = {0: similarity.evaluate(bert, pairs)}
    gold = curve[0].gold
    for seed in {int(np.argmin(written.strict)), int(np.argmax(written.strict))}:
        idx = np.random.default_rng(seed).integers(0, len(pairs), size=(pruning.STUDY["resamples"], len(pairs)))
        before = np.array([spearmanr(curve[0].per_pair[i], gold[i]).statistic for i in idx])
        count = 0
        for n in written.curve.removed:
            if n not in curve:
                curve[n] = similarity.evaluate(bert, pairs, head_mask=similarity.head_mask(bert, order[:n]))
            after = np.array([spearmanr(curve[n].per_pair[i], gold[i]).statistic for i in idx])
            if np.percentile(after - before, 5) < -study.tolerance:
                break
            count = n
        assert written.strict[seed] == count, seed
    rand = similarity.random_order(bert.n_layers, bert.n_heads, study.seeds[0])
    assert study.random[0].spearman[study.random[0].removed.index(12)] == pytest.approx(
        similarity.evaluate(bert, dev, head_mask=similarity.head_mask(bert, rand[:12])).spearman, abs=1e-5
    )
    # anything else: computed, never the shipped figures
    other = LoadedBert("another model", bert.model, bert.tokenizer)
    assert pruning.shipped_study(other) is None
    again, stamp = pruning.study_from_json(pruning.study_to_json(study, pruning.study_stamp(bert)))
    assert stamp == pruning.study_stamp(bert) and again.main.curve == study.main.curve


def test_halves_agreement_compares_the_drops_of_two_random_halves():
    """Each halving's agreement is scipy's Spearman between the drops measured on its two halves."""
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 40)
    base = gold + rng.normal(0, 1, 40)
    ablated = base + rng.normal(0, 0.5, (2, 3, 40))  # (L, H, P)
    abl = similarity.Ablations(base, ablated, gold)
    got = pruning.halves_agreement(abl, splits=3, seed=5)
    perm = np.random.default_rng(5).permutation(40)
    a, b = np.sort(perm[:20]), np.sort(perm[20:])
    assert len(got) == 3 and got[0] == pytest.approx(spearmanr(abl.drop(a).ravel(), abl.drop(b).ravel()).statistic)


def test_the_glossary_calls_michels_importance_the_gradient_and_the_ablation_another_term():
    """One term, one definition: Michel et al. 2019's head importance is the gradient score; the
    single-head ablation is its own term (the heads page shows both)."""
    from mha.lesson import glossary

    terms = {t.name: t.text for t in glossary.TERMS}
    assert "\\partial L / \\partial \\xi_h" in terms["Head importance"] and "Michel" in terms["Head importance"]
    assert "removed" in terms["Ablation drop"] and "separate experiment" in terms["Ablation drop"]


def test_a_strict_count_is_recomputed_under_every_bootstrap_seed():
    """A loss curve whose third point sits on the tolerance: its strict count changes with the
    bootstrap's seed. Each seed's count is recomputed here resample by resample (plain loops, the
    same draws), and seed_spread counts them."""
    from mha.tasks import next_token

    rng = np.random.default_rng(3)
    tokens = rng.integers(5, 30, 80)
    base = rng.normal(3.0, 0.4, 80) * tokens
    noise = rng.normal(0, 0.05, 80) * tokens  # per-text change, nats; a constant shift moves every resample's mean
    draws = [np.random.default_rng(seed).integers(0, 80, size=(1000, 80)) for seed in range(40)]
    upper = np.median([np.quantile(noise[i].sum(1) / tokens[i].sum(1), 0.95) for i in draws])
    shifts = (0, 0.01, 0.05 - upper, 0.3)  # the third point's upper bound sits on the tolerance
    scores = [next_token.LossScore(base + (noise + shift * tokens) * (shift > 0), tokens) for shift in shifts]
    at, tol = [0, 4, 8, 12], 0.05
    strict = pruning.loss_strict(at, scores, tol, 0.9, seeds=40)
    for seed in (0, 7, 39):
        idx = draws[seed]
        count = 0
        for n, s in zip(at, scores):
            diffs = [sum(s.per_text[i] - base[i]) / sum(tokens[i]) for i in idx]
            if np.quantile(diffs, 0.95) > tol:
                break
            count = n
        assert strict[seed] == count
    assert set(strict) == {4, 8}  # the point on the tolerance is in under some seeds, out under others
    spread = pruning.seed_spread(strict)
    assert sum(k for _, k in spread) == 40 and dict(spread) == {c: strict.count(c) for c in set(strict)}
    assert spread[0][1] >= spread[1][1]
