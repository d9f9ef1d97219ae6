"""The from-scratch module against PyTorch's nn.MultiheadAttention, and its invariants."""

from __future__ import annotations

import pytest
import torch

from mha import MultiHeadAttention, scaled_dot_product_attention
from mha.core.attention import valid_head_counts
from mha.core.reference import to_torch_mha

TOL = dict(rtol=1e-5, atol=1e-6)


def make(C=64, H=8, heads=None, seed=0):
    torch.manual_seed(seed)
    return MultiHeadAttention(C, H, heads).eval()


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_matches_torch_multihead_attention(padded, grad):
    m = make(C=96, H=12)
    ref = to_torch_mha(m).eval()
    torch.manual_seed(1)
    x = torch.randn(3, 10, 96)
    mask = torch.ones(3, 10, dtype=torch.long)
    if padded:
        mask[1, 7:] = 0
        mask[2, 4:] = 0
    with torch.set_grad_enabled(grad):
        out, w = m(x, mask if padded else None)
        ref_out, ref_w = ref(
            x,
            x,
            x,
            key_padding_mask=(mask == 0) if padded else None,
            need_weights=True,
            average_attn_weights=False,
        )
    torch.testing.assert_close(out, ref_out, **TOL)
    torch.testing.assert_close(w, ref_w, **TOL)


def test_trace_equals_forward_and_documents_shapes():
    m = make(C=48, H=6)
    x = torch.randn(2, 7, 48)
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2])
    with torch.no_grad():
        out, w = m(x, mask)
        tr = m.trace(x, mask)
    B, T, C, H, D = 2, 7, 48, 6, 8
    assert tr.q.shape == tr.k.shape == tr.v.shape == tr.heads.shape == (B, H, T, D)
    assert tr.scores.shape == tr.scaled.shape == tr.weights.shape == (B, H, T, T)
    assert tr.concat.shape == tr.output.shape == (B, T, C)
    torch.testing.assert_close(tr.weights, w, **TOL)
    torch.testing.assert_close(tr.output, out, **TOL)
    # head i owns columns i*D:(i+1)*D of X W^Q
    q_full = m.q_proj(x)
    torch.testing.assert_close(tr.q[:, 3], q_full[:, :, 3 * D : 4 * D])
    torch.testing.assert_close(tr.concat[:, :, 2 * D : 3 * D], tr.heads[:, 2])


def test_unscaled_scores_saturate_the_softmax():
    m = make(C=256, H=2)
    x = torch.randn(1, 12, 256) * 3
    with torch.no_grad():
        scaled = m.trace(x).weights.amax(-1).mean()
        raw = m.trace(x, scale=False).weights.amax(-1).mean()
    assert raw > scaled  # without 1/sqrt(d_k) the largest weight grows towards 1


def test_rows_sum_to_one_and_masked_keys_get_exactly_zero():
    m = make()
    x = torch.randn(2, 9, 64)
    mask = torch.tensor([[1] * 9, [1] * 6 + [0] * 3])
    with torch.no_grad():
        _, w = m(x, mask)
        tr = m.trace(x, mask)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 8, 9))
    assert torch.all(w[1, :, :, 6:] == 0)
    assert torch.all(tr.weights[1, :, :, 6:] == 0)
    assert torch.all(w[1, :, :, :6] > 0)


def test_sdpa_function_masks_and_normalises():
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 3)
    mask = torch.ones(5, 6, dtype=torch.bool)
    mask[:, 4:] = False
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert out.shape == (2, 4, 5, 3)
    assert torch.all(w[..., 4:] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 5))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, ref, **TOL)


