"""The bundled model's own task, sentence similarity, as the yardstick for heads and sharing.

all-MiniLM-L6-v2 embeds a sentence as the mean of its last hidden states over the real tokens,
and two sentences are as similar as the cosine of their embeddings. On a set of pairs with a
graded similarity the score is Spearman's rank correlation between cosine and grade.

- Michel et al. 2019, "Are Sixteen Heads Really Better than One?": heads removed at test time (output
  zeroed before W^O), gradient importance I_h = E_x |d loss(x) / d gate_h| with every gate at 1.
- Voita et al. 2019: most heads can be pruned with little loss.

All through the from-scratch attention, read-only. Shapes: N sentences, P pairs, T tokens, C = d_model,
L layers, H heads. `_STATES` (beside ui/store.py): the bundled pairs' and the STS dev pairs' states
entering kept layers (Checkpoints.within), per model (held weakly).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy.stats import spearmanr

from mha.core.attention import MultiHeadAttention
from mha.tasks.bootstrap import bootstrap_change
from mha.tasks.checkpoints import Checkpoints

if TYPE_CHECKING:
    from mha.models.family import LoadedModel

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


STS_FILE = "data/sts_pairs.tsv"


@lru_cache(maxsize=1)
def _sts() -> tuple[tuple[str, str, float, str, str], ...]:
    text = resources.files("mha").joinpath(STS_FILE).read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]
    header, body = rows[0], rows[1:]
    if header != ["split", "genre", "year", "id", "score", "a", "b"]:
        raise ValueError(f"sts_pairs.tsv has columns {header}, expected split, genre, year, id, score, a, b")
    return tuple((split, genre, float(score), a, b) for split, genre, _year, _id, score, a, b in body)


def sts_pairs(split: str) -> list[Pair]:
    """Human-graded pairs of the STS Benchmark (Cer et al. 2017) shipped with the package: "train"
    (genre images, 1,000 pairs) or "dev" (images and track5.en-en, 375); the benchmark's test split
    is not shipped. (sentence a, sentence b, similarity 0-5)."""
    if split not in ("train", "dev"):
        raise ValueError(f"split must be 'train' or 'dev' (the test split is not shipped), got {split!r}")
    return [(a, b, score) for sp, _genre, score, a, b in _sts() if sp == split]


def sts_genres(split: str) -> list[str]:
    """The genre of each pair of sts_pairs(split), in its order."""
    return [genre for sp, genre, *_ in _sts() if sp == split]


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

    value = property(lambda self: self.spearman, doc="The score the pages show; n: the pairs it is scored on.")
    n = property(lambda self: len(self.gold))


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


def _chunks(bert: LoadedModel, sentences: Sequence[str]) -> tuple[list, list[int]]:
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


def _batch(bert: LoadedModel, pairs: Sequence[Pair], distinct: bool = True) -> _Batch:
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


def _entering(bert: LoadedModel, batch: _Batch, every: int | None = 1) -> list[Checkpoints]:
    """Per chunk, the states entering every `every`-th layer (None: Checkpoints.within) and the last."""
    out = []
    for ids, types, mask in batch.chunks:
        h = bert.embed(ids, types)  # (n, t, C)
        states, _ = bert.run_layers(h, mask)
        out.append([h, *states])
    return Checkpoints.within(out) if every is None else [Checkpoints.of(c, every) for c in out]


def _embed(
    bert: LoadedModel, batch: _Batch, head_mask=None, replace=None, start: int = 0, entering=None
) -> torch.Tensor:
    """Sentence embeddings (N, C), every chunk through layers start..L-1 (replace and head_mask begin
    there), from the states `entering` kept nearest before `start`, or from the embeddings."""
    pooled, embed = [], bert.embed
    for n, (ids, types, mask) in enumerate(batch.chunks):
        h, first = entering[n].resume(start) if entering else (embed(ids, types), start)
        states, _ = bert.run_layers(h, mask, replace, head_mask, start=first)
        pooled.append(_pool(states[-1] if states else h, mask))  # start = L: h is the last states
    return torch.cat(pooled)  # (N, C)


def mask_tensor(bert: LoadedModel, head_mask) -> torch.Tensor | None:
    """head_mask as an (L, H) float tensor, checked against the model's shape (None stays None)."""
    if head_mask is None:
        return None
    m = torch.as_tensor(np.asarray(head_mask, dtype=np.float32))
    if m.shape != (bert.n_layers, bert.n_heads):
        raise ValueError(f"head_mask must have shape (L, H) = ({bert.n_layers}, {bert.n_heads}), got {tuple(m.shape)}")
    return m


_STATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {set: _kept_states}, gone with it
KEPT_SETS = ("written", "dev")  # the sets whose states evaluate keeps: the bundled pairs and the STS dev pairs


