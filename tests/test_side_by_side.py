"""Three real models side by side (mha.analyses.side_by_side): the measures on cases whose answer is
known, the shipped file against an independent computation (scipy's Jensen-Shannon and principal
angles on Transformers' own attention and weights), and the page's words against the rows."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch
from scipy.spatial.distance import jensenshannon

from mha.analyses import groups, metrics, subspaces
from mha.lesson import side_by_side_words
from mha.models.catalog import DECODER_MODEL, DEFAULT_MODEL, GEMMA_MODEL
from mha.studies import side_by_side


@pytest.fixture(scope="module")
def rows() -> dict[str, side_by_side.ModelRow]:
    shipped = side_by_side.shipped()
    assert [r.name for r in shipped] == [DEFAULT_MODEL, DECODER_MODEL, GEMMA_MODEL], "run scripts/side_by_side.py"
    return {r.name: r for r in shipped}


def _sharp(T: int, seed: int) -> np.ndarray:
    """(T, T) a causal map whose every row puts 0.97 of its weight on one random earlier key."""
    rng = np.random.default_rng(seed)
    w = np.zeros((T, T))
    for i in range(T):
        w[i, : i + 1] = 0.03 / (i + 1)
        w[i, rng.integers(0, i + 1)] += 0.97
    return w


def test_known_answers_identical_sharp_heads_and_flat_heads():
    """Four copies of one sharp head read as identical (0) while random maps as sharp read high; four
    flat heads read 0 and so do their shuffles (no collapse is said); four sharp heads of their own read
    near the random baseline."""
    T = 24
    same = np.stack([_sharp(T, 0)] * 4)[None]  # (1, H, T, T)
    flat = np.stack([np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]] * 4)[None]
    own = np.stack([_sharp(T, s) for s in range(4)])[None]
    g = np.zeros(4, dtype=int)  # one K/V head
    d_same = side_by_side._pair_means(groups.layer_diversity(same)[0], g)
    assert d_same[0] == pytest.approx(0, abs=1e-9) and d_same[2] is None
    assert metrics.shuffled_diversity(same[0], True) > 0.3
    assert side_by_side._pair_means(groups.layer_diversity(flat)[0], g)[0] == pytest.approx(0, abs=1e-9)
    assert metrics.shuffled_diversity(flat[0], True) == pytest.approx(0, abs=1e-6)
    d_own = side_by_side._pair_means(groups.layer_diversity(own)[0], np.array([0, 0, 1, 1]))
    assert d_own[0] == pytest.approx(metrics.shuffled_diversity(own[0], True), rel=0.15)
    assert d_own[1] is not None and d_own[2] is not None
    row = side_by_side.ModelRow(
        "flat", "Flat", 1, 4, 1, 8, 32, 1, 0.0, 0.0, None, 0.0, None, None, 0.25, "loss", 1.0, 2.0, []
    )
    said = side_by_side_words.words([row])[0]
    assert "flat maps" in said and "times" not in said


def _js(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence in nats (scipy gives the distance, its square root)."""
    return float(jensenshannon(p, q, base=np.e) ** 2)


def test_the_shipped_bert_row_equals_scipy_on_transformers_attention(rows, bert):
    """BERT's diversity recomputed from BertModel's own attentions with scipy's JS on every query row,
    and its W^K / W^V overlap with scipy's principal angles between the heads' weight slices."""
    r = rows[DEFAULT_MODEL]
    texts = subspaces.pool_sentences()
    assert r.texts == len(texts) and (r.n_heads, r.kv_heads, r.structure) == (12, 12, "MHA")
    assert r.within is None and r.across is not None
    per_text = []
    for text in texts[::4]:  # every fourth sentence: the mean of a subset, against the shipped mean's spread
        enc = bert.tokenizer(text, return_tensors="pt")
        with torch.inference_mode():
            att = torch.stack(bert.model(**enc, output_attentions=True).attentions)[:, 0].double().numpy()
        L, H, T, _ = att.shape
        pairs = [
            np.mean([_js(att[l_, a, t], att[l_, b, t]) for t in range(T)])
            for l_ in range(L)
            for a in range(H)
            for b in range(a + 1, H)
        ]
        per_text.append(np.mean(pairs))
    app = [  # the app's measure on the same subset: per layer, then the mean over layers
        np.mean([side_by_side._pair_means(d, np.arange(12))[0] for d in groups.layer_diversity(run.attentions, False)])
        for run in (bert.attend(t) for t in texts[::4])
    ]
    np.testing.assert_allclose(per_text, app, rtol=1e-4)  # the measure is scipy's JS
    assert r.diversity == pytest.approx(np.mean(per_text), rel=0.25)  # the subset's mean near the whole pool's
    D = r.d_head
    for role, said in (("key", r.k_overlap), ("value", r.v_overlap)):
        cos2 = []
        for layer in bert.model.encoder.layer:
            w = getattr(layer.attention.self, role).weight.detach().double().numpy()  # (H * D, C)
            for a in range(12):
                for b in range(a + 1, 12):
                    angles = scipy.linalg.subspace_angles(w[a * D : (a + 1) * D].T, w[b * D : (b + 1) * D].T)
                    cos2.append(np.mean(np.cos(angles) ** 2))
        assert said == pytest.approx(np.mean(cos2), abs=1e-4)
    assert r.random_overlap == pytest.approx(D / r.d_model)


def test_the_three_structures_and_their_verdicts(rows):
    """Which pairs exist follows the structure; each row's verdict is its shipped study's; the kept
    shares are (score - removed) / (model - removed) of those scores; the page's words carry the rows."""
    from importlib import resources

    from mha.lesson import verdict as words
    from mha.studies import verdict

    smol, gemma = rows[DECODER_MODEL], rows[GEMMA_MODEL]
    assert (smol.structure, gemma.structure) == ("GQA-3", "MQA")
    assert smol.within is not None and smol.across is not None and smol.k_overlap is not None
    assert gemma.within is not None and gemma.across is None and gemma.k_overlap is None
    assert gemma.d_head == 256 and gemma.random_overlap == pytest.approx(256 / 640)
    for r in rows.values():
        text = resources.files("mha").joinpath(verdict.verdict_file(r.name)).read_text(encoding="utf-8")
        v, _ = verdict.verdict_from_json(text, r.name)
        assert r.model_score == pytest.approx(v.score(v.model_entry))
        assert r.removed_score == pytest.approx(v.score(v.removed_entry))
        for k in r.kept:
            e = v.find(verdict.CONVERTED, k.rung, words.PLAIN)
            want = (v.score(e) - r.removed_score) / (r.model_score - r.removed_score)
            assert k.converted == pytest.approx(want)
        assert "shared Q/K/V" in {k.rung for k in r.kept}
    assert "MQA" not in {k.rung for k in gemma.kept}  # the model itself is the MQA rung
    table = side_by_side_words.table(list(rows.values()))
    assert table[2]["kept by MQA"] == "the model itself" and table[2]["W^K overlap across K/V heads"] == "—"
    said = " ".join(side_by_side_words.words(list(rows.values())))
    assert f"{gemma.within:.3f}, from $W_i^Q$ alone" in said and "has one K/V head: no two to compare" in said
