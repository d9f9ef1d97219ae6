"""A short layer-wise uptraining: fit a converted attention layer (its Q/K/V/O, under its own
structure) to reproduce the original layer's output, on sentences generated from templates.

Ainslie et al. 2023 ("GQA: Training Generalized Multi-Query Transformer Models from Multi-Head
Checkpoints") continue pre-training a converted model on 5 % of its data; here one layer is
fitted to the original layer's output instead. A shared projection is one parameter, so it
stays shared while it trains.
Shapes: N sentences, T tokens, C = d_model.
"""

from __future__ import annotations

import copy
import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from mha.core.attention import MultiHeadAttention


@dataclass
class UptrainProgress:
    """One live update of uptrain: steps done, the loss of the last batch."""

    step: int
    steps: int
    loss: float

    @property
    def fraction(self) -> float:
        return self.step / self.steps


@dataclass
class UptrainResult:
    """The fitted layer and how close it is to the original: relative MSE of the attention
    sub-layer's output, ||f(x) - f_orig(x)||^2 / ||f_orig(x)||^2 over the real tokens of every
    input sentence, before and after, and the loss per step."""

    module: MultiHeadAttention
    before: float
    after: float
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def seconds_per_step(self) -> float:
        return self.seconds / len(self.losses) if self.losses else math.nan


def seconds_per_step(fits: list[UptrainResult]) -> float | None:
    """The median time per step over earlier fits (None without one): what a new run will take."""
    rates = [f.seconds_per_step for f in fits if f.losses]
    return statistics.median(rates) if rates else None


def relative_mse(module: MultiHeadAttention, target: torch.Tensor, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """||module(x) - target||^2 / ||target||^2 over the real tokens (mask (N, T) = 1)."""
    out, _ = module(x, mask)  # (N, T, C)
    keep = mask[..., None].to(out.dtype)  # (N, T, 1)
    return ((out - target) ** 2 * keep).sum() / ((target**2) * keep).sum()


UPTRAIN_LR, UPTRAIN_BATCH = 3e-3, 32  # Adam's learning rate (cosine decay to 0) and sentences per step


def uptrain(
    original: MultiHeadAttention,
    converted: MultiHeadAttention,
    inputs: tuple[torch.Tensor, torch.Tensor],
    steps: int = 1000,
    progress: Callable[[UptrainProgress], None] | None = None,
    seed: int = 0,
    lr: float = UPTRAIN_LR,
    batch: int = UPTRAIN_BATCH,
    every: float = 0.25,
) -> UptrainResult:
    """Fit a copy of `converted` (its Q/K/V/O, under its own sharing) to reproduce `original`'s
    attention output on inputs = (x (N, T, C), mask (N, T)): Adam, lr with cosine decay to 0,
    `steps` batches of `batch` sentences drawn with `seed`. Deterministic for a seed.

    progress(UptrainProgress) is called after the first step, then at most every `every`
    seconds, and after the last step.
    """
    if not 1 <= steps <= 20_000:
        raise ValueError(f"steps must be in 1..20000, got {steps}")
    x, mask = inputs
    t0 = time.perf_counter()
    with torch.inference_mode(False):
        x, mask = x.clone(), mask.clone()
        with torch.no_grad():
            target = original(x, mask)[0]  # (N, T, C)
        m = copy.deepcopy(converted).train().requires_grad_(True)
        with torch.no_grad():
            before = float(relative_mse(m, target, x, mask))
        opt = torch.optim.Adam(m.parameters(), lr=lr)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
        draw = torch.Generator().manual_seed(seed)
        losses, last = [], -math.inf
        for step in range(steps):
            idx = torch.randint(0, x.shape[0], (batch,), generator=draw)
            loss = relative_mse(m, target[idx], x[idx], mask[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            schedule.step()
            losses.append(loss.item())
            now = time.perf_counter()
            if progress is not None and (now - last >= every or step + 1 == steps):
                last = now
                progress(UptrainProgress(step + 1, steps, losses[-1]))
        m.eval().requires_grad_(False)
        with torch.no_grad():
            after = float(relative_mse(m, target, x, mask))
    return UptrainResult(m, before, after, losses, time.perf_counter() - t0)


# ---------------------------------------------------------------- sentences to fit on

_SUBJECTS = [
    "the cat",
    "a young doctor",
    "my neighbour",
    "the committee",
    "two students",
    "the old man",
    "her sister",
    "the pilot",
    "our team",
    "a small dog",
    "the teacher",
    "they",
    "she",
    "he",
    "the company",
    "the children",
    "a stranger",
    "the river",
    "the engine",
    "my grandfather",
]
_VERBS = [
    "saw",
    "found",
    "built",
    "painted",
    "sold",
    "bought",
    "opened",
    "closed",
    "followed",
    "visited",
    "ignored",
    "repaired",
    "carried",
    "described",
    "remembered",
    "watched",
    "borrowed",
    "cleaned",
]
_OBJECTS = [
    "the letter",
    "a red car",
    "the house",
    "an old map",
    "the window",
    "a new plan",
    "the bridge",
    "the garden",
    "a heavy box",
    "the last train",
    "the small boat",
    "a strange noise",
    "the book",
    "the broken clock",
    "a cup of tea",
    "the report",
    "the door",
    "a blue kite",
]
_PLACES = [
    "in the morning",
    "near the station",
    "after lunch",
    "during the storm",
    "in Paris",
    "at school",
    "on Tuesday",
    "under the bridge",
    "before dinner",
    "in the garden",
    "last year",
    "at night",
]
_FRAMES = [
    "{S} {V} {O} {P}.",
    "{S} {V} {O}.",
    "Why {did} {s} {v} {O}?",
    "{S} did not {v} {O} {P}.",
    "{P_cap}, {s} {V} {O}.",
    "{S} {V} {O} and {O2}.",
    "{S} {V} {O}, but {s2} {V2} {O2}.",
    "Did {s} {v} {O} {P}?",
    "{S} {V} {n} boxes {P}.",
    "{S} said that {s2} {V2} {O2}.",
]
_BASE = {
    "saw": "see",
    "found": "find",
    "built": "build",
    "painted": "paint",
    "sold": "sell",
    "bought": "buy",
    "opened": "open",
    "closed": "close",
    "followed": "follow",
    "visited": "visit",
    "ignored": "ignore",
    "repaired": "repair",
    "carried": "carry",
    "described": "describe",
    "remembered": "remember",
    "watched": "watch",
    "borrowed": "borrow",
    "cleaned": "clean",
}


def generated_sentences(n: int = 1000, seed: int = 0) -> list[str]:
    """n varied English sentences from templates (statements, questions, negation, clauses,
    numbers), deterministic for a seed: the data a layer is uptrained on."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        s, s2 = rng.choice(_SUBJECTS), rng.choice(_SUBJECTS)
        v, v2 = rng.choice(_VERBS), rng.choice(_VERBS)
        p = rng.choice(_PLACES)
        text = rng.choice(_FRAMES).format(
            S=s[0].upper() + s[1:],
            s=s,
            s2=s2,
            V=v,
            V2=v2,
            v=_BASE[v],
            O=rng.choice(_OBJECTS),
            O2=rng.choice(_OBJECTS),
            P=p,
            P_cap=p[0].upper() + p[1:],
            did="did",
            n=rng.randint(2, 90),
        )
        out.append(text)
    return out
