"""The bundled model's own task, sentence similarity, as the yardstick for heads and sharing.

all-MiniLM-L6-v2 embeds a sentence as the mean of its last hidden states over the real tokens,
and two sentences are as similar as the cosine of their embeddings. On a set of pairs with a
graded similarity the score is Spearman's rank correlation between cosine and grade.

- Michel et al. 2019, "Are Sixteen Heads Really Better than One?": removing heads at test time
  (a head's output is zeroed before W^O), and the gradient-based head importance
  I_h = E_x |d loss(x) / d gate_h| with every gate at 1.
- Voita et al. 2019: most heads can be pruned with little loss.

Everything runs through the from-scratch attention modules and the model's own feed-forward
sub-modules, on copies or read-only; the cached model is never modified.
Shapes: N sentences, P pairs, T tokens, C = d_model, L layers, H heads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy.stats import spearmanr

from .attention import MultiHeadAttention

if TYPE_CHECKING:
    from .bert import LoadedBert

Pair = tuple[str, str, float]


@lru_cache(maxsize=1)
def _bundled() -> tuple[tuple[str, str, float, str], ...]:
    text = resources.files("mha").joinpath("data/similarity_pairs.tsv").read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]
    header, body = rows[0], rows[1:]
    if header != ["score", "kind", "a", "b"]:
        raise ValueError(f"similarity_pairs.tsv has columns {header}, expected score, kind, a, b")
    return tuple((a, b, float(score), kind) for score, kind, a, b in body)


def similarity_pairs() -> list[Pair]:
    """The bundled set: (sentence a, sentence b, similarity 0-5), written for this project."""
    return [(a, b, score) for a, b, score, _ in _bundled()]


def pair_kinds() -> list[str]:
    """The kind of each bundled pair (paraphrase, detail, related, topic, unrelated, negation,
    swapped, antonym, wordpiece), in the order of similarity_pairs()."""
    return [kind for *_, kind in _bundled()]


@dataclass
class TaskScore:
    """Spearman's rho between the model's cosines and the grades, and the cosine of each pair."""

    spearman: float
    per_pair: np.ndarray  # (P,)
    gold: np.ndarray  # (P,)


@dataclass
class _Batch:
    """The distinct sentences of a set of pairs, tokenized, in chunks of similar length (little
    padding): chunks [(ids, types, mask) (n, t) each]; sentence i of the pairs is row i of the
    chunks stacked; a_index, b_index (P,) say which rows a pair's sentences are."""

    chunks: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    a_index: torch.Tensor
    b_index: torch.Tensor
    gold: np.ndarray


CHUNK = 48  # sentences per forward pass


def _chunks(bert: LoadedBert, sentences: Sequence[str]) -> tuple[list, list[int]]:
    """Tokenize, sort by length, pad per chunk. Returns (chunks, rows): sentences[rows[k]] is
    row k of the chunks stacked."""
    with bert._tokenizer_lock:
        enc = bert.tokenizer(list(sentences), truncation=True, max_length=bert.max_length)
        rows = sorted(range(len(sentences)), key=lambda i: len(enc["input_ids"][i]))  # shortest first
        chunks = []
        for start in range(0, len(rows), CHUNK):
            part = [{k: enc[k][i] for k in enc} for i in rows[start : start + CHUNK]]
            padded = bert.tokenizer.pad(part, return_tensors="pt")
            types = padded.get("token_type_ids", torch.zeros_like(padded["input_ids"]))
            chunks.append((padded["input_ids"], types, padded["attention_mask"]))
    return chunks, rows


