"""Gemma 3 (mha/models/gemma3.py): the from-scratch layer reproduces it by structure. Small random
Gemma 3 models (sliding windows of 4 keys, two rotary bases, 1 and 2 K/V heads, a score scale that is
not 1 / sqrt(head_dim), a head size that is not C / H, every norm randomised) and the real gemma-3-270m
(18 layers, one K/V head, windows of 512), each against Transformers' own eager attention, on a short
text and on one longer than the window; the layer's pieces (window mask, query/key norm, parameter
count) against what Transformers and torch compute."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha.core.attention import MultiHeadAttention
from mha.core.masks import attention_mask_for
from mha.core.norms import HeadNorm
from mha.models import fetch_gemma
from mha.models.gemma3 import LoadedGemma3, save_random_gemma3

SHORT = "the cat sat on the mat and then the dog ran after it in the garden"
LONG = " ".join(["The river ran past the old mill and the children watched the boats go by."] * 45)


def parity(model, text: str, trace: bool = True) -> tuple[float, float, float, object]:
    """Every layer's from-scratch attention (fast path and trace) against Transformers' own on the
    run's input to it: the worst difference of outputs and of weights; the whole stack's logits
    (our layers, the model's norms and MLPs) against Transformers' forward pass; the tokens."""
    run = model.attend(text)
    out_diff = weight_diff = 0.0
    for layer in range(model.n_layers):
        ref_out, ref_w = model.reference_attention(run, layer)
        mine = model.scratch_layer(layer)
        out, w = mine(run.layer_input(layer))
        out_diff = max(out_diff, float((out - ref_out).abs().max()))
        weight_diff = max(weight_diff, float((w - ref_w).abs().max()))
        if trace:  # the step-by-step reference too (tests/test_attention.py proves it equal to forward)
            steps = mine.trace(run.layer_input(layer))
            out_diff = max(out_diff, float((steps.output - ref_out).abs().max()))
            weight_diff = max(weight_diff, float((steps.weights - ref_w).abs().max()))
            assert steps.concat.shape[-1] == model.traits.heads_width
        assert out.shape[-1] == model.d_model
    ids = torch.tensor([run.input_ids])
    with torch.inference_mode():
        ref = model.model(ids).logits
        ours = model.logits(model.run_layers(model.embed(ids))[0][-1])
    return out_diff, weight_diff, float((ref - ours).abs().max()), run


@pytest.fixture(scope="module", params=[1, 2], ids=["one K/V head", "two K/V heads"])
def small(request, tmp_path_factory):
    path = save_random_gemma3(tmp_path_factory.mktemp(f"gemma{request.param}"), kv_heads=request.param)
    return LoadedGemma3.load(path, f"random-gemma-{request.param}")


def test_a_random_gemma_reproduced_layer_by_layer(small):
    """Window 4, bases 10,000 and 1,000,000, head size 16 beside C / H = 12, scale 24^-0.5 beside
    16^-0.5, every norm randomised: within 1e-5 on every layer, on a short text and one past the window."""
    t = small.traits
    assert t.windows == (4, 4, None) and t.rope_thetas == (1e4, 1e4, 1e6) and t.d_head == 16 != t.d_model // t.n_heads
    assert t.scale == pytest.approx(24**-0.5) and not t.scale_is_standard and t.qk_norm is not None
    assert t.kv_groups in (1, 2) and t.heads_width == 64
    for text in ("a cat", SHORT):
        out, weights, logits, run = parity(small, text)
        assert out < 1e-5 and weights < 1e-5 and logits < 1e-4, (text, out, weights, logits)
    assert len(run.tokens) > 4  # longer than the window
    norms = [small.model.model.layers[0].self_attn.q_norm.weight, small.scratch_layer(0).q_norm.weight]
    assert norms[0].abs().max() > 0.1 and norms[1].data_ptr() == norms[0].data_ptr()  # randomised, and read in place


def test_the_window_mask_is_transformers_sliding_window():
    """Key j is read by query i when i - W < j <= i (Transformers' sliding_window_overlay and causal mask)."""
    from transformers.masking_utils import causal_mask_function, sliding_window_overlay

    T, W = 9, 3
    mine = attention_mask_for(None, T, True, window=W)
    theirs = torch.tensor(
        [
            [bool(causal_mask_function(0, 0, i, j)) and bool(sliding_window_overlay(W)(0, 0, i, j)) for j in range(T)]
            for i in range(T)
        ]
    )
    assert torch.equal(mine, theirs) and int(mine[-1].sum()) == W
    assert torch.equal(attention_mask_for(None, T, True, window=T), attention_mask_for(None, T, True))
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="window"):
            attention_mask_for(None, T, True, window=bad)
    with pytest.raises(ValueError, match="window"):
        attention_mask_for(None, T, False, window=3)


def test_the_head_norm_is_gemmas():
    """HeadNorm equals Transformers' Gemma3RMSNorm with the same weight, and keeps a head's direction."""
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm

    mine, theirs = HeadNorm(16, 1e-6), Gemma3RMSNorm(16, 1e-6)
    with torch.no_grad():
        mine.weight.normal_(), theirs.weight.copy_(mine.weight)
    x = torch.randn(2, 3, 5, 16) * 7
    torch.testing.assert_close(mine(x), theirs(x), rtol=0, atol=0)
    flat = HeadNorm(16)(x)  # w = 0: unit root mean square, same direction
    torch.testing.assert_close(flat.pow(2).mean(-1), torch.ones(2, 3, 5), atol=1e-5, rtol=0)


def test_the_structure_counts_and_conversions_keep_the_new_parts():
    """Parameters counted without building equal the built module's; a converted (meta-built) module
    reads the model's own norm tensors and keeps the window, scale and head size; one K/V head is a
    structure: every head reads the one K projection."""
    m = MultiHeadAttention(
        48, 4, (4, 1, 1), bias=False, causal=True, rope_theta=1e4, d_head=16, scale=0.2, qk_norm=1e-6, window=4
    )
    assert m.num_parameters() == MultiHeadAttention.parameter_count(48, 4, (4, 1, 1), False, d_head=16, qk_norm=True)
    assert m.out_proj.weight.shape == (48, 64) and m.k_proj.weight.shape == (16, 48)
    other = m.with_heads((1, 1, 1), empty=True)
    assert other.q_norm.weight is m.q_norm.weight and (other.window, other.scale, other.d_head) == (4, 0.2, 16)
    borrowed = m.borrowing()
    x = torch.randn(1, 7, 48)
    torch.testing.assert_close(borrowed(x)[0], m(x)[0], rtol=0, atol=0)
    w = m(x)[1][0]  # (H, T, T)
    assert float(w[:, 6, :3].abs().max()) == 0 and torch.allclose(w.sum(-1), torch.ones(4, 7))  # 4 keys at most


@pytest.fixture(scope="module")
def gemma():
    if not fetch_gemma.is_converted():
        pytest.fail(f"Gemma 3 is not in {fetch_gemma.converted_dir()}: run python -m mha.models.fetch first (README)")
    return LoadedGemma3.load(str(fetch_gemma.converted_dir()), fetch_gemma.NAME)


def test_the_real_gemma_reproduced_on_all_18_layers(gemma):
    """gemma-3-270m as Transformers reads it: one K/V head for 4 query heads, head size 256 beside
    C = 640, windows of 512 on 15 layers, bases 10,000 and 1,000,000; from scratch within 1e-5 on every
    layer and 1e-4 on the logits, on a German and Chinese text and on one past the window; its tokens
    are text, and a sliding layer's last query reads exactly 512 keys where a full layer reads all."""
    t = gemma.traits
    assert (t.n_layers, t.n_heads, t.kv_groups, t.d_model, t.d_head) == (18, 4, 1, 640, 256)
    from mha.models import structures

    s = structures.gemma3()  # the K/V cache table's row, read from the same config.json
    assert (s.n_layers, s.n_heads, s.kv_heads, s.d_head, s.windows) == (18, 4, 1, 256, t.windows)
    assert t.sliding_layers == tuple(i for i in range(18) if i % 6 != 5) and set(t.windows) == {512, None}
    assert {t.theta(i) for i in t.sliding_layers} == {1e4} and t.theta(5) == 1e6 and t.scale == 256**-0.5
    text = "Die Bäckerei verkauft jeden Morgen frisches Brot. 虽然外面下雨，我们还是去了公园。"
    out, weights, logits, run = parity(gemma, text)
    assert out < 1e-5 and weights < 1e-5 and logits < 1e-4, (out, weights, logits)
    tokens = run.tokens
    assert "äck" in tokens and "虽然" in "".join(tokens) and not any("�" in tok for tok in tokens)
    out, weights, logits, run = parity(gemma, LONG, trace=False)
    T = len(run.tokens)
    assert T >= 600 and out < 1e-5 and weights < 1e-5 and logits < 1e-4, (T, out, weights, logits)
    read = (run.attentions[:, :, -1] > 0).sum(-1)  # (L, H): keys the last query reads
    assert np.all(read[list(t.sliding_layers)] == 512) and np.all(read[[5, 11, 17]] == T)


def test_weight_spectra_count_the_norm_between_query_and_key(small):
    """With a query/key norm, a head's match is (diag(1 + w_q) W_i^Q)^T (diag(1 + w_k) W^K): its
    singular values, computed here from the C x C product itself, are what weight_spectra reports; with
    one K/V head every head reads the same W^K."""
    from mha.analyses import subspaces

    m = small.scratch_layer(0)
    spectra = subspaces.weight_spectra(m)
    D, r = m.d_head, m.n_heads // m.role_heads[1]
    wq, wk = m.q_proj.weight.detach().double(), m.k_proj.weight.detach().double()
    nq, nk = 1 + m.q_norm.weight.detach().double(), 1 + m.k_norm.weight.detach().double()
    for h in range(m.n_heads):
        q = nq[:, None] * wq[h * D : (h + 1) * D]  # (D, C)
        k = nk[:, None] * wk[(h // r) * D : (h // r + 1) * D]  # (D, C)
        want = torch.linalg.svdvals(q.T @ k)[:D].numpy()  # (C, C) of rank D
        np.testing.assert_allclose(spectra.per_head[h], want, rtol=1e-6, atol=1e-9)
    plain = np.linalg.svd((wq[:D].T @ wk[:D]).numpy(), compute_uv=False)[:D]
    assert not np.allclose(spectra.per_head[0], plain, rtol=1e-2)  # the norm changes the spectrum


def test_the_work_estimate_counts_the_models_own_head_size(small):
    """cost.layer_macs reads H d_k (64 here, beside C = 48) for W^Q, W^O and the scores: PyTorch's own
    FLOP counter on one whole layer agrees (2 FLOPs per multiply-add)."""
    from torch.utils.flop_counter import FlopCounterMode

    from mha.models import cost

    T = 12
    h = small.embed(torch.randint(1000, 2000, (1, T)))
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        small.run_layers(h, start=small.n_layers - 1, keep=False)
    assert cost.layer_macs(small, T) == pytest.approx(counter.get_total_flops() / 2, rel=0.02)


def test_gemmas_table_is_its_ggufs_own_numbers(gemma):
    """gemma-3-270m's embedding and LM head are one Q8_0 table of 179 MB (not 671 MB of float32):
    the first block, the last rows and 4,096 rows at random, bit for bit the float32 copy that
    Transformers dequantised (tests/test_q8.py checks SmolLM2's against gguf's own dequantiser too);
    the float32 table is never paged in."""
    from test_q8 import check_table

    V = gemma.model.config.vocab_size
    rows = np.unique(
        np.r_[np.arange(8192), np.arange(V - 100, V), np.random.default_rng(0).integers(0, V, 4096)]
    )  # sorted
    check_table(gemma, fetch_gemma.converted_dir(), None, rows)
    table = gemma.model.lm_head.table
    assert table.codes.numel() + 2 * table.scales.numel() < 0.27 * 4 * table.codes.numel()
