"""Real models' attention shapes, for comparison beside the model on screen (the sharing page's
K/V cache table), each read from a configuration its authors' code defines, not typed here:
GPT-2 small from Transformers' GPT2Config defaults (which are GPT-2 small's: Radford et al. 2019)
and SmolLM2-135M from its config.json, once fetched (mha/models/fetch.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Structure:
    """name; L layers; H query heads; G K/V heads (G = H: every head its own); D = d_k."""

    name: str
    n_layers: int
    n_heads: int
    kv_heads: int
    d_head: int


def gpt2_small() -> Structure:
    """GPT-2 small: Transformers' GPT2Config() defaults (12 layers, 12 heads, width 768)."""
    from transformers import GPT2Config

    c = GPT2Config()
    return Structure("GPT-2 small", c.n_layer, c.n_head, c.n_head, c.n_embd // c.n_head)


def smollm2() -> Structure | None:
    """SmolLM2-135M-Instruct from its config.json, or None before the decoder is fetched."""
    from mha.models import fetch

    path = fetch.converted_dir() / "config.json"
    if not path.is_file():
        return None
    c = json.loads(path.read_text())
    H = c["num_attention_heads"]
    return Structure(
        "SmolLM2-135M-Instruct", c["num_hidden_layers"], H, c["num_key_value_heads"], c["hidden_size"] // H
    )


def references() -> list[Structure]:
    """The structures available here: GPT-2 small always, SmolLM2-135M once fetched."""
    return [s for s in (gpt2_small(), smollm2()) if s is not None]
