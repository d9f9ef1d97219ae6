"""The lesson's steps, in order: one table, so adding or reordering a step touches one place.

Each Step is a unit: its key (ui/lesson_steps.py draws it by that key), title, opening paragraph,
its line in the recap, and its questions. The answers are computed in mha/lesson/answers.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mha.lesson import structure_words
from mha.models.traits import Traits


def _sentence(words: str) -> str:
    """Words as a sentence's start: the first letter a capital, the rest as written."""
    return words[:1].upper() + words[1:]


@dataclass(frozen=True)
class Shape:
    """What a step's opening may quote: the sentence's T tokens and the model's traits (C = d_model,
    H heads, L layers, G K/V groups, its name)."""

    T: int
    traits: Traits

    @property
    def C(self) -> int:
        return self.traits.d_model

    @property
    def H(self) -> int:
        return self.traits.n_heads

    @property
    def L(self) -> int:
        return self.traits.n_layers

    @property
    def G(self) -> int:
        return self.traits.kv_groups

    @property
    def D(self) -> int:
        """d_k: the model's head size (d_model / h unless the model sets its own)."""
        return self.traits.d_head

    @property
    def model(self) -> str:
        return self.traits.name


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
            r"Multi-head attention runs $h$ heads side by side in three stages. **Project**: "
            + (
                r"each head $i$ has its own $W_i^Q, W_i^K, W_i^V$ of size $d_{model} \times d_k$, with "
                + f"${structure_words.d_k_tex(s.traits)}$: "
                + r"$Q_i = X W_i^Q,\ K_i = X W_i^K,\ V_i = X W_i^V$. "
                if not s.traits.grouped
                else r"each head $i$ has its own $W_i^Q$ of size $d_{model} \times d_k$, with "
                + f"${structure_words.d_k_tex(s.traits)}$, and reads its K/V projections $W^K, W^V$ "
                + ("(one for every head)" if s.G == 1 else "(one per group of heads)")
                + r": $Q_i = X W_i^Q,\ K = X W^K,\ V = X W^V$. "
            )
            + r"**Attend**: every head at once, "
            + (
                r"$\mathrm{head}_i = \mathrm{softmax}\big(Q_i K_i^\top "
                if not s.traits.grouped
                else r"$\mathrm{head}_i = \mathrm{softmax}\big(Q_i K^\top "
            )
            + structure_words.scale_tex(s.traits)
            + (
                r"\big) V_i$. "
                if not s.traits.grouped
                else r"\big) V$ (with the one $K$ and $V$). "
                if s.G == 1
                else r"\big) V$ (with its group's $K$ and $V$). "
            )
            + r"**Concatenate and mix**: "
            r"$\mathrm{MultiHead}(X) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\, W^O$. "
            f"Here $d_{{model}} = {s.C}$, $h = {s.H}$ and your sentence has $T = {s.T}$ tokens."
            + (
                f" ({s.model} keeps a $W_i^Q$ per head but all its heads read one $W^K$ and one $W^V$ (multi-query "
                "attention): step 6 comes back to this.)"
                if s.traits.kv_groups == 1 < s.H
                else f" ({s.model} keeps a $W_i^Q$ per head but shares $W^K$ and $W^V$ within {s.G} groups of "
                f"{s.traits.group_size} heads: step 6 comes back to this.)"
                if s.traits.grouped
                else ""
            )
            + (f" {_sentence(structure_words.reads(s.traits, s.T))}." if s.traits.causal else "")
        ),
        "Three stages: project per head ($T \\times d_{model} \\to T \\times d_k$), attend in parallel, "
        "concatenate and mix with $W^O$.",
        {"q": "the shape of one head's Q_i"},
    ),
    Step(
        "two-heads",
        "Do two heads see a sentence alike?",
        lambda s: (
            (
                r"Every head $i$ multiplies the same token vectors by its $W_i^Q$ and $W_i^K$: queries and keys in a "
                if not s.traits.grouped
                else r"Every head $i$ multiplies the same token vectors by its own $W_i^Q$ and by the one $W^K$ all "
                f"{s.H} heads read (multi-query attention): queries and keys in a "
                if s.traits.kv_groups == 1
                else r"Every head $i$ multiplies the same token vectors by its own $W_i^Q$ and by its group's $W^K$ "
                f"({s.model} shares $W^K$ within groups of {s.traits.group_size} heads): queries and keys in a "
            )
            + r"$d_k$-dimensional space, where the dot product $q \cdot k$ decides who reads whom. Pick two heads of "
            "one layer and predict; then each head's space is drawn in 2-D (queries ●, keys ◇; the picture keeps as "
            "much of the head's scores as two dimensions can)."
        ),
        lambda s: (
            "Each head's own $W_i^Q, W_i^K$ map the tokens into its own subspace: different heads, different pictures."
            if not s.traits.grouped
            else f"Each head's own $W_i^Q$ and the one $W^K$ all {s.H} heads read map the tokens into its own "
            "subspace: heads differ because their $W_i^Q$ differ."
            if s.traits.kv_groups == 1
            else f"Each head's own $W_i^Q$ and its group's $W^K$ (shared within groups of {s.traits.group_size}) map "
            "the tokens into its own subspace: heads differ, even within a group, because their $W_i^Q$ differ."
        ),
        {"sub": "do two heads send a token to the same key?"},
    ),
    Step(
        "concat",
        "Concatenate, then mix",
        lambda s: (
            r"Each head returns a $T \times d_k$ matrix. The $h$ of them are joined side by side ($T \times h d_k$"
            + (
                ""
                if s.traits.heads_width == s.traits.d_model
                else f", here {s.H} x {s.traits.d_head} = {s.traits.heads_width} columns, not $d_{{model}}$ = "
                f"{s.traits.d_model}"
            )
            + r") and multiplied by $W^O$ ($h d_k \times d_{model}$): every output dimension is a weighted sum over "
            "**every** head's dimensions, so the next layer gets one representation informed by all heads."
        ),
        lambda s: (
            "Concatenating gives $T \\times h d_k$"
            + (
                " $= T \\times d_{model}$"
                if s.traits.heads_width == s.traits.d_model
                else f" ({s.traits.heads_width} columns, not $d_{{model}}$ = {s.traits.d_model})"
            )
            + ", and $W^O$ maps it to $d_{model}$, mixing every head into every output dimension."
        ),
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
                if s.traits.parking == "first"
                else "[CLS] or [SEP], and heads that follow syntax; "
            )
            + "Kovaleva et al. 2019 sorted their patterns into vertical, "
            "diagonal and block shapes. This step is an exercise in reading a chart: below, every head coloured by how "
            "much it reads the previous token."
        ),
        lambda s: (
            "Heads learn different jobs: the previous token, parking on "
            + ("the first token" if s.traits.parking == "first" else "/".join(s.traits.special_tokens))
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
                f" Models like {s.model} share only K and V, "
                + ("one for every head" if s.G == 1 else f"in {s.G} groups")
                + ", and never Q: their heads still differ."
                if s.traits.grouped
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
                if s.traits.positions == "rotary"
                else "(positions already added) in another order, its input's rows shuffled: what do its outputs do? "
                "Predict first."
            )
        ),
        lambda s: (
            "Attention alone does not see word order: shuffled rows would only permute its outputs. "
            + f"{s.model} sees the order inside the layer ("
            + " and ".join(
                (["a causal mask"] if s.traits.causal else [])
                + (["rotary positions in $q \\cdot k$"] if s.traits.positions == "rotary" else [])
            )
            + "), so its outputs change."
            if s.traits.order_inside
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


KEYS = tuple(s.key for s in STEPS)  # a step is named by its key wherever it is stored or linked, never by position


def number(key: str) -> int:
    """The step's place in the lesson, from 1 (for a page's words: "Step 3 of 8")."""
    return KEYS.index(key) + 1


def step_of(value: object) -> str | None:
    """The key of the step `value` names: a key, or an old link's or class's position ("7", 7:
    the step at that place when steps were numbered: LEGACY_ORDER); None for anything else."""
    if isinstance(value, str) and value in KEYS:
        return value
    text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    if text.isascii() and text.isdigit() and 1 <= int(text) <= len(LEGACY_ORDER):
        return LEGACY_ORDER[int(text) - 1]
    return None


LEGACY_ORDER = ("one-query", "stages", "two-heads", "concat", "jobs", "sharing", "order", "recap")  # frozen


QUESTIONS = {  # the score's records (ui.quiz.record_id): "<step key>:<name>" -> what was asked
    f"{s.key}:{name}": f"Step {n}{'' if text.startswith('(') else ':'} {text}"
    for n, s in enumerate(STEPS, 1)
    for name, text in s.questions.items()
}
