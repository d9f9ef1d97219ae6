"""The lesson's steps, in order: one table, so adding or reordering a step touches one place.

Each Step is a unit: its key (ui/lesson_steps.py draws it by that key), title, opening paragraph,
its line in the recap, and its questions. The answers are computed in mha/lesson/answers.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Shape:
    """What a step's opening may quote: T tokens, C = d_model, H heads, L layers, the model's name,
    its family ("encoder" or "decoder") and its K/V groups G (H unless K and V come in groups)."""

    T: int
    C: int
    H: int
    L: int
    model: str
    family: str = "encoder"
    G: int | None = None

    @property
    def causal(self) -> bool:
        return self.family == "decoder"

    @property
    def D(self) -> int:
        """d_k = d_model / h."""
        return self.C // self.H


@dataclass(frozen=True)
class Step:
    """One step of the lesson: `key` names its drawing on the page (ui/lesson_steps.py), `title`
    heads it, `intro` opens it (text, or text made from the model's and the sentence's Shape),
    `point` is its line in the recap (text, or made from the Shape; None for the recap itself), and
    `questions` maps each question's name to what the score table says was asked."""

    key: str
    title: str
    intro: str | Callable[[Shape], str]
    point: str | Callable[[Shape], str] | None
    questions: dict[str, str] = field(default_factory=dict)

    def opening(self, shape: Shape) -> str:
        """The step's first paragraph for this model and sentence."""
        return self.intro if isinstance(self.intro, str) else self.intro(shape)

    def line(self, shape: Shape) -> str | None:
        """The step's line in the recap for this model."""
        return self.point if self.point is None or isinstance(self.point, str) else self.point(shape)


