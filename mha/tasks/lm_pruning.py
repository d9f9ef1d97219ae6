"""The "Do we need every head?" study for a decoder, on its own task: next-token loss (next_token.py).

- The heads are ranked by Michel et al. 2019's gradient importance (*Are Sixteen Heads Really
  Better than One?*), I_h = mean over texts of |d loss(x) / d gate_h| with every gate at 1, on
  the ranking texts (STS train sentences), and removed least important first.
- Every count is scored on texts the ranking never saw (STS dev sentences), with a bootstrap
  interval over those texts of the change in loss from the full model, beside seeded random
  orders and the floor (every head removed).

Removing a head zeroes its output before W^O. Everything runs on the read-only model through
the from-scratch layers. Shapes: L layers, H heads, N texts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from mha.models.family import LoadedModel
from mha.tasks import next_token

TOLERANCE = 0.05  # nats per token a pruning may add to the loss and still count as "can go" (perplexity +5 %)
STEP, SEEDS, LEVEL = 27, (0, 1, 2), 0.9  # heads removed between two points; random orders; interval


@dataclass
class LossStudy:
    """gradient (L, H): the importance on the ranking texts; removed: the counts of each point;
    loss: the held-out loss there; low, high: the interval of its change from the full model;
    random: one loss curve per seed; n_rank, n_score: texts ranked and scored on."""

    gradient: np.ndarray
    removed: list[int]
    loss: list[float]
    low: list[float]
    high: list[float]
    random: list[list[float]]
    seeds: tuple[int, ...]
    n_rank: int
    n_score: int
    tolerance: float = TOLERANCE
    level: float = LEVEL

    def can_go(self, loss: list[float] | None = None) -> int:
        """Heads that can go (in order, at the points) before the loss first rises by more than tolerance."""
        loss = self.loss if loss is None else loss
        can = 0
        for n, value in zip(self.removed, loss):
            if value > loss[0] + self.tolerance:
                break
            can = n
        return can

    def surely_can_go(self) -> int:
        """The same while the whole interval of the change stays below +tolerance."""
        can = 0
        for n, high in zip(self.removed, self.high):
            if high > self.tolerance:
                break
            can = n
        return can

    def random_can_go(self) -> list[int]:
        return [self.can_go(curve) for curve in self.random]

    @property
    def top(self) -> tuple[int, int]:
        """(layer, head) of the largest gradient importance."""
        layer, head = np.unravel_index(int(np.argmax(self.gradient)), self.gradient.shape)
        return int(layer), int(head)

    @property
    def tolerance_ratio(self) -> float:
        """What the tolerance does to the perplexity: exp(tolerance) - 1."""
        return float(np.expm1(self.tolerance))


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
            h = model.model.model.embed_tokens(ids).detach()  # (1, T, C)
            states, _ = model.run_layers(h, head_mask=gate)
            logits = model.model.lm_head(model.model.model.norm(states[-1]))[0, :-1]  # (T - 1, V)
            loss = torch.nn.functional.cross_entropy(logits.float(), ids[0, 1:])
            (grad,) = torch.autograd.grad(loss, gate)
        total += grad.abs().numpy()
        if progress is not None:
            progress(n + 1, len(texts))
    return total / len(texts)


def _scores(model: LoadedModel, order: list[tuple[int, int]], at: list[int], known: dict) -> list[next_token.LossScore]:
    """The score set's loss with the first n heads of `order` removed, for n in `at`."""
    out = []
    for n in at:
        if n not in known:
            mask = np.ones((model.n_layers, model.n_heads))
            for layer, head in order[:n]:
                mask[layer, head] = 0.0
            known[n] = (
                next_token.evaluate(model, next_token.texts(), head_mask=mask) if n else next_token.evaluate(model)
            )
        out.append(known[n])
    return out


def heads_study(model: LoadedModel, progress: Callable[[int, int], None] | None = None) -> LossStudy:
    """Rank on next_token.texts("rank"), remove least important first every STEP heads, score on
    next_token.texts("score") with bootstrap intervals, beside random orders (SEEDS)."""
    rank = list(next_token.texts("rank"))
    L, H = model.n_layers, model.n_heads
    at = sorted({*range(0, L * H + 1, STEP), L * H})
    total = len(rank) + len(at) + len(SEEDS) * (len(at) - 2)
    done = [0]

    def tick(n: int = 1) -> None:
        done[0] += n
        if progress is not None:
            progress(done[0], total)

    gradient = gradient_importance(model, rank, lambda n, _t: progress(n, total) if progress else None)
    done[0] = len(rank)
    order = [(int(i // H), int(i % H)) for i in np.argsort(gradient, axis=None, kind="stable")]
    shared: dict = {}
    scores = []
    for n in at:
        scores += _scores(model, order, [n], shared)
        tick()
    ends = {0: shared[0], L * H: shared[L * H]}  # the same for any order
    intervals = [next_token.paired_interval(scores[0], s, LEVEL) for s in scores]
    random = []
    for seed in SEEDS:
        perm = np.random.default_rng(seed).permutation(L * H)
        known = dict(ends)
        curve = []
        for n in at:
            curve.append(_scores(model, [(int(i // H), int(i % H)) for i in perm], [n], known)[0].loss)
            if n not in ends:
                tick()
        random.append(curve)
    return LossStudy(
        gradient,
        at,
        [s.loss for s in scores],
        [lo for _, lo, _ in intervals],
        [hi for _, _, hi in intervals],
        random,
        SEEDS,
        len(rank),
        len(next_token.texts()),
    )
