"""mha/lesson/structure_words.py: each phrase says what the traits say, on the structures the app
knows (BERT, SmolLM2's grouped K/V, Gemma 3's one K/V head, its own head size and windows), checked
against the traits' numbers, not against the rule that wrote them."""

from __future__ import annotations

from dataclasses import replace

from mha.lesson import structure_words as words
from mha.models.traits import Traits

BERT = Traits(
    "b", "BERT", "BERT", 6, 12, 384, 12, False, "learned", "LayerNorm", False, False, 1536, "similarity", "special"
)
SMOL = Traits(
    "s",
    "SmolLM2",
    "Llama",
    30,
    9,
    576,
    3,
    True,
    "rotary",
    "RMSNorm",
    True,
    True,
    1536,
    "next-token",
    "first",
    rope_theta=1e4,
)
GEMMA = Traits(
    "g", "Gemma 3", "Gemma 3", 18, 4, 640, 1, True, "rotary", "RMSNorm", True, True, 2048, "next-token", "first",
    rope_theta=1e6, head_dim=256, score_scale=256**-0.5, qk_norm=1e-6,
    windows=tuple(None if i % 6 == 5 else 512 for i in range(18)),
    rope_thetas=tuple(1e6 if i % 6 == 5 else 1e4 for i in range(18)),
)  # fmt: skip


def test_who_shares_k_and_v():
    assert words.kv_sharing(BERT) == ""
    assert "within 3 groups of 3 heads" in words.kv_sharing(SMOL) and "Ainslie" in words.kv_sharing(SMOL)
    said = words.kv_sharing(GEMMA)
    assert said.startswith("all 4 query heads read one $W^K$ and one $W^V$") and "groups" not in said


def test_d_k_and_the_scale():
    assert words.d_k_tex(BERT) == words.d_k_tex(SMOL) == r"d_k = d_{model}/h"  # 384 / 12 = 32, 576 / 9 = 64
    said = words.d_k_tex(GEMMA)
    assert "d_k = 256" in said and r"h\,d_k = 1024 \ne d_{model} = 640" in said and 4 * 256 == 1024 != 640
    assert words.scale_tex(GEMMA) == r"/ \sqrt{d_k}"  # query_pre_attn_scalar 256 = d_k: 1/16 both ways
    other = replace(GEMMA, score_scale=24**-0.5)
    assert words.scale_tex(other) == rf"\cdot {24**-0.5:.4g}" and abs(24**-0.5 - 256**-0.5) > 0.1


def test_what_a_token_reads():
    assert words.reads(BERT, 600) == ""
    assert words.reads(SMOL, 600) == "a token reads only itself and the tokens before it (a causal mask)"
    assert words.reads(GEMMA, 300) == words.reads(SMOL, 300)  # shorter than the window: the window changes nothing
    said = words.reads(GEMMA, 700)
    assert "in its 15 sliding-window layers, only the last 512 of them" in said and "700 tokens" in said
    assert sum(w is not None for w in GEMMA.windows) == 15
