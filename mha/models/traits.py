"""What a loaded model is, as one record: every engine branch and every sentence a page shows
about the model reads these fields, never a family name (TransformerLens's
HookedTransformerConfig has the same idea: independent fields, not a label).

A family module (mha/models/bert.py, llama.py, gpt2.py) fills a Traits from its config; pages
word a sentence from it (`kv_phrase`, `sink_name`), so text written for one structure is never
shown on another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Positions = Literal["learned", "rotary", "none"]
Norm = Literal["LayerNorm", "RMSNorm"]
Task = Literal["similarity", "next-token"]


@dataclass(frozen=True)
class Traits:
    """One model's structure.

    name: the allow-list name; who: the model in one word for a sentence ("BERT", "SmolLM2").
    architecture: the layer's design and its paper ("BERT (Devlin et al. 2019)").
    n_layers, n_heads, d_model: L, H, C. kv_groups: G, how many K/V projections a layer has
        (G = H: every head its own; G < H: query heads share K and V within groups of H / G).
    causal: query t reads keys 0..t only. positions: how word order enters ("learned": a learned
        vector per position added to the token before layer 0; "rotary": q and k rotated by
        position inside each layer, Su et al. 2021; "none"). norm, pre_norm: the layer's
        normalisation and where (pre-norm: the attention reads norm(h); post-norm: norm after the
        residual). gated_mlp: a gated feed-forward (SwiGLU) of width mlp_width.
    task: what the model was trained for and what the pages measure it by ("similarity": mean-
        pooled sentence embeddings; "next-token": cross-entropy of each next token).
    parking: where heads park attention ("special": the tokenizer's special_tokens; "first": the
        first token, an attention sink). rope_theta: the rotary base (None without rotary).
    bias: whether Q, K, V and O have biases. max_length: the most tokens a run reads.
    head_dim: d_k when the model sets it (None: C / H); the heads' concatenation is H d_k wide.
    score_scale: the factor on Q K^T (None: 1 / sqrt(d_k)). qk_norm: the eps of a per-head RMS norm
    of queries and keys before the scores (None: none). windows: per layer, the sliding window in
    keys (None: the layer reads every earlier key), None for no window anywhere. rope_thetas: per
    layer, the rotary base (None: rope_theta in every layer).
    """

    name: str
    who: str
    architecture: str
    n_layers: int
    n_heads: int
    d_model: int
    kv_groups: int
    causal: bool
    positions: Positions
    norm: Norm
    pre_norm: bool
    gated_mlp: bool
    mlp_width: int
    task: Task
    parking: Literal["special", "first"]
    special_tokens: tuple[str, ...] = ()
    rope_theta: float | None = None
    bias: bool = True
    max_length: int = 512
    head_dim: int | None = None
    score_scale: float | None = None
    qk_norm: float | None = None
    windows: tuple[int | None, ...] | None = None
    rope_thetas: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.n_heads % self.kv_groups or (self.head_dim is None and self.d_model % self.n_heads):
            raise ValueError(f"{self.name}: {self.kv_groups} K/V groups, {self.n_heads} heads, width {self.d_model}")
        if (self.positions == "rotary") != (self.rope_theta is not None):
            raise ValueError(f"{self.name}: rotary positions and rope_theta go together")
        for name, per in (("windows", self.windows), ("rope_thetas", self.rope_thetas)):
            if per is not None and len(per) != self.n_layers:
                raise ValueError(f"{self.name}: {name} has {len(per)} entries for {self.n_layers} layers")
        if self.windows is not None and not self.causal and any(w is not None for w in self.windows):
            raise ValueError(f"{self.name}: a sliding window needs a causal model")

    @property
    def d_head(self) -> int:
        """d_k: the model's head size, C / H unless it sets another."""
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    @property
    def heads_width(self) -> int:
        """H d_k: the width of the heads side by side, what W^O reads (C when d_k = C / H)."""
        return self.n_heads * self.d_head

    @property
    def scale(self) -> float:
        """The factor on Q K^T: 1 / sqrt(d_k) unless the model sets another."""
        return self.d_head**-0.5 if self.score_scale is None else self.score_scale

    @property
    def scale_is_standard(self) -> bool:
        """Whether the scale is 1 / sqrt(d_k) (to float precision)."""
        return abs(self.scale * self.d_head**0.5 - 1) < 1e-6

    def window(self, layer: int) -> int | None:
        """Layer `layer`'s sliding window in keys, or None (it reads every key its mask allows)."""
        return None if self.windows is None else self.windows[layer]

    @property
    def sliding_layers(self) -> tuple[int, ...]:
        """The layers with a sliding window."""
        return tuple(i for i in range(self.n_layers) if self.window(i) is not None)

    @property
    def widest_window(self) -> int | None:
        """The largest sliding window of any layer, in keys (None: no sliding layer)."""
        return max((w for w in self.windows or () if w), default=None)

    def theta(self, layer: int) -> float | None:
        """Layer `layer`'s rotary base (None without rotary positions)."""
        return self.rope_theta if self.rope_thetas is None else self.rope_thetas[layer]

    @property
    def grouped(self) -> bool:
        """Whether query heads share K/V projections (grouped- or multi-query attention)."""
        return self.kv_groups < self.n_heads

    @property
    def group_size(self) -> int:
        """Query heads per K/V projection (1 when every head has its own)."""
        return self.n_heads // self.kv_groups

    @property
    def kv_phrase(self) -> str:
        """Whose W^K and W^V a head reads, in words: "its own", or "shared within groups of 3"."""
        return f"shared within groups of {self.group_size}" if self.grouped else "its own"

    @property
    def sink_name(self) -> str:
        """Where heads park attention, in words: "[CLS] and [SEP]" or "the first token"."""
        return " and ".join(self.special_tokens) if self.parking == "special" else "the first token"

    def sinks(self, tokens: list[str]) -> list[int]:
        """The positions of the parking tokens in a run's tokens."""
        if self.parking == "first":
            return [0] if tokens else []
        return [i for i, t in enumerate(tokens) if t in self.special_tokens]

    @property
    def order_inside(self) -> bool:
        """Whether word order enters inside the attention layer (a causal mask or rotary positions),
        so a layer fed shuffled rows does more than permute its outputs."""
        return self.causal or self.positions == "rotary"
