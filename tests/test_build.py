"""The build page's engine: stages on real weights, the parity and shuffle checks, head splits."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import SENTENCES

from mha import MultiHeadAttention
from mha.analyses import build


@pytest.fixture(scope="module")
def run(bert):
    return bert.attend(SENTENCES[0])


def test_bert_layer_stages_match_bert_and_the_trace(bert, run):
    s = build.build_stages(bert, run, 3, bert.n_heads)
    assert s.parity is not None and s.parity < 1e-5
    np.testing.assert_allclose(s.trace.weights[0], run.attentions[3], atol=1e-5)
    T, C, H = run.n_tokens, bert.d_model, bert.n_heads
    assert s.q_heads_side_by_side.shape == (T, C)
    x = torch.from_numpy(run.hidden_states[3])
    q = bert.scratch_layer(3).q_proj(x).detach().numpy()  # (T, C): X W^Q, heads side by side
    np.testing.assert_allclose(s.q_heads_side_by_side, q, atol=1e-5)
    spread = np.std(s.trace.scores[0].astype(np.float64), axis=-1).mean(-1)  # (H,): over keys, mean over queries
    np.testing.assert_allclose(s.score_std, spread, rtol=1e-5)
    np.testing.assert_allclose(s.scaled_std * np.sqrt(C // H), s.score_std, rtol=1e-5)
    assert s.shuffle_error is None and s.tokens == run.tokens and s.head_spread > 0.1
    assert s.measures["head diversity (JS)"] > 0.05


def test_shared_heads_are_one_head(bert, run):
    s = build.build_stages(bert, run, 1, bert.n_heads, shared=True)
    assert s.parity is None and s.head_spread < 1e-6
    assert s.measures["head diversity (JS)"] == 0 and s.measures["subspace overlap W^Q"] == 1
    assert s.measures["effective number of heads"] == pytest.approx(1.0, abs=1e-6) and s.measures["distinct maps"] == 1


def test_shuffled_words_only_permute_the_output(bert, run):
    s = build.build_stages(bert, run, 2, bert.n_heads, shuffle=True, seed=3)
    assert sorted(s.perm) == list(range(run.n_tokens)) and list(s.perm) != list(range(run.n_tokens))
    assert s.tokens == [run.tokens[i] for i in s.perm]
    assert s.shuffle_error < 1e-4
    assert s.parity < 1e-5  # compared with BERT's weights in the same (shuffled) order


def test_other_head_counts_and_seeded_random_weights(bert, run):
    six = build.build_module(bert, 0, 6)
    layer = bert.scratch_layer(0)
    assert six.n_heads == 6 and torch.equal(six.q_proj.weight, layer.q_proj.weight)  # same matrices
    assert build.build_stages(bert, run, 0, 6).parity is None
    a, b = build.random_module(384, 12, 7), build.random_module(384, 12, 7)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    bound = 384**-0.5  # PyTorch's default nn.Linear init range for fan_in = 384
    assert all(p.abs().max() <= bound for p in a.parameters())
    assert not torch.equal(a.q_proj.weight, build.random_module(384, 12, 8).q_proj.weight)
    with pytest.raises(ValueError, match="divisible"):
        build.build_module(bert, 0, 7)
    assert isinstance(build.resplit(layer, 3), MultiHeadAttention)