def _kept_states(bert: LoadedModel, which: str) -> tuple[_Batch, list[Checkpoints]]:
    """A kept set's batch and its states entering kept layers, once per model and set while the model lives."""
    kept = _STATES.setdefault(bert, {})
    if which not in kept:
        batch = _batch(bert, similarity_pairs() if which == "written" else sts_pairs(which))
        with torch.inference_mode():
            kept[which] = (batch, _entering(bert, batch, None))
    return kept[which]


def first_changed(n_layers: int, head_mask: torch.Tensor | None, replace: dict | None) -> int:
    """The first layer a change touches (a replaced layer, or a layer with a head removed); n_layers if none."""
    layers = list(replace or ())
    if head_mask is not None:
        layers += [int(i) for i in torch.nonzero((head_mask != 1).any(-1)).flatten()]
    return min(layers, default=n_layers)


@torch.inference_mode()
def evaluate(
    bert: LoadedModel,
    pairs: Sequence[Pair] | str | None = None,
    head_mask: np.ndarray | None = None,
    replace: dict[int, MultiHeadAttention] | None = None,
) -> TaskScore:
    """The model's Spearman on `pairs` (None = the bundled set; "dev": the STS Benchmark dev pairs),
    with the heads where head_mask (L, H) is 0 removed (output zero before W^O) and the layers in
    `replace` computed by the given modules. One batch of the distinct sentences; the cached model
    is only read. On the bundled and the dev set, the layers before the first changed one are not
    run again (their states are kept per model)."""
    mask = mask_tensor(bert, head_mask)
    which = "written" if pairs is None else pairs if isinstance(pairs, str) else None
    if which is not None:
        if which not in KEPT_SETS:
            raise ValueError(f"pairs must be one of {KEPT_SETS} or a list of pairs, got {which!r}")
        batch, entering = _kept_states(bert, which)
        start = first_changed(bert.n_layers, mask, replace)
        emb = _embed(bert, batch, mask, replace, start=start, entering=entering)
    else:
        batch = _batch(bert, pairs)
        emb = _embed(bert, batch, mask, replace)
    return _score(_cosines(emb, batch), batch.gold)


@dataclass
class Importance:
    """Two measures of what each head is worth on the task, each (L, H).

    drop: Spearman of the full model minus Spearman with that head alone removed (> 0: the
        head helps; < 0: the score rises without it; Michel et al. 2019's ablation, with the
        task's own score).
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

    def top(self) -> tuple[int, int]:
        """(layer, head) of the largest drop: the head the score needs most."""
        layer, head = np.unravel_index(np.argmax(self.drop), self.drop.shape)
        return int(layer), int(head)


def head_mask(bert: LoadedModel, removed: Sequence[tuple[int, int]]) -> np.ndarray:
    """(L, H) ones with a 0 for every (layer, head) in `removed`: what removes those heads."""
    mask = np.ones((bert.n_layers, bert.n_heads))
    for layer, head in removed:
        mask[layer, head] = 0.0
    return mask


def _spearman(cos: np.ndarray, gold: np.ndarray, idx: np.ndarray | None = None) -> float:
    """Spearman's rho of cosines against grades, over the pairs in idx (None = all)."""
    if idx is not None:
        cos, gold = cos[..., idx], gold[idx]
    return float(spearmanr(cos, gold).statistic)


@dataclass
class Ablations:
    """Every pair's cosine with the full model (base (P,)) and with each head alone removed
    (ablated (L, H, P)), and the grades (P,): the drop of any subset of the pairs follows."""

    base: np.ndarray
    ablated: np.ndarray
    gold: np.ndarray

    def spearman(self, idx: np.ndarray | None = None) -> float:
        """The full model's Spearman on the pairs idx (None = all)."""
        return _spearman(self.base, self.gold, idx)

    def drop(self, idx: np.ndarray | None = None) -> np.ndarray:
        """(L, H) Spearman lost on the pairs idx (None = all) when each head alone is removed."""
        L, H, _ = self.ablated.shape
        base = self.spearman(idx)
        return np.array([[base - _spearman(self.ablated[l, h], self.gold, idx) for h in range(H)] for l in range(L)])


GROUP = 24  # pairs per forward and backward pass of gradient_importance


