"""A decoder's own task, next-token prediction, as the yardstick for heads and sharing.

The score is the mean cross-entropy (nats per predicted token) of predicting each next token of
human-written sentences the model never chose: the STS Benchmark's sentences shipped with the
package (Cer et al. 2017; mha/tasks/similarity.py). exp(loss) is the perplexity. Lower is better.
Heads are ranked on one set of sentences (the benchmark's train split) and scored on another
(its dev split), as BERT's similarity task ranks and scores on different pairs.

A batch is right-padded: with a causal mask no real token sees a pad after it, so no attention
mask is needed, and only the real next tokens are scored. Everything runs through the
from-scratch attention (LoadedModel.run_layers) on the read-only model.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from mha.core.attention import MultiHeadAttention
from mha.models.family import LoadedModel
from mha.tasks.checkpoints import Checkpoints
from mha.tasks.similarity import first_changed, mask_tensor, sts_pairs

TEXTS = {"rank": ("train", 64), "score": ("dev", 64)}


def _sentences(split: str) -> dict[str, None]:
    """The distinct sentences of an STS split, in order."""
    seen: dict[str, None] = {}
    for a, b, _ in sts_pairs(split):
        seen.setdefault(a.strip(), None)
        seen.setdefault(b.strip(), None)
    return seen


@lru_cache(maxsize=2)
def texts(which: str = "score") -> tuple[str, ...]:
    """The first n distinct sentences of an STS split: "rank" (train) or "score" (dev, without the
    captions that appear in the train split too: a score is on sentences the ranking never saw)."""
    split, n = TEXTS[which]
    other = _sentences("train") if which == "score" else {}
    return tuple([t for t in _sentences(split) if t not in other][:n])


@dataclass
class LossScore:
    """Next-token loss on a set of texts: per_text (N,) summed nats and tokens (N,) predicted."""

    per_text: np.ndarray
    tokens: np.ndarray

    @property
    def loss(self) -> float:
        """Mean nats per predicted token."""
        return float(self.per_text.sum() / self.tokens.sum())

    @property
    def value(self) -> float:
        """The score the pages show (mha/tasks/yardstick.py names it): the loss."""
        return self.loss

    @property
    def perplexity(self) -> float:
        return float(np.exp(self.loss))

    @property
    def n(self) -> int:
        return len(self.tokens)


_STATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> the score set's states


def _score_states(model: LoadedModel) -> tuple[torch.Tensor, torch.Tensor, Checkpoints]:
    """The score set's ids, lengths and hidden states entering kept layers and after the last
    (loaded.Checkpoints.within, of (N, T, C)), once per model while it lives: a layer replaced at l
    needs only the layers from the kept one before l run again."""
    found = _STATES.get(model)
    if found is None:
        ids, lengths = model.encode_batch(texts())
        h = model.embed(ids)  # (N, T, C)
        states, _ = model.run_layers(h)
        found = _STATES[model] = (ids, lengths, Checkpoints.within([[h, *states]])[0])
    return found


@torch.inference_mode()
def evaluate(
    model: LoadedModel,
    items: Sequence[str] | None = None,
    head_mask: np.ndarray | None = None,
    replace: dict[int, MultiHeadAttention] | None = None,
) -> LossScore:
    """The next-token loss on `items` (None = texts("score")) with the heads where head_mask (L, H)
    is 0 removed and the layers in `replace` computed by the given modules."""
    mask = mask_tensor(model, head_mask)  # (L, H) or None
    if items is None:  # the score set: resume from the first changed layer
        ids, lengths, kept = _score_states(model)
        h, start = kept.resume(first_changed(model.n_layers, mask, replace))  # the changes begin at or after it
        states, _ = model.run_layers(h, replace=replace, head_mask=mask, start=start, keep=False)
        last = states[-1] if states else h
    else:
        ids, lengths = model.encode_batch(texts() if items is None else items)
        h = model.embed(ids)  # (N, T, C)
        last = model.run_layers(h, replace=replace, head_mask=mask, keep=False)[0][-1]
    nats = model.next_token_nats(last, ids)  # (N, T-1)
    real = torch.arange(ids.shape[1] - 1)[None] < (lengths - 1)[:, None]  # (N, T-1): a real next token
    return LossScore((nats * real).sum(1).double().numpy(), real.sum(1).numpy())


def paired_interval(
    a: LossScore, b: LossScore, level: float = 0.9, resamples: int = 1000, seed: int = 0
) -> tuple[float, float, float]:
    """b's loss minus a's on the same texts and its bootstrap interval over texts (resampled in
    pairs, token-weighted): (difference, low, high). Negative: b predicts better."""
    if a.n != b.n or not np.array_equal(a.tokens, b.tokens):
        raise ValueError("the two scores are not on the same texts")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.n, size=(resamples, a.n))  # (R, N)
    tok = a.tokens[idx].sum(1)  # (R,)
    diffs = (b.per_text[idx].sum(1) - a.per_text[idx].sum(1)) / tok  # (R,)
    tail = (1 - level) / 2
    return b.loss - a.loss, float(np.quantile(diffs, tail)), float(np.quantile(diffs, 1 - tail))


def gradient_importance(
    model: LoadedModel, texts: list[str], progress: Callable[[int, int], None] | None = None
) -> np.ndarray:
    """(L, H) mean over texts of |d loss(text) / d gate_h| at gates 1 (one backward pass per text)."""
    total = np.zeros((model.n_layers, model.n_heads))
    for n, text in enumerate(texts):
        ids, _ = model.encode_batch([text])  # (1, T)
        if ids.shape[1] < 2:
            continue
        gate = torch.ones(model.n_layers, model.n_heads, requires_grad=True)
        with torch.inference_mode(False), torch.enable_grad():
            h = model.embed(ids).detach()  # (1, T, C)
            states, _ = model.run_layers(h, head_mask=gate)
            logits = model.logits(states[-1])[0, :-1]  # (T - 1, V)
            loss = torch.nn.functional.cross_entropy(logits.float(), ids[0, 1:])
            (grad,) = torch.autograd.grad(loss, gate)
        total += grad.abs().numpy()
        if progress is not None:
            progress(n + 1, len(texts))
    return total / len(texts)