def test_shared_heads_are_identical_and_distinct_heads_are_not():
    x = torch.randn(4, 11, 64)
    with torch.no_grad():
        out_s, w_s = make(heads=(1, 1, 1))(x)
        tr_s = make(heads=(1, 1, 1)).trace(x)
        _, w_d = make()(x)
    assert (w_s - w_s[:, :1]).abs().max() < 1e-6
    assert (tr_s.heads - tr_s.heads[:, :1]).abs().max() < 1e-6
    torch.testing.assert_close(tr_s.output, out_s, **TOL)
    diff_to_head0 = (w_d - w_d[:, :1]).abs().amax(dim=(0, 2, 3))  # (H,)
    assert diff_to_head0[0] == 0 and diff_to_head0[1:].min() > 1e-3  # every other head differs


def test_parameter_counts_show_the_saving():
    C, H = 384, 12
    d, s = MultiHeadAttention(C, H, None), MultiHeadAttention(C, H, (1, 1, 1))
    assert d.num_parameters() == 4 * (C * C + C) == MultiHeadAttention.parameter_count(C, H, None)
    assert s.num_parameters() == 3 * (C * 32 + 32) + C * C + C == MultiHeadAttention.parameter_count(C, H, (1, 1, 1))
    assert s.q_proj.weight.shape == (32, C) and s.out_proj.weight.shape == (C, C)


@pytest.mark.parametrize("C,H", [(64, 0), (64, -2), (64, 5), (384, 7)])
def test_invalid_head_counts_raise_with_the_valid_values(C, H):
    with pytest.raises(ValueError) as e:
        MultiHeadAttention(C, H)
    assert "n_heads" in str(e.value)
    if H > 0:
        assert str(valid_head_counts(C)) in str(e.value)


def test_attention_without_positions_is_permutation_equivariant():
    m = make()
    x = torch.randn(1, 10, 64)
    perm = torch.randperm(10)
    with torch.no_grad():
        out, w = m(x)
        out_p, w_p = m(x[:, perm])
    torch.testing.assert_close(out_p, out[:, perm], **TOL)
    torch.testing.assert_close(w_p, w[:, :, perm][:, :, :, perm], **TOL)


def test_cached_fast_weights_follow_in_place_updates():
    m = make()
    x = torch.randn(1, 5, 64)
    with torch.no_grad():
        before = m(x)[0]
        m.q_proj.weight.mul_(2.0)  # in-place change: the fast path must notice
        after = m(x)[0]
        expected = m.trace(x).output
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, expected, **TOL)


def test_gradients_flow_in_both_modes():
    for heads in (None, (1, 1, 1)):
        m = MultiHeadAttention(32, 4, heads).train()
        out, _ = m(torch.randn(2, 6, 32))
        out.square().mean().backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in m.parameters())


def test_a_query_with_every_key_masked_gets_zeros_in_every_path():
    m = make(C=32, H=4)
    x = torch.randn(2, 5, 32)
    mask = torch.tensor([[1] * 5, [0] * 5])  # the second sequence has no token at all
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            out, w = m(x, mask)
            tr = m.trace(x, mask)
        assert torch.all(w[1] == 0) and torch.all(tr.weights[1] == 0) and torch.all(tr.heads[1] == 0)
        torch.testing.assert_close(out[1], m.out_proj.bias.expand(5, 32).detach(), **TOL)  # zeros @ W^O + b
        torch.testing.assert_close(w[0], tr.weights[0], **TOL)
        torch.testing.assert_close(w[0].sum(-1), torch.ones(4, 5), **TOL)
    q, k, v = torch.randn(3, 4, 8), torch.randn(3, 6, 8), torch.randn(3, 6, 2)
    blocked = torch.ones(3, 4, 6, dtype=torch.bool)
    blocked[1, 2] = False  # one query of one batch reads nothing
    o, w = scaled_dot_product_attention(q, k, v, blocked)
    assert torch.all(w[1, 2] == 0) and torch.all(o[1, 2] == 0)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=blocked)
    keep = blocked.any(-1)  # (3, 4): compare the rows that read something
    torch.testing.assert_close(o[keep], ref[keep], **TOL)


