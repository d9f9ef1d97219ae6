"""Rotary position embeddings in the from-scratch module, against Hugging Face's Llama attention
(a small random Llama made with Transformers) and against PyTorch's scaled_dot_product_attention."""

from __future__ import annotations

import pytest
import torch

from mha import MultiHeadAttention
from mha.core import rotary

TOL = dict(rtol=1e-5, atol=1e-5)


def llama_attention(C=48, H=6, G=2, theta=10_000.0, seed=0):
    """A random Hugging Face LlamaAttention (eager) and its rotary embedding."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

    config = LlamaConfig(
        hidden_size=C, num_attention_heads=H, num_key_value_heads=G, rope_theta=theta, intermediate_size=2 * C
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    return LlamaAttention(config, 0).eval(), LlamaRotaryEmbedding(config)


def ours_from(theirs, H, G, theta) -> MultiHeadAttention:
    C = theirs.q_proj.in_features
    m = MultiHeadAttention(C, H, (H, G, G), bias=False, causal=True, rope_theta=theta).eval()
    with torch.no_grad():
        for a, b in [(m.q_proj, theirs.q_proj), (m.k_proj, theirs.k_proj), (m.v_proj, theirs.v_proj)]:
            a.weight.copy_(b.weight)
        m.out_proj.weight.copy_(theirs.o_proj.weight)
    return m


@pytest.mark.parametrize("G,theta", [(1, 10_000.0), (2, 10_000.0), (6, 10_000.0), (3, 500.0)])
def test_rotary_gqa_matches_huggingface_llama_attention(G, theta):
    H, C, T = 6, 48, 11
    theirs, rope = llama_attention(C, H, G, theta)
    ours = ours_from(theirs, H, G, theta)
    x = torch.randn(1, T, C)
    positions = torch.arange(T)[None]
    blocked = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)[None, None]  # (1, 1, T, T)
    with torch.no_grad():
        out_ref, w_ref = theirs(x, position_embeddings=rope(x, positions), attention_mask=blocked)
        out, w = ours(x)
        tr = ours.trace(x)
    torch.testing.assert_close(w, w_ref, **TOL)
    torch.testing.assert_close(out, out_ref, **TOL)
    torch.testing.assert_close(tr.weights, w_ref, **TOL)
    torch.testing.assert_close(tr.output, out_ref, **TOL)
    assert torch.all(w.triu(1) == 0)


def test_rotary_scores_depend_on_the_offset_only():
    """q . k after rotation depends on t - s: the same vectors at positions (t, s) and (t + 3, s + 3)
    give the same score; at another offset, another one."""
    D = 8
    torch.manual_seed(5)
    q, k = torch.randn(D), torch.randn(D)
    x = torch.zeros(1, 12, D)
    x[0, 2], x[0, 5], x[0, 8] = q, k, k
    y = torch.zeros(1, 12, D)
    y[0, 5] = q
    rx, ry = rotary.rotate(x, 10_000.0), rotary.rotate(y, 10_000.0)
    same = (rx[0, 2] @ rx[0, 5], rx[0, 2] @ rx[0, 8])  # offsets 3 and 6
    yk = rotary.rotate(x, 10_000.0)  # keys at 5 and 8 read by the query moved to 5: offsets 0 and 3
    torch.testing.assert_close(ry[0, 5] @ yk[0, 8], same[0])
    assert not torch.isclose(same[0], same[1])
    assert torch.allclose(rx.norm(dim=-1), x.norm(dim=-1), atol=1e-6)  # a rotation keeps lengths


def test_rotary_equals_pytorch_sdpa_on_rotated_inputs():
    torch.manual_seed(3)
    m = MultiHeadAttention(48, 6, (6, 3, 3), causal=True, rope_theta=500.0).eval()
    x = torch.randn(2, 9, 48)
    with torch.no_grad():
        out, _ = m(x)
        B, T, _ = x.shape
        q, k, v = (p(x).view(B, T, -1, 8).transpose(1, 2) for p in (m.q_proj, m.k_proj, m.v_proj))
        q, k = rotary.rotate(q, 500.0), rotary.rotate(k, 500.0)
        heads = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        ref = m.out_proj(heads.transpose(1, 2).reshape(B, T, 48))
    torch.testing.assert_close(out, ref, **TOL)
