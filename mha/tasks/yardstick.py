"""What "the task" is for each model family, in words and direction: BERT's sentence similarity
(mha/tasks/similarity.py, Spearman's rho, higher is better) or a decoder's next-token prediction
(mha/tasks/next_token.py, nats per token, lower is better). Pages word a task's score from here."""

from __future__ import annotations

from dataclasses import dataclass

from mha.models.traits import Traits


@dataclass(frozen=True)
class Yardstick:
    """name: the score's name with its set; short: a column heading; higher_is_better; items: what
    a bootstrap resamples; what: the task in one clause; digits: decimals to show."""

    name: str
    short: str
    higher_is_better: bool
    items: str
    what: str
    digits: int = 3

    def fmt(self, value: float) -> str:
        return f"{value:.{self.digits}f}"

    def verdict(self, low: float, high: float) -> int:
        """+1 if a change whose interval is [low, high] is surely better, -1 surely worse, 0 neither."""
        if low <= 0 <= high:
            return 0
        return 1 if (low > 0) == self.higher_is_better else -1


SIMILARITY = Yardstick(
    "Spearman on the written pairs",
    "Spearman",
    True,
    "pairs",
    "rank the bundled sentence pairs by similarity (Spearman's rho against graded similarity)",
)
NEXT_TOKEN = Yardstick(
    "next-token loss (nats per token)",
    "loss (nats)",
    False,
    "sentences",
    "predict each next token of 64 human-written sentences: the first 64 distinct sentences of the STS "
    "Benchmark's dev split, in the order of the shipped file (mha/data/sts_pairs.tsv), that are not also in its "
    "train split, each read alone (mean cross-entropy in nats per token; exp of it is the perplexity; lower is "
    "better; a short sentence's first tokens have little to go on, so the loss runs higher than on long "
    "documents; the sentences are a download below)",
)


def of(traits: Traits) -> Yardstick:
    """The yardstick of a model's own task (Traits.task)."""
    return NEXT_TOKEN if traits.task == "next-token" else SIMILARITY