def test_trace_and_forward_share_one_definition_of_attention():
    m = make(C=48, H=6)
    x = torch.randn(2, 7, 48)
    with torch.no_grad():
        tr = m.trace(x, scale=False)
        heads, weights = scaled_dot_product_attention(tr.q, tr.k, tr.v, scale=1.0)
    torch.testing.assert_close(tr.weights, weights)
    torch.testing.assert_close(tr.heads, heads)
    torch.testing.assert_close(tr.scaled, tr.scores)  # scale off: the scores are not divided


def gqa_reference(m, x, mask=None):
    """The same layer through PyTorch's scaled_dot_product_attention(..., enable_gqa=True)."""
    B, T, C = x.shape
    H, G, D = m.n_heads, m.role_heads[1], m.d_head
    q = m.q_proj(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k = m.k_proj(x).view(B, T, G, D).transpose(1, 2)  # (B, G, T, D)
    v = m.v_proj(x).view(B, T, G, D).transpose(1, 2)
    attn_mask = None if mask is None else mask.bool()[:, None, None, :]
    heads = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, enable_gqa=True)
    return m.out_proj(heads.transpose(1, 2).reshape(B, T, C))


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("kv_heads", [1, 2, 3])
def test_grouped_query_attention_matches_pytorch_gqa(padded, kv_heads):
    torch.manual_seed(kv_heads)
    m = MultiHeadAttention(48, 6, heads=(6, kv_heads, kv_heads)).eval()
    assert m.k_proj.weight.shape == m.v_proj.weight.shape == (kv_heads * 8, 48) and m.q_proj.weight.shape == (48, 48)
    x = torch.randn(3, 9, 48)
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    with torch.no_grad():
        out, w = m(x, mask if padded else None)
        ref = gqa_reference(m, x, mask if padded else None)
        tr = m.trace(x, mask if padded else None)
    if padded:  # padded query rows: PyTorch and we agree on real tokens (their rows read real keys)
        keep = mask.bool()
        torch.testing.assert_close(out[keep], ref[keep], **TOL)
    else:
        torch.testing.assert_close(out, ref, **TOL)
    torch.testing.assert_close(tr.output, out, **TOL)
    torch.testing.assert_close(tr.weights, w, **TOL)
    r = 6 // kv_heads  # query head h reads K/V group h // r
    torch.testing.assert_close(tr.k[:, 0], tr.k[:, r - 1])
    if kv_heads > 1:
        assert not torch.equal(tr.k[:, 0], tr.k[:, r])


def test_explicit_distinct_split_is_the_default_bit_for_bit():
    torch.manual_seed(0)
    a = MultiHeadAttention(64, 8).eval()
    b = MultiHeadAttention(64, 8, heads=(8, 8, 8)).eval()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 11, 64)
    mask = torch.tensor([[1] * 11, [1] * 7 + [0] * 4])
    with torch.no_grad():
        for args in ((x,), (x, mask)):
            oa, wa = a(*args)
            ob, wb = b(*args)
            assert torch.equal(oa, ob) and torch.equal(wa, wb)


def test_grouped_parameters_gradients_and_bad_group_counts():
    C, H = 384, 12
    for g in (12, 6, 4, 3, 2, 1):
        m = MultiHeadAttention(C, H, heads=(H, g, g))
        assert m.num_parameters() == MultiHeadAttention.parameter_count(C, H, heads=(H, g, g))
        assert m.num_parameters() == 2 * (C * C + C) + 2 * (C * g * 32 + g * 32)
    m = MultiHeadAttention(32, 4, heads=(4, 2, 2)).train()
    out, _ = m(torch.randn(2, 6, 32))
    out.square().mean().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in m.parameters())
    for bad in (0, 5, 8, 2.0):
        with pytest.raises(ValueError, match="divide n_heads"):
            MultiHeadAttention(48, 6 if bad != 2.0 else 4, heads=(6 if bad != 2.0 else 4, bad, bad))


