"""A batch's hidden states kept at some layers, to resume runs there (mha/tasks/similarity.py,
next_token.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

CHECKPOINT_MB = (
    32.0  # a kept batch's states (similarity.py, next_token.py): every layer's while they fit, else every k-th
)


@dataclass
class Checkpoints:
    """A batch's hidden states entering some layers (every `every`-th, and L: after the last),
    kept to resume a run there instead of from the embeddings: resume(start) gives the nearest
    kept layer at or before `start`, and run_layers from it recomputes at most every - 1 layers,
    with the same operations on the same batch: the same numbers as states kept for every layer.
    `within` keeps every layer's of a small model and every 4th of bert-base's shape on the bundled
    pairs (31 MB instead of 100)."""

    states: dict[int, torch.Tensor]

    @classmethod
    def within(cls, batches: list[list[torch.Tensor]], budget_mb: float | None = None) -> list[Checkpoints]:
        """Checkpoints.of each batch's states, every k-th layer's for the smallest k whose kept states
        of all batches fit budget_mb (default CHECKPOINT_MB) together; k = 1: every layer's."""
        n = len(batches[0])  # L + 1
        per = sum(t.nbytes for b in batches for t in b) / n  # bytes of one layer's states, all batches
        budget = (CHECKPOINT_MB if budget_mb is None else budget_mb) * 2**20
        every = next((k for k in range(1, n) if (len(range(0, n - 1, k)) + 1) * per <= budget), max(1, n - 1))
        return [cls.of(b, every) for b in batches]

    @classmethod
    def of(cls, states: list[torch.Tensor], every: int = 1) -> Checkpoints:
        """From the states entering layers 0..L-1 and the last ones (L + 1 tensors)."""
        last = len(states) - 1
        return cls({i: h for i, h in enumerate(states) if i % every == 0 or i == last})

    def resume(self, start: int) -> tuple[torch.Tensor, int]:
        """(the kept states at the nearest layer k <= start, k): run layers k.. from them."""
        k = max(i for i in self.states if i <= start)
        return self.states[k], k

    @property
    def last(self) -> torch.Tensor:
        return self.states[max(self.states)]
