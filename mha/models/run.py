"""One text (or pair) through a loaded model: what every page reads (LoadedModel.attend makes it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from mha.models.traits import Traits


@dataclass
class Run:
    """One sentence (or pair) through a model of any family.

    traits: the model's structure (mha/models/traits.py): every question about the model is its.
    tokens: T token strings (with the tokenizer's special tokens, if it adds any).
    word_ids: T ints, the word each token belongs to (None for special tokens); words of the
        second sentence continue the numbering of the first.
    segment_ids: T ints, 0 for sentence A, 1 for sentence B (a model without segments: all 0).
    attentions: (L, H, T, T) float32, row = query token, column = key token; rows sum to 1.
    hidden_states: (L + 1, T, C) float32; hidden_states[l] enters layer l, hidden_states[L] is the
        last layer's output (before a final norm, if the model has one).
    attention_inputs: (L, T, C) what each layer's attention reads, when that is not the hidden
        state itself (a pre-norm model reads norm(h)); None: the hidden states.
    truncated / n_dropped: whether tokens past the model's maximum were dropped, and how many.
    """

    traits: Traits
    tokens: list[str]
    word_ids: list[int | None]
    segment_ids: list[int]
    attentions: np.ndarray
    hidden_states: np.ndarray
    attention_inputs: np.ndarray | None = None
    truncated: bool = False
    n_dropped: int = 0
    input_ids: list[int] = field(default_factory=list)

    @property
    def model_name(self) -> str:
        return self.traits.name

    @property
    def max_length(self) -> int:
        """The most tokens the model reads (tokens past it were dropped)."""
        return self.traits.max_length

    @property
    def n_layers(self) -> int:
        return self.attentions.shape[0]

    @property
    def n_heads(self) -> int:
        return self.attentions.shape[1]

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def sinks(self) -> list[int]:
        """The positions heads park attention on when they have nothing to read (Traits.sinks)."""
        return self.traits.sinks(self.tokens)

    def layer_state(self, layer: int) -> torch.Tensor:
        """(1, T, C) the hidden states entering `layer` (where run_layers(start=layer) resumes), as
        a new tensor (the run is not shared with it: a cached run's arrays are read-only)."""
        return torch.tensor(self.hidden_states[layer]).unsqueeze(0)

    def layer_input(self, layer: int) -> torch.Tensor:
        """(1, T, C) what `layer`'s attention reads, a new tensor: the hidden states entering the
        layer (post-norm), or their norm (pre-norm: attention_inputs)."""
        if self.attention_inputs is None:
            return self.layer_state(layer)
        return torch.tensor(self.attention_inputs[layer]).unsqueeze(0)