def gradient_importance(
    bert: LoadedModel,
    pairs: Sequence[Pair] | None = None,
    progress: Callable[[int, int], None] | None = None,
    group: int = GROUP,
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
                h = bert.embed(ids, types)  # (n, t, C)
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


def ablation_cosines(
    bert: LoadedModel, pairs: Sequence[Pair] | None = None, progress: Callable[[int, int], None] | None = None
) -> Ablations:
    """Every pair's cosine with the full model and with each head alone removed (its output zero
    before W^O). Layers before the removed head's are computed once: each ablation starts from the
    hidden states entering its layer. progress(done, total) after the full model and each head."""
    pairs = similarity_pairs() if pairs is None else pairs
    batch = _batch(bert, pairs)
    L, H = bert.n_layers, bert.n_heads
    ablated = np.zeros((L, H, len(pairs)))
    report = progress or (lambda done, n: None)
    with torch.inference_mode():
        entering = _entering(bert, batch)
        base = _cosines(torch.cat([_pool(e.last, c[2]) for e, c in zip(entering, batch.chunks)]), batch)
        report(1, 1 + L * H)
        for layer in range(L):
            for head in range(H):
                mask = torch.ones(L, H)
                mask[layer, head] = 0.0
                emb = _embed(bert, batch, mask, start=layer, entering=entering)
                ablated[layer, head] = _cosines(emb, batch).double().numpy()
                report(2 + layer * H + head, 1 + L * H)
    return Ablations(base.double().numpy(), ablated, batch.gold)


def head_importance(
    bert: LoadedModel,
    pairs: Sequence[Pair] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Importance:
    """The drop in Spearman when each head alone is removed, and the gradient importance.
    progress(done, total) is called after each gradient group and each ablation."""
    pairs = similarity_pairs() if pairs is None else pairs
    importance, _ = importance_and_ablations(bert, pairs, progress)
    return importance


def importance_and_ablations(
    bert: LoadedModel, pairs: Sequence[Pair], progress: Callable[[int, int], None] | None = None
) -> tuple[Importance, Ablations]:
    """head_importance, and the Ablations it measured the drops from (every pair's cosines)."""
    groups = -(-len(pairs) // GROUP)
    total = groups + 1 + bert.n_layers * bert.n_heads  # gradient groups, the full model, each head
    report = progress or (lambda done, n: None)
    gradient = gradient_importance(bert, pairs, lambda done, _n: report(done, total))
    ablations = ablation_cosines(bert, pairs, lambda done, _n: report(groups + done, total))
    return Importance(ablations.drop(), gradient, ablations.spearman()), ablations


TOLERANCE = 0.02  # Spearman a pruning may lose and still count as "can go"


@dataclass
class PruningCurve:
    """Spearman as heads are removed in an order: removed[k] heads gone -> spearman[k]."""

    removed: list[int]
    spearman: list[float]

    def can_go(self, tolerance: float = TOLERANCE) -> int:
        """How many heads can go (at the curve's points, in order) before Spearman first drops by
        more than `tolerance` below the full model's."""
        can = 0
        for n, score in zip(self.removed, self.spearman):
            if score < self.spearman[0] - tolerance:
                break
            can = n
        return can


def curve_cosines(
    bert: LoadedModel,
    order: Sequence[tuple[int, int]],
    steps: Sequence[int],
    pairs: Sequence[Pair] | None = None,
    progress: Callable[[int, int], None] | None = None,
    known: dict[int, np.ndarray] | None = None,
) -> np.ndarray:
    """Every pair's cosine (len(steps), P) after the first n heads of `order` ((layer, head),
    first to go first) are removed, for every n in steps. known: {n: cosines} that are the same
    for any order (0 heads, every head), not computed again. progress(done, total) after each
    model run."""
    known = known or {}
    batch = _batch(bert, similarity_pairs() if pairs is None else pairs)
    todo = [n for n in steps if n not in known]
    out = []
    with torch.inference_mode():
        for n in steps:
            if n in known:
                out.append(known[n])
                continue
            mask = torch.ones(bert.n_layers, bert.n_heads)
            for layer, head in order[:n]:
                mask[layer, head] = 0.0
            out.append(_cosines(_embed(bert, batch, mask), batch).double().numpy())
            if progress is not None:
                progress(len(out) - sum(m in known for m in steps[: len(out)]), len(todo))
    return np.stack(out)


def curve_on(
    steps: Sequence[int], cosines: np.ndarray, gold: np.ndarray, idx: np.ndarray | None = None
) -> PruningCurve:
    """The pruning curve scored on the pairs idx (None = all), from curve_cosines' output."""
    return PruningCurve(list(steps), [_spearman(c, gold, idx) for c in cosines])


def order_by(importance: np.ndarray) -> list[tuple[int, int]]:
    """Heads from least to most important by the signed value (for the drop: heads whose removal
    raises the score first, then those that cost least), ties broken by position."""
    H = importance.shape[1]
    return [(int(i // H), int(i % H)) for i in np.argsort(importance, axis=None, kind="stable")]


def random_order(n_layers: int, n_heads: int, seed: int = 0) -> list[tuple[int, int]]:
    """Every head in a seeded random order: the baseline for a pruning curve."""
    perm = np.random.default_rng(seed).permutation(n_layers * n_heads)
    return [(int(i // n_heads), int(i % n_heads)) for i in perm]


def paired_interval(a: TaskScore, b: TaskScore, level: float = 0.9) -> tuple[float, float, float]:
    """Spearman of b minus Spearman of a on the same pairs, and the central `level` interval of
    that difference over bootstrap resamples of the pairs: (difference, low, high)."""
    low, high = bootstrap_change(np.stack([a.per_pair, b.per_pair]), a.gold, level=level)
    return b.spearman - a.spearman, float(low[1]), float(high[1])