def _batch(bert: LoadedBert, pairs: Sequence[Pair], distinct: bool = True) -> _Batch:
    """The pairs' sentences in chunks: each distinct sentence once, or (distinct=False) every
    pair's own two rows."""
    if not pairs:
        raise ValueError("no sentence pairs to score")
    if distinct:
        sentences = sorted({s for a, b, _ in pairs for s in (a, b)})
        chunks, rows = _chunks(bert, sentences)
        where = {sentences[i]: k for k, i in enumerate(rows)}
        a_index, b_index = [where[a] for a, _, _ in pairs], [where[b] for _, b, _ in pairs]
    else:
        P = len(pairs)
        chunks, rows = _chunks(bert, [a for a, _, _ in pairs] + [b for _, b, _ in pairs])
        where = {i: k for k, i in enumerate(rows)}  # sentence i (a's, then b's) -> its row
        a_index, b_index = [where[i] for i in range(P)], [where[P + i] for i in range(P)]
    gold = np.array([g for *_, g in pairs], dtype=np.float64)
    return _Batch(chunks, torch.tensor(a_index), torch.tensor(b_index), gold)


def _pool(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of the last hidden states over the real tokens: (N, T, C) -> (N, C)."""
    m = mask[..., None].to(h.dtype)  # (N, T, 1)
    return (h * m).sum(1) / m.sum(1)


def _cosines(emb: torch.Tensor, batch: _Batch) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(emb[batch.a_index], emb[batch.b_index], dim=-1)  # (P,)


def _score(cos: torch.Tensor, gold: np.ndarray) -> TaskScore:
    c = cos.detach().double().numpy()
    return TaskScore(float(spearmanr(c, gold).statistic), c, gold)


def _entering(bert: LoadedBert, batch: _Batch) -> list[list[torch.Tensor]]:
    """For each chunk, the hidden states entering every layer and the last ones: (L + 1) x (n, t, C)."""
    out = []
    for ids, types, mask in batch.chunks:
        h = bert.model.embeddings(input_ids=ids, token_type_ids=types)  # (n, t, C)
        states, _ = bert.run_layers(h, mask)
        out.append([h, *states])
    return out


def _embed(
    bert: LoadedBert, batch: _Batch, head_mask=None, replace=None, start: int = 0, entering=None
) -> torch.Tensor:
    """Sentence embeddings (N, C), every chunk through layers start..L-1 (from `entering`'s
    states at `start`, or from the embeddings)."""
    pooled = []
    for n, (ids, types, mask) in enumerate(batch.chunks):
        h = entering[n][start] if entering is not None else bert.model.embeddings(input_ids=ids, token_type_ids=types)
        states, _ = bert.run_layers(h, mask, replace, head_mask, start=start)
        pooled.append(_pool(states[-1], mask))
    return torch.cat(pooled)  # (N, C)


def _check_mask(bert: LoadedBert, head_mask) -> torch.Tensor | None:
    if head_mask is None:
        return None
    m = torch.as_tensor(np.asarray(head_mask, dtype=np.float32))
    if m.shape != (bert.n_layers, bert.n_heads):
        raise ValueError(f"head_mask must have shape (L, H) = ({bert.n_layers}, {bert.n_heads}), got {tuple(m.shape)}")
    return m


@torch.inference_mode()
def evaluate(
    bert: LoadedBert,
    pairs: Sequence[Pair] | None = None,
    head_mask: np.ndarray | None = None,
    replace: dict[int, MultiHeadAttention] | None = None,
) -> TaskScore:
    """The model's Spearman on `pairs` (None = the bundled set), with the heads where head_mask
    (L, H) is 0 removed (output zero before W^O) and the layers in `replace` computed by the given
    modules. One batch of the distinct sentences; the cached model is only read."""
    batch = _batch(bert, similarity_pairs() if pairs is None else pairs)
    emb = _embed(bert, batch, _check_mask(bert, head_mask), replace)
    return _score(_cosines(emb, batch), batch.gold)


@dataclass
class Importance:
    """Two measures of what each head is worth on the task, each (L, H).

    drop: Spearman of the full model minus Spearman with that head alone removed (> 0: the
        head helps; Michel et al. 2019's ablation, with the task's own score).
    gradient: Michel et al.'s I_h = mean over pairs of |d loss / d gate_h| at gates 1, with the
        per-pair loss (cos(a, b) - (alpha + beta * grade))^2, where alpha + beta * grade is the
        least-squares line of the full model's cosines on the grades (a pair's loss is how far
        it sits from the model's own calibration), and one gate for both sentences of a pair.
    base: the full model's Spearman.
    """

    drop: np.ndarray
    gradient: np.ndarray
    base: float

    def agreement(self) -> float:
        """Spearman's rho between |drop| and the gradient importance over all heads. Both say how
        much the score moves with the head (the gradient's |.| has no sign), so |drop| is the
        fair comparison; 1 = the same ranking of heads."""
        return float(spearmanr(np.abs(self.drop).ravel(), self.gradient.ravel()).statistic)


def gradient_importance(
    bert: LoadedBert,
    pairs: Sequence[Pair] | None = None,
    progress: Callable[[int, int], None] | None = None,
    group: int = 24,
) -> np.ndarray:
    """Michel et al. 2019's head importance (see Importance.gradient) -> (L, H).

    Pairs are taken `group` at a time (a forward and a backward pass each); progress(done, total)
    after each group.
    """
    pairs = similarity_pairs() if pairs is None else pairs
    gold = np.array([g for *_, g in pairs], dtype=np.float64)
    with torch.inference_mode():  # the model's own line of cosine against grade, for the loss
        slope, intercept = np.polyfit(gold, evaluate(bert, pairs).per_pair, 1)
    L, H = bert.n_layers, bert.n_heads
    total = np.zeros((L, H))
    starts = range(0, len(pairs), group)
    for k, first in enumerate(starts):
        part = pairs[first : first + group]
        batch = _batch(bert, part, distinct=False)  # every pair its own two rows
        P = len(part)
        pair_of_row = torch.empty(2 * P, dtype=torch.long)
        pair_of_row[batch.a_index] = torch.arange(P)
        pair_of_row[batch.b_index] = torch.arange(P)
        with torch.inference_mode(False), torch.enable_grad():
            gates = torch.ones(P, L, H, requires_grad=True)  # (P, L, H): one gate per pair and head
            pooled, rows = [], 0
            for ids, types, mask in batch.chunks:
                n = ids.shape[0]
                h = bert.model.embeddings(input_ids=ids, token_type_ids=types)  # (n, t, C)
                states, _ = bert.run_layers(h, mask, None, gates[pair_of_row[rows : rows + n]])  # gates (n, L, H)
                pooled.append(_pool(states[-1], mask))
                rows += n
            cos = _cosines(torch.cat(pooled), batch)  # (P,)
            target = torch.as_tensor(intercept + slope * batch.gold, dtype=cos.dtype)  # (P,)
            per_pair = (cos - target) ** 2  # (P,)
            # pair i's gates reach only its own two rows, so one backward pass of the sum gives
            # every pair's own gradient: grads[i] = d per_pair[i] / d gates[i]
            (grads,) = torch.autograd.grad(per_pair.sum(), gates)  # (P, L, H)
        total += grads.abs().sum(0).numpy()
        if progress is not None:
            progress(k + 1, len(starts))
    return total / len(pairs)  # (L, H)


def head_importance(
    bert: LoadedBert,
    pairs: Sequence[Pair] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Importance:
    """The drop in Spearman when each head alone is removed, and the gradient importance.

    Layers before the removed head's are computed once: each ablation starts from the hidden
    states entering its layer. progress(done, total) is called after each head.
    """
    pairs = similarity_pairs() if pairs is None else pairs
    batch = _batch(bert, pairs)
    L, H = bert.n_layers, bert.n_heads
    groups = -(-len(pairs) // 24)
    total = groups + 1 + L * H  # gradient groups, the full model, each head
    report = progress or (lambda done, n: None)
    gradient = gradient_importance(bert, pairs, lambda done, _n: report(done, total))
    drop = np.zeros((L, H))
    with torch.inference_mode():
        entering = _entering(bert, batch)
        base = _score(
            _cosines(torch.cat([_pool(e[-1], c[2]) for e, c in zip(entering, batch.chunks)]), batch), batch.gold
        ).spearman
        report(groups + 1, total)
        for layer in range(L):
            for head in range(H):
                mask = torch.ones(L, H)
                mask[layer, head] = 0.0
                emb = _embed(bert, batch, mask, start=layer, entering=entering)
                drop[layer, head] = base - _score(_cosines(emb, batch), batch.gold).spearman
                report(groups + 2 + layer * H + head, total)
    return Importance(drop, gradient, base)


@dataclass
class PruningCurve:
    """Spearman as heads are removed in an order: removed[k] heads gone -> spearman[k]."""

    removed: list[int]
    spearman: list[float]

    def can_go(self, tolerance: float = 0.02) -> int:
        """How many heads can go (at the curve's points, in order) before Spearman first drops by
        more than `tolerance` below the full model's."""
        can = 0
        for n, score in zip(self.removed, self.spearman):
            if score < self.spearman[0] - tolerance:
                break
            can = n
        return can


def pruning_curve(
    bert: LoadedBert,
    order: Sequence[tuple[int, int]],
    steps: Sequence[int],
    pairs: Sequence[Pair] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PruningCurve:
    """Remove the heads of `order` ((layer, head), first to go first) cumulatively; score the
    model after the first n are gone, for every n in steps."""
    batch = _batch(bert, similarity_pairs() if pairs is None else pairs)
    scores = []
    with torch.inference_mode():
        for k, n in enumerate(steps):
            mask = torch.ones(bert.n_layers, bert.n_heads)
            for layer, head in order[:n]:
                mask[layer, head] = 0.0
            scores.append(_score(_cosines(_embed(bert, batch, mask), batch), batch.gold).spearman)
            if progress is not None:
                progress(k + 1, len(steps))
    return PruningCurve(list(steps), scores)


def order_by(importance: np.ndarray) -> list[tuple[int, int]]:
    """Heads from least to most important (ties broken by position)."""
    H = importance.shape[1]
    return [(int(i // H), int(i % H)) for i in np.argsort(importance, axis=None, kind="stable")]


def random_order(n_layers: int, n_heads: int, seed: int = 0) -> list[tuple[int, int]]:
    """Every head in a seeded random order: the baseline for a pruning curve."""
    perm = np.random.default_rng(seed).permutation(n_layers * n_heads)
    return [(int(i // n_heads), int(i % n_heads)) for i in perm]


@dataclass
class HeadsStudy:
    """Everything the "Do we need every head?" page shows about the model (not the sentence):
    importance both ways, and the pruning curves least-important-first and in random order."""

    importance: Importance
    pruned: PruningCurve
    random: PruningCurve


def heads_study(
    bert: LoadedBert, step: int = 6, seed: int = 0, progress: Callable[[int, int], None] | None = None
) -> HeadsStudy:
    """head_importance, then pruning curves every `step` heads by least |drop| first and at random.
    progress(done, total) counts head ablations and curve points together."""
    L, H = bert.n_layers, bert.n_heads
    steps = list(range(0, L * H + 1, step))
    steps += [] if steps[-1] == L * H else [L * H]
    first = -(-len(similarity_pairs()) // 24) + 1 + L * H  # head_importance's own count
    total = first + 2 * len(steps)

    def part(offset: int):
        return None if progress is None else (lambda done, _n: progress(offset + done, total))

    importance = head_importance(bert, progress=part(0))
    pruned = pruning_curve(bert, order_by(importance.drop), steps, progress=part(first))
    rand = pruning_curve(bert, random_order(L, H, seed), steps, progress=part(first + len(steps)))
    return HeadsStudy(importance, pruned, rand)