STEPS = (
    Step(
        "one-query",
        "One head must average",
        lambda s: (
            r"A head gives every token $i$ **one** set of weights over the sentence, "
            r"$\alpha_{ij} = \mathrm{softmax}_j\big(q_i \cdot k_j / \sqrt{d_k}\big)$, which sums to 1, and hands back "
            r"**one** weighted average $\sum_j \alpha_{ij} v_j$. Follow one token of your sentence through the "
            f"{s.L * s.H} heads of {s.model} ({s.L} layers x {s.H} heads) and see where each sends it."
        ),
        "A head gives each token one distribution that sums to 1, so one head cannot send a token everywhere it "
        "needs to look: several heads can.",
        {"spread": "to how many words do the heads send one token?"},
    ),
    Step(
        "stages",
        "Three stages, real shapes",
        lambda s: (
            r"Multi-head attention runs $h$ heads side by side in three stages. **Project**: each head $i$ has its own "
            r"$W_i^Q, W_i^K, W_i^V$ of size $d_{model} \times d_k$, with $d_k = d_{model}/h$: "
            r"$Q_i = X W_i^Q,\ K_i = X W_i^K,\ V_i = X W_i^V$. **Attend**: every head at once, "
            r"$\mathrm{head}_i = \mathrm{softmax}\big(Q_i K_i^\top / \sqrt{d_k}\big) V_i$. **Concatenate and mix**: "
            r"$\mathrm{MultiHead}(X) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\, W^O$. "
            f"Here $d_{{model}} = {s.C}$, $h = {s.H}$ and your sentence has $T = {s.T}$ tokens."
            + (
                f" ({s.model} keeps a $W_i^Q$ per head but shares $W^K$ and $W^V$ within {s.G} groups of "
                f"{s.H // s.G} heads, and each token reads only the tokens before it: step 6 comes back to this.)"
                if s.G is not None and s.G < s.H
                else ""
            )
        ),
        "Three stages: project per head ($T \\times d_{model} \\to T \\times d_k$), attend in parallel, "
        "concatenate and mix with $W^O$.",
        {"q": "the shape of one head's Q_i"},
    ),
    Step(
        "two-heads",
        "Do two heads see a sentence alike?",
        (
            r"Every head $i$ multiplies the same token vectors by its $W_i^Q$ and $W_i^K$: queries and keys in a "
            r"$d_k$-dimensional space, where the dot product $q \cdot k$ decides who reads whom. Pick two heads of "
            "one layer and predict; then each head's space is drawn in 2-D (queries ●, keys ◇; the picture keeps as "
            "much of the head's scores as two dimensions can)."
        ),
        "Each head's own $W_i^Q, W_i^K$ map the tokens into its own subspace: different heads, different pictures.",
        {"sub": "do two heads see the sentence alike?"},
    ),
    Step(
        "concat",
        "Concatenate, then mix",
        (
            r"Each head returns a $T \times d_k$ matrix. The $h$ of them are joined side by side and multiplied by "
            r"$W^O$ ($d_{model} \times d_{model}$): every output dimension is a weighted sum over **every** head's "
            "dimensions, so the next layer gets one representation informed by all heads."
        ),
        "Concatenating gives $T \\times h d_k = T \\times d_{model}$, and $W^O$ mixes every head into every "
        "output dimension.",
        {"out": "the output's shape with another number of heads"},
    ),
    Step(
        "jobs",
        "What heads learn",
        lambda s: (
            "Heads learn whatever helps the task; we can only look and build intuition. Clark et al. 2019 (*What Does "
            "BERT Look At?*) found heads that read the previous or the next token, heads that park their attention on "
            + (
                "special tokens, and heads that follow syntax; in decoders like this one many heads park on the first "
                "token instead (Xiao et al. 2024, *attention sinks*). "
                if s.causal
                else "[CLS] or [SEP], and heads that follow syntax; "
            )
            + "Kovaleva et al. 2019 sorted their patterns into vertical, "
            "diagonal and block shapes. This step is an exercise in reading a chart: below, every head coloured by how "
            "much it reads the previous token."
        ),
        lambda s: (
            "Heads learn different jobs: the previous token, parking on "
            + ("the first token" if s.causal else "[CLS]/[SEP]")
            + ", syntax (Clark et al. 2019)."
        ),
        {"prev": "(reading the chart): which head reads the previous token most?"},
    ),
    Step(
        "sharing",
        "The check question: share Q, K and V?",
        (
            r"Someone proposes to save parameters by giving every head the **same** $W^Q, W^K, W^V$. "
            "Predict first, then try it on a real layer."
        ),
        lambda s: (
            "Share $W^Q, W^K, W^V$ and every head computes the same attention: the subspaces collapse into one."
            + (
                f" Models like {s.model} share only K and V, in {s.G} groups, and never Q: their heads still differ."
                if s.G is not None and s.G < s.H
                else ""
            )
        ),
        {
            "predict": "what sharing W^Q, W^K, W^V does (your prediction)",
            "roles": "which two shared projections make the heads identical?",
        },
    ),
    Step(
        "order",
        "Next lesson: word order",
        lambda s: (
            r"Attention compares every token with every other, $q_i \cdot k_j$. Feed a layer the same token vectors "
            + (
                "in another order, its input's rows shuffled (this model has no position vector added to them: its "
                "positions enter inside the layer): what do its outputs do? Predict first."
                if s.causal
                else "(positions already added) in another order, its input's rows shuffled: what do its outputs do? "
                "Predict first."
            )
        ),
        lambda s: (
            "Attention alone does not see word order: shuffled rows would only permute its outputs. A decoder puts "
            "positions inside the layer (a causal mask, rotary positions in $q \\cdot k$), so its outputs change."
            if s.causal
            else "Attention alone does not see word order: shuffled words only permute the outputs, so positions are "
            "added."
        ),
        {"shuffle": "what shuffling the words does to the outputs"},
    ),
    Step(
        "recap",
        "Recap: the check question, answered",
        lambda s: "**The seven points**\n\n" + "\n".join(f"{n}. {p}" for n, p in enumerate(points(s), 1)),
        None,
    ),
)


def points(shape: Shape) -> tuple[str, ...]:
    """The recap's lines for this model (every step's but the recap's)."""
    return tuple(p for p in (s.line(shape) for s in STEPS) if p is not None)


POINTS = points(Shape(0, 1, 1, 1, "BERT"))  # the lines for BERT
QUESTIONS = {  # the score's records (ui.quiz.record_id): "<step>-<name>" -> what was asked
    f"{n}-{name}": f"Step {n}{'' if text.startswith('(') else ':'} {text}"
    for n, s in enumerate(STEPS, 1)
    for name, text in s.questions.items()
}