def role_reference(m, x, mask=None):
    """Any split by role through PyTorch's scaled_dot_product_attention: each role's projections
    are repeated to the H heads (head i reads group i // (H / n)), as Hugging Face's repeat_kv."""
    B, T, C = x.shape
    H, D = m.n_heads, m.d_head

    def heads(t):
        n = t.shape[-1] // D
        return t.view(B, T, n, D).transpose(1, 2).repeat_interleave(H // n, dim=1)  # (B, H, T, D)

    q, k, v = heads(m.q_proj(x)), heads(m.k_proj(x)), heads(m.v_proj(x))
    attn_mask = None if mask is None else mask.bool()[:, None, None, :]
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)  # (B, H, T, D)
    return m.out_proj(out.transpose(1, 2).reshape(B, T, C))


@pytest.mark.parametrize("heads", [(1, 1, 6), (1, 6, 6), (6, 6, 1), (2, 3, 6), (3, 3, 3), (1, 2, 3)])
@pytest.mark.parametrize("padded", [False, True])
def test_any_split_by_role_matches_pytorch_sdpa(heads, padded):
    torch.manual_seed(sum(heads))
    m = MultiHeadAttention(48, 6, heads=heads).eval()
    assert tuple(p.weight.shape[0] for p in (m.q_proj, m.k_proj, m.v_proj)) == tuple(8 * g for g in heads)
    assert m.num_parameters() == MultiHeadAttention.parameter_count(48, 6, heads=heads)
    x = torch.randn(3, 9, 48)
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:] = 0
    mask[2, 2:] = 0
    with torch.no_grad():
        out, w = m(x, mask if padded else None)
        ref = role_reference(m, x, mask if padded else None)
        tr = m.trace(x, mask if padded else None)
    keep = mask.bool() if padded else torch.ones(3, 9, dtype=torch.bool)
    torch.testing.assert_close(out[keep], ref[keep], **TOL)
    torch.testing.assert_close(tr.output, out, **TOL)
    torch.testing.assert_close(tr.weights, w, **TOL)


