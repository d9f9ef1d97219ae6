"""GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners"): a causal
decoder with learned absolute positions, pre-norm LayerNorm and 12 distinct heads per layer.

Its attention keeps W^Q, W^K and W^V fused in one Conv1D, `c_attn` (weight C x 3C, applied as
x W + b, the transpose of nn.Linear's orientation): the from-scratch layer reads the three C x C
slices of that one tensor as views (no copy), transposed to nn.Linear's (out, in).

A layer: h + Attention(LayerNorm_1(h)), then + MLP(LayerNorm_2(.)); a final LayerNorm (ln_f)
before the tied LM head. Reference: Hugging Face's GPT2LMHeadModel with eager attention.
"""

from __future__ import annotations

import torch

from mha.models.causal import CausalLM
from mha.models.traits import Traits


class LoadedGPT2(CausalLM):
    """A Hugging Face GPT2LMHeadModel (eager attention, eval mode) with its tokenizer. Read-only."""

    MODEL_TYPE = "gpt2"
    HUB = {
        "gpt2": ("openai-community/gpt2", "GPT-2 small: 12 layers x 12 heads, width 768, 124M; download ~550 MB"),
        "distilgpt2": ("distilbert/distilgpt2", "DistilGPT2: 6 layers x 12 heads, width 768, 82M; download ~350 MB"),
    }

    def _traits(self) -> Traits:
        cfg = self.model.config
        if not cfg.scale_attn_weights or cfg.scale_attn_by_inverse_layer_idx or cfg.reorder_and_upcast_attn:
            raise ValueError(f"{self.name}: only GPT-2's plain attention (scores / sqrt(d_k)) is supported")
        return Traits(
            name=self.name,
            who="GPT-2",
            architecture="GPT-2 (Radford et al. 2019)",
            n_layers=cfg.n_layer,
            n_heads=cfg.n_head,
            d_model=cfg.n_embd,
            kv_groups=cfg.n_head,
            causal=True,
            positions="learned",
            norm="LayerNorm",
            pre_norm=True,
            gated_mlp=False,
            mlp_width=cfg.n_inner or 4 * cfg.n_embd,
            task="next-token",
            parking="first",
            max_length=min(cfg.n_positions, 512),
        )

    def embed(self, ids: torch.Tensor, segments: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, C) token + learned position vectors (positions 0..T-1)."""
        t = self.model.transformer
        return t.wte(ids) + t.wpe(torch.arange(ids.shape[1]))[None]  # (B, T, C)

    def attention_input(self, layer: int, h: torch.Tensor) -> torch.Tensor:
        return self.model.transformer.h[layer].ln_1(h)

    def _layer(self, i, h, attn, mask, gate) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-norm: h + attention(LayerNorm_1(h)), then + MLP(LayerNorm_2(.))."""
        block = self.model.transformer.h[i]
        out, weights = attn(block.ln_1(h), mask, gate)  # (B, T, C), (B, H, T, T)
        a = h + out
        return a + block.mlp(block.ln_2(a)), weights

    def _final_norm(self, h: torch.Tensor) -> torch.Tensor:
        return self.model.transformer.ln_f(h)

    def _base(self):
        return self.model.transformer

    def _projections(self, layer: int) -> tuple:
        attn = self.model.transformer.h[layer].attn
        C = self.traits.d_model
        w, b = attn.c_attn.weight, attn.c_attn.bias  # (C, 3C) and (3C,): x W + b, fused Q | K | V
        fused = [(w[:, r * C : (r + 1) * C].t(), b[r * C : (r + 1) * C]) for r in range(3)]  # (C, C) views
        return (*fused, (attn.c_proj.weight.t(), attn.c_proj.bias))

    def _attention_modules(self) -> list:
        return [block.attn for block in self.model.transformer.h]

    @torch.inference_mode()
    def reference_attention(self, run, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Transformers' own eager GPT2Attention of `layer` on the run's input to it, with a causal
        mask: (output (1, T, C), weights (1, H, T, T))."""
        x = run.layer_input(layer)  # (1, T, C)
        return self.model.transformer.h[layer].attn(x, attention_mask=self._blocked(x.shape[1]))


def save_random_gpt2(path, layers: int = 12, heads: int = 12, width: int = 768, seed: int = 0) -> str:
    """A randomly initialised GPT2LMHeadModel (GPT-2 small's shape by default: 12 x 12 x 768, 1024
    positions), saved with the offline decoder's byte-level BPE tokenizer (GPT-2's own is on the
    Hub only; SmolLM2's is the same kind, 49,152 tokens instead of 50,257). Returns the path."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from mha.models import fetch

    tokenizer = AutoTokenizer.from_pretrained(fetch.decoder_dir())
    ends = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    config = GPT2Config(
        vocab_size=len(tokenizer), n_layer=layers, n_head=heads, n_embd=width, bos_token_id=ends, eos_token_id=ends
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        GPT2LMHeadModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)
