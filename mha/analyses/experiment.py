"""Why one head is not enough, by experiment: a task that needs several relations at once.

Task: sequences of T random tokens from a vocabulary of V. At every position t the model must
output, through one linear read-out per relation, the tokens at fixed relations: 1, 2 and 3
positions back, and the first token of the sequence. Each relation needs its own attention
pattern, and one attention distribution per token can only return a weighted *average* of the
tokens it reads, so a single head cannot serve them all (lesson point 1).

Five models of the same width C, trained alike (same seed, data, optimiser and steps, and
the same initial embeddings and read-out; only the attention layer differs):
- distinct: H heads of d_k = C / H, each with its own W_i^Q, W_i^K, W_i^V;
- grouped: H heads with their own W_i^Q, sharing K and V in 2 groups (Ainslie et al. 2023);
- mqa: H heads with their own W_i^Q and one K and V for all (Shazeer 2019);
- shared: H heads that all use one W^Q, W^K, W^V (the lesson's "simplification");
- single: one head of full width (H = 1, d_k = C).
Each is token + learned position embeddings -> one attention layer -> read-outs (no residual,
no feed-forward: what a position knows comes only through attention).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from mha.core.attention import MultiHeadAttention, valid_head_counts

RELATIONS = {  # name -> how to find the target position from position t
    "1 back": lambda t: t - 1,
    "2 back": lambda t: t - 2,
    "3 back": lambda t: t - 3,
    "first": lambda t: t * 0,
}
MODELS = ("distinct", "grouped", "mqa", "shared", "single")
GROUPS = 2  # K/V groups of the "grouped" model (at most the number of heads)
SOLVED = 0.99  # all-targets accuracy at which a model counts as solved ...
SOLVED_STEPS = 25  # ... for this many consecutive steps (then it stops early)


@dataclass(frozen=True)
class Settings:
    """One experiment. Bounds keep it under a minute on a laptop CPU."""

    n_relations: int = 4
    n_heads: int = 4
    steps: int = 1000
    seed: int = 0
    vocab: int = 16
    length: int = 12
    d_model: int = 32
    batch: int = 256
    lr: float = 3e-3

    def validate(self) -> None:
        if not 1 <= self.n_relations <= len(RELATIONS):
            raise ValueError(f"n_relations must be in 1..{len(RELATIONS)}, got {self.n_relations}")
        if self.n_heads < 1 or self.d_model % self.n_heads:
            raise ValueError(f"n_heads must divide d_model={self.d_model}; valid: {valid_head_counts(self.d_model)}")
        if not 1 <= self.steps <= 5000:
            raise ValueError(f"steps must be in 1..5000, got {self.steps}")
        if self.length <= len(RELATIONS):
            raise ValueError(f"length must exceed {len(RELATIONS)}")

    @property
    def relations(self) -> list[str]:
        return list(RELATIONS)[: self.n_relations]


def target_positions(relation: str, length: int) -> list[int]:
    """For each position t, where relation's target sits (-1 where there is none)."""
    src = RELATIONS[relation](torch.arange(length))
    return [int(p) if p >= 0 else -1 for p in src]


