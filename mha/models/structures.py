"""Real models' attention shapes, for comparison beside the model on screen (the sharing page's K/V
cache table), each read from a configuration its authors published, not made up here: GPT-2 small
from Transformers' GPT2Config defaults (Radford et al. 2019); SmolLM2-135M and Gemma 3 270M from the
config.json of their converted copies, once fetched; Llama-3-8B, Mistral-7B and DeepSeek-V3 from the
fields of their public config.json on the Hugging Face Hub (copied below, keys as published).

A decoder caches, per token and layer, K and V of each K/V head (d_k values each). A sliding-window
layer keeps only its last W tokens (Mistral 7B: Jiang et al. 2023; Gemma 3: Gemma Team 2025). DeepSeek's
multi-head latent attention (MLA; DeepSeek-AI 2024, "DeepSeek-V2") caches one compressed latent of
kv_lora_rank values and one shared rotary key of qk_rope_head_dim values instead of any head's K and V.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

BYTES = 2  # fp16 / bf16: what a served cache stores per value

# fields of the public config.json of each (https://huggingface.co/<id>/blob/main/config.json)
PUBLIC = {
    "Llama-3-8B": (
        "meta-llama/Meta-Llama-3-8B",
        {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096},
    ),
    "Mistral-7B-v0.1": (
        "mistralai/Mistral-7B-v0.1",
        {
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "sliding_window": 4096,
        },
    ),
    "DeepSeek-V3": (
        "deepseek-ai/DeepSeek-V3",
        {"num_hidden_layers": 61, "num_attention_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64},
    ),
}


@dataclass(frozen=True)
class Structure:
    """name; L layers; H query heads; G K/V heads (G = H: every head its own); D = d_k; windows: per
    layer, the tokens a sliding layer keeps (None: every token), None for no window anywhere; latent:
    values cached per token and layer instead of K and V heads (MLA), None for K and V heads."""

    name: str
    n_layers: int
    n_heads: int
    kv_heads: int
    d_head: int
    windows: tuple[int | None, ...] | None = None
    latent: int | None = None

    def per_layer(self) -> int:
        """Values cached per token in one layer: K and V of every K/V head, or MLA's latent."""
        return self.latent if self.latent is not None else 2 * self.kv_heads * self.d_head

    def cache_bytes(self, tokens: int) -> int:
        """Bytes of the whole K/V cache at `tokens` tokens (fp16), each sliding layer capped at its window."""
        windows = self.windows or (None,) * self.n_layers
        return sum(self.per_layer() * (tokens if w is None else min(tokens, w)) * BYTES for w in windows)

    def per_token(self) -> int:
        """Bytes per token with no window's cap (what a window-free cache grows by)."""
        return self.n_layers * self.per_layer() * BYTES

    @property
    def sliding(self) -> int:
        """How many layers have a sliding window."""
        return sum(w is not None for w in self.windows or ())


def gpt2_small() -> Structure:
    """GPT-2 small: Transformers' GPT2Config() defaults (12 layers, 12 heads, width 768)."""
    from transformers import GPT2Config

    c = GPT2Config()
    return Structure("GPT-2 small", c.n_layer, c.n_head, c.n_head, c.n_embd // c.n_head)


def from_config(name: str, c: dict) -> Structure:
    """A Structure from config.json fields: head_dim when given (else hidden_size / heads), a
    sliding_window on every layer (Mistral) or on the layers whose layer_types say so (Gemma 3), MLA's
    kv_lora_rank + qk_rope_head_dim."""
    L, H = c["num_hidden_layers"], c["num_attention_heads"]
    if "kv_lora_rank" in c:  # MLA: one latent and one rotary key per token and layer, no K/V heads
        return Structure(name, L, H, 0, 0, latent=c["kv_lora_rank"] + c["qk_rope_head_dim"])
    D = c.get("head_dim") or c["hidden_size"] // H
    windows = None
    if c.get("sliding_window"):
        types = c.get("layer_types") or ["sliding_attention"] * L
        windows = tuple(c["sliding_window"] if t == "sliding_attention" else None for t in types)
    return Structure(name, L, H, c.get("num_key_value_heads", H), D, windows)


def _converted(name: str, folder) -> Structure | None:
    path = folder / "config.json"
    return from_config(name, json.loads(path.read_text())) if path.is_file() else None


def smollm2() -> Structure | None:
    """SmolLM2-135M-Instruct from its config.json, or None before the decoder is fetched."""
    from mha.models import fetch

    return _converted("SmolLM2-135M-Instruct", fetch.converted_dir())


def gemma3() -> Structure | None:
    """Gemma 3 270M from its config.json, or None before it is fetched."""
    from mha.models import fetch_gemma

    return _converted(fetch_gemma.NAME, fetch_gemma.converted_dir())


def public() -> list[Structure]:
    """Llama-3-8B, Mistral-7B and DeepSeek-V3 from the fields of their public configs (PUBLIC)."""
    return [from_config(name, c) for name, (_, c) in PUBLIC.items()]


def references() -> list[Structure]:
    """The structures available here: GPT-2 small, SmolLM2-135M and Gemma 3 270M once fetched, and the
    public ones."""
    return [s for s in (gpt2_small(), smollm2(), gemma3()) if s is not None] + public()