def test_shared_queries_and_keys_are_one_parameter_through_training():
    """heads=(1, 1, H): one W^Q and one W^K for every head (a C x D parameter each), a W_i^V per
    head. Every head computes the same map, before and after an optimiser step, and the layer has
    fewer parameters than distinct heads."""
    C, H = 64, 8
    m = MultiHeadAttention(C, H, heads=(1, 1, H)).train()
    assert m.q_proj.weight.shape == m.k_proj.weight.shape == (C // H, C) and m.v_proj.weight.shape == (C, C)
    assert m.shared_roles == ("q", "k") and m.projection == "mixed"
    assert m.num_parameters() == 2 * (C * 8 + 8) + 2 * (C * C + C) < MultiHeadAttention.parameter_count(C, H)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    x = torch.randn(4, 7, C)
    for _ in range(3):
        out, w = m(x)
        loss = out.square().mean()
        opt.zero_grad()
        loss.backward()
        assert m.q_proj.weight.grad.shape == (C // H, C)  # one gradient for the one shared matrix
        opt.step()
    with torch.no_grad():
        _, w = m(x)
        heads = m.trace(x).heads  # (B, H, T, D)
    assert torch.equal(w, w[:, :1].expand_as(w))  # the same map in every head, exactly
    assert (heads - heads[:, :1]).abs().max() > 1e-3  # read through different values


def test_invalid_role_splits_raise():
    with pytest.raises(ValueError, match="heads must be three head counts"):
        MultiHeadAttention(48, 6, heads=(4, 6, 6))
    with pytest.raises(ValueError, match="heads must be three head counts"):
        MultiHeadAttention(48, 6, heads=(6, 6))
    assert MultiHeadAttention(48, 6, heads=(1, 1, 1)).projection == "shared"  # the same structure, one name


SPLITS = [None, (1, 1, 1), (6, 2, 2), (6, 1, 1), (1, 1, 6), (2, 3, 6), (6, 6, 1), (3, 2, 1)]


@pytest.mark.parametrize("heads", SPLITS)
@pytest.mark.parametrize("causal,rope", [(False, None), (True, None), (True, 100.0)])
def test_every_fast_path_equals_the_reference(heads, causal, rope):
    """forward (fused projection, in-place softmax, grouped or by-role path) computes what the
    readable trace computes, for every kind of split, padded or not, causal or not, with rotary
    positions or without, with or without a gradient."""
    torch.manual_seed(0)
    m = MultiHeadAttention(48, 6, heads, causal=causal, rope_theta=rope).eval()
    x = torch.randn(3, 9, 48)
    mask = torch.tensor([[1] * 9, [1] * 6 + [0] * 3, [0] * 9])
    for args in ((x,), (x, mask)):
        for grad in (False, True):
            with torch.set_grad_enabled(grad):
                out, w = m(*args)
                tr = m.trace(*args)
            torch.testing.assert_close(w, tr.weights, **TOL)
            torch.testing.assert_close(out, tr.output, **TOL)
        fast = torch.autograd.grad(m(*args)[0].square().sum(), list(m.parameters()))
        slow = torch.autograd.grad(m.trace(*args).output.square().sum(), list(m.parameters()))
        for a, b in zip(fast, slow):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    m.requires_grad_(False)
    for proj in (m.q_proj, m.k_proj, m.v_proj):  # frozen weights, trainable biases
        proj.bias.requires_grad_(True)
    m(x, mask)[0].sum().backward()
    assert all(p.bias.grad is not None for p in (m.q_proj, m.k_proj, m.v_proj))


@pytest.mark.parametrize("heads", [None, (6, 2, 2), (6, 1, 1)])
def test_causal_attention_matches_pytorch(heads):
    """causal=True against PyTorch's scaled_dot_product_attention(is_causal=True, enable_gqa=True):
    query t reads keys 0..t only, so every weight above the diagonal is exactly 0."""
    torch.manual_seed(1)
    m = MultiHeadAttention(48, 6, heads, causal=True).eval()
    x = torch.randn(2, 8, 48)
    with torch.no_grad():
        out, w = m(x)
        B, T, _ = x.shape
        q, k, v = (p(x).view(B, T, -1, 8).transpose(1, 2) for p in (m.q_proj, m.k_proj, m.v_proj))
        heads_out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        ref = m.out_proj(heads_out.transpose(1, 2).reshape(B, T, 48))
    torch.testing.assert_close(out, ref, **TOL)
    assert torch.all(w.triu(1) == 0) and torch.all(w[..., 0, 0] == 1)


def test_a_fresh_modules_qkv_lie_in_one_block_and_the_fast_path_follows_changes():
    """A module built here keeps W^Q, W^K, W^V (and biases) one after another in one storage, each
    its own parameter, and projects with one product; replacing a projection (set_projection) or
    converting the module (.double()) leaves that block, and forward still equals trace."""
    torch.manual_seed(1)
    m = MultiHeadAttention(48, 6).eval()
    ws = [m.q_proj.weight, m.k_proj.weight, m.v_proj.weight]
    assert len({w.untyped_storage().data_ptr() for w in ws}) == 1 and len(list(m.parameters())) == 8
    x = torch.randn(2, 5, 48)
    with torch.inference_mode():
        assert m._qkv_block()[0] is not None
        torch.testing.assert_close(m(x)[0], m.trace(x).output, **TOL)
        m.set_projection("k", torch.randn(48, 48), torch.randn(48))  # new tensors: the block is apart now
        assert m._qkv_block() == (None, None)
        torch.testing.assert_close(m(x)[0], m.trace(x).output, **TOL)
    d = MultiHeadAttention(48, 6).eval().double()
    with torch.inference_mode():
        torch.testing.assert_close(d(x.double())[0], d.trace(x.double()).output)
        with torch.no_grad():
            d.q_proj.weight.mul_(2.0)  # in place: the block is the parameters' own storage
        torch.testing.assert_close(d(x.double())[0], d.trace(x.double()).output)