def targets(tokens: torch.Tensor, relations: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """tokens (B, T) -> (targets (B, T, R), valid (T,) bool: positions where every target exists)."""
    T = tokens.shape[1]
    pos = torch.arange(T)
    cols, valid = [], torch.ones(T, dtype=torch.bool)
    for name in relations:
        src = RELATIONS[name](pos)  # (T,)
        valid &= src >= 0
        cols.append(tokens[:, src.clamp(min=0)])  # (B, T)
    return torch.stack(cols, dim=-1), valid  # (B, T, R), (T,)


class TinyAttentionModel(nn.Module):
    """Token + position embeddings -> one MultiHeadAttention -> one linear read-out per relation."""

    def __init__(self, s: Settings, kind: str) -> None:
        super().__init__()
        if kind not in MODELS:
            raise ValueError(f"kind must be one of {MODELS}, got {kind!r}")
        self.kind = kind
        self.tok = nn.Embedding(s.vocab, s.d_model)
        self.pos = nn.Embedding(s.length, s.d_model)
        heads = 1 if kind == "single" else s.n_heads
        kv = {"grouped": min(GROUPS, heads), "mqa": 1, "shared": 1}.get(kind, heads)
        self.attn = MultiHeadAttention(s.d_model, heads, (1 if kind == "shared" else heads, kv, kv))
        self.readout = nn.Linear(s.d_model, s.vocab * s.n_relations)
        self.n_relations, self.vocab = s.n_relations, s.vocab

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """tokens (B, T) -> (logits (B, T, R, V), attention weights (B, H, T, T))."""
        B, T = tokens.shape
        x = self.tok(tokens) + self.pos(torch.arange(T))  # (B, T, C)
        y, w = self.attn(x)  # (B, T, C), (B, H, T, T)
        logits = self.readout(y).view(B, T, self.n_relations, self.vocab)  # (B, T, R, V)
        return logits, w


def accuracy(logits: torch.Tensor, target: torch.Tensor, valid: torch.Tensor) -> tuple[float, float]:
    """(all-targets accuracy: share of valid positions with every target right,
    per-target accuracy: share of single targets right)."""
    right = (logits.argmax(-1) == target)[:, valid]  # (B, T_valid, R)
    return right.all(-1).float().mean().item(), right.float().mean().item()


@dataclass
class ModelResult:
    """One trained model: curves, final held-out accuracy, size, time, attention on an example."""

    kind: str
    n_heads: int = 1
    d_head: int = 1
    losses: list[float] = field(default_factory=list)
    accuracies: list[float] = field(default_factory=list)  # all-targets accuracy per step
    final_accuracy: float = 0.0  # all targets right, held-out batch
    final_target_accuracy: float = 0.0  # single targets right, held-out batch
    parameters: int = 0
    seconds: float = 0.0
    steps_run: int = 0
    example_attention: np.ndarray | None = None  # (H, T, T) on the example sequence


@dataclass
class ExperimentResult:
    settings: Settings
    models: dict[str, ModelResult]
    example: list[int]  # the example sequence the attention maps are drawn for


def initial_models(s: Settings) -> dict[str, TinyAttentionModel]:
    """The models of MODELS before training, in train mode: each drawn from the seed, then given the
    distinct model's embeddings and read-out, so that only the attention layer differs."""
    models = {}
    for kind in MODELS:
        torch.manual_seed(s.seed)
        models[kind] = TinyAttentionModel(s, kind).train()
    first = models[MODELS[0]]
    for model in models.values():
        for part in ("tok", "pos", "readout"):
            getattr(model, part).load_state_dict(getattr(first, part).state_dict())
    return models


@dataclass
class Progress:
    """One live update: steps done so far, the models still training, and every curve so far.

    curves: {kind: (losses, all-targets accuracies)}, one value per step each; the lists keep
    growing after the call (draw them, don't keep them).
    """

    step: int
    steps: int
    training: list[str]
    curves: dict[str, tuple[list[float], list[float]]]

    @property
    def fraction(self) -> float:
        return self.step / self.steps


def run(
    s: Settings, progress: Callable[[Progress], None] | None = None, every: float = 0.0, early_stop: bool = True
) -> ExperimentResult:
    """Train the models of MODELS side by side (interleaved steps, same batches) and evaluate them.

    progress(Progress) is called after the first step, then at most once per `every` seconds
    (every step for 0), and after the last step. Deterministic for a given Settings.
    """
    s.validate()
    models = initial_models(s)
    opts, results, streak = {}, {}, {}
    for kind in MODELS:
        opts[kind] = torch.optim.Adam(models[kind].parameters(), lr=s.lr)
        attn = models[kind].attn
        results[kind] = ModelResult(
            kind, attn.n_heads, attn.d_head, parameters=sum(p.numel() for p in models[kind].parameters())
        )
        streak[kind] = 0
    curves = {kind: (r.losses, r.accuracies) for kind, r in results.items()}
    data = torch.Generator().manual_seed(s.seed + 1)
    active, last_report = list(MODELS), -math.inf
    for step in range(s.steps):
        tokens = torch.randint(0, s.vocab, (s.batch, s.length), generator=data)  # (B, T)
        target, valid = targets(tokens, s.relations)
        for kind in active:
            t0 = time.perf_counter()
            logits, _ = models[kind](tokens)
            loss = nn.functional.cross_entropy(logits[:, valid].reshape(-1, s.vocab), target[:, valid].reshape(-1))
            opts[kind].zero_grad(set_to_none=True)
            loss.backward()
            opts[kind].step()
            acc, _ = accuracy(logits.detach(), target, valid)
            r = results[kind]
            r.seconds += time.perf_counter() - t0
            r.losses.append(loss.item())
            r.accuracies.append(acc)
            r.steps_run = step + 1
            streak[kind] = streak[kind] + 1 if acc >= SOLVED else 0
        training = list(active)
        if early_stop:
            active = [k for k in active if streak[k] < SOLVED_STEPS]
        now = time.perf_counter()
        last = not active or step + 1 == s.steps
        if progress is not None and (now - last_report >= every or last):
            last_report = now
            progress(Progress(step + 1, s.steps, training, curves))
        if not active:
            break
    held_out = torch.Generator().manual_seed(s.seed + 2)
    tokens = torch.randint(0, s.vocab, (2048, s.length), generator=held_out)
    target, valid = targets(tokens, s.relations)
    example = tokens[:1]
    with torch.no_grad():
        for kind, model in models.items():
            model.eval()
            logits, _ = model(tokens)
            results[kind].final_accuracy, results[kind].final_target_accuracy = accuracy(logits, target, valid)
            results[kind].example_attention = model(example)[1][0].numpy()  # (H, T, T)
    return ExperimentResult(s, results, example[0].tolist())


LOCKED = 0.5  # a head "locks onto" a relation when it puts at least half its weight on that target


def head_relations(attention: np.ndarray, relations: list[str]) -> list[tuple[str, float]]:
    """For each head of (H, T, T) attention on one sequence: the relation whose target it reads
    most (the mean, over the positions where that target exists, of the weight on it) and that weight."""
    H, T, _ = attention.shape
    out = []
    for h in range(H):
        reads = {}
        for name in relations:
            where = [(t, p) for t, p in enumerate(target_positions(name, T)) if p >= 0]
            reads[name] = float(np.mean([attention[h, t, p] for t, p in where]))
        best = max(reads, key=reads.get)
        out.append((best, reads[best]))
    return out


def chance_all_targets(s: Settings) -> float:
    """All-targets accuracy of guessing: (1/V)^R."""
    return math.pow(1.0 / s.vocab, s.n_relations)
