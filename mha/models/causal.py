"""What next-token decoders share (CausalLM): one causal text, right-padded batches, Transformers'
states with the last layer's output before the final norm, the causal reference mask, the LM head
and the next-token loss without the (N, T, V) logits."""

from __future__ import annotations

import abc

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from mha.core.attention import MultiHeadAttention
from mha.models import q8
from mha.models.family import LoadedModel, Tokens

LOGITS_BYTES = 32 * 2**20  # at most this much float32 logits per pass through a float32 LM head


class CausalLM(LoadedModel):
    """What every next-token decoder family shares (mha/models/llama.py, gpt2.py): a text (a pair
    is read as one text), right-padded batches, Transformers' states with the last layer's output
    before the final norm, the causal reference mask and the LM head. A family adds `_base` (its
    Transformers decoder stack) and `_final_norm` (the norm before the LM head)."""

    AUTO = "AutoModelForCausalLM"

    @abc.abstractmethod
    def _base(self) -> nn.Module:
        """Transformers' decoder stack (without the LM head): forward(input_ids, output_hidden_states)."""

    @abc.abstractmethod
    def _final_norm(self, h: torch.Tensor) -> torch.Tensor:
        """(B, T, C) the final norm on the last layer's output h (B, T, C)."""

    def _final(self, h: torch.Tensor) -> torch.Tensor:
        """(B, T, V) the final norm and the LM head on the last layer's output h (B, T, C)."""
        return self.model.lm_head(self._final_norm(h))

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return self._final(h)

    def next_token_nats(self, h: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """(N, T - 1) the cross-entropy (nats) of each next token ids[:, 1:] of texts whose last layer's
        output is h (N, T, C), without the (N, T, V) logits: a Q8_0 head (mha/models/q8.py) runs its
        blocks of the vocabulary over every position at once, another head a few texts at a time
        (LOGITS_BYTES of logits at most, at least one text: Gemma 3's 262,144 take 1 MiB a token)."""
        N, T, C = h.shape
        target = ids[:, 1:]  # (N, T - 1)
        head = self.model.lm_head
        if isinstance(head, q8.Q8Head):
            x = self._final_norm(h[:, :-1]).reshape(-1, C)  # (N (T - 1), C)
            return head.nats(x.float(), target.reshape(-1)).view(N, T - 1)
        rows = max(1, LOGITS_BYTES // (T * head.out_features * 4))
        return torch.cat(
            [
                F.cross_entropy(
                    self.logits(h[i : i + rows])[:, :-1].float().transpose(1, 2), target[i : i + rows], reduction="none"
                )  # (n, T - 1)
                for i in range(0, N, rows)
            ]
        )

    def tokenize(self, text: str, text_b: str | None = None) -> Tokens:
        """The text (a second text is read after the first, in one sequence), at most max_length tokens."""
        full = text if not (isinstance(text_b, str) and text_b.strip()) else f"{text} {text_b}"
        if not isinstance(full, str) or not full.strip():
            raise ValueError("the sentence is empty: type at least one word")
        with self._tokenizer_lock:
            enc = self.tokenizer(full, truncation=False, add_special_tokens=True, split_special_tokens=True)
            ids = enc["input_ids"][: self.max_length]
            tokens = [self.tokenizer.decode([i]) for i in ids]
        words = enc.word_ids() if hasattr(enc, "word_ids") else [None] * len(ids)
        dropped = max(0, len(enc["input_ids"]) - self.max_length)
        return Tokens(torch.tensor([ids]), None, tokens, list(words[: self.max_length]), dropped)

    def _states(self, ids, segments, mask, last: bool = True) -> list[torch.Tensor]:
        """Right padding needs no mask: under the causal mask no real token reads a pad after it.
        Transformers' last state is after the final norm, so the last layer's output before it is
        that one layer again (from scratch), not the whole stack."""
        states = list(self._base()(input_ids=ids, output_hidden_states=True).hidden_states[:-1])  # L of (B, T, C)
        if last:
            final = self.n_layers - 1
            states.append(self._layer(final, states[final], self._template(final), None, None)[0])
        return states

    @staticmethod
    def _blocked(T: int) -> torch.Tensor:
        """(1, 1, T, T) the additive causal mask Transformers' eager attention takes."""
        return torch.full((T, T), torch.finfo(torch.float32).min).triu(1)[None, None]

    @torch.inference_mode()
    def next_token_loss(
        self,
        texts: list[str],
        replace: dict[int, MultiHeadAttention] | None = None,
        head_mask: torch.Tensor | np.ndarray | None = None,
    ) -> float:
        """The reference for mha/tasks/next_token.py: the mean cross-entropy (nats) of each next
        token of `texts`, one text at a time (no padding), with the layers in `replace` and the
        heads where head_mask (L, H) is 0 changed as in attend_with."""
        mask = None if head_mask is None else torch.as_tensor(head_mask, dtype=torch.float32)
        total, count = 0.0, 0
        for text in texts:
            ids = self.tokenize(text).ids  # (1, T)
            if ids.shape[1] < 2:
                continue
            states, _ = self.run_layers(self.embed(ids), replace=replace, head_mask=mask)
            logits = self.logits(states[-1])[0, :-1]  # (T - 1, V)
            loss = F.cross_entropy(logits.float(), ids[0, 1:], reduction="sum")
            total, count = total + float(loss), count + ids.shape[1] - 1
        if count == 0:
            raise ValueError("no text has two tokens: nothing to predict")
        return total / count
