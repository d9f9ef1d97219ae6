"""The guided lesson's questions, answered by the engine for the learner's own sentence.

Every expected answer is computed from the model on the sentence in front of the learner (not a
fixed key): the head that links two words most, a shape, the previous-token head, which shared
projections make the heads identical. The page asks; these functions say what is right and why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from . import atlas, build, collapse, metrics, subspaces

if TYPE_CHECKING:
    from .bert import BertRun, LoadedBert

STEPS = (
    "One head must average",
    "Three stages, real shapes",
    "Distinct projections, distinct subspaces",
    "Concatenate, then mix",
    "What heads learn",
    "The check question: share Q, K and V?",
    "Next lesson: word order",
)


@dataclass(frozen=True)
class Choice:
    """A multiple-choice question: options, the index of the right one, and why."""

    options: tuple[str, ...]
    answer: int
    why: str


def _head(lh: tuple[int, int]) -> str:
    return f"layer {lh[0]}, head {lh[1]}"


def _word(tokens: list[str], i: int) -> str:
    return f"“{tokens[i]}” ({i})"


@dataclass(frozen=True)
class Relations:
    """Step 1: two relations in the sentence and the heads that carry them.

    meaning, grammar: (query, key) token positions. best_meaning, best_grammar: the strongest
    head for each, with its weight; both: the head whose weaker link of the two is strongest,
    with both its weights.
    """

    meaning: tuple[int, int]
    grammar: tuple[int, int]
    best_meaning: tuple[int, int, float]
    best_grammar: tuple[int, int, float]
    both: tuple[int, int, float, float]


def _pair(tokens: list[str], query: str, keys: tuple[str, ...]) -> tuple[int, int] | None:
    low = [t.lower() for t in tokens]
    if query not in low:
        return None
    q = low.index(query)
    found = [low.index(k) for k in keys if k in low and low.index(k) != q]
    return (q, found[0]) if found else None


def relations(run: BertRun) -> Relations:
    """On the lesson's sentence: "mole" -> "arm" (meaning) and "was" -> "mole" (grammar). On any
    other sentence: the last word -> the first word (a long-range link) and the second word ->
    the first (the previous word)."""
    tokens = run.tokens
    words = [i for i, kind in enumerate(subspaces.token_kinds(tokens)) if kind == "word"]
    if len(words) < 2:
        raise ValueError("the sentence needs at least two words for this step")
    meaning = _pair(tokens, "mole", ("arm", "insect")) or (words[-1], words[0])
    grammar = _pair(tokens, "was", ("mole",)) or (words[1], words[0])
    a = run.attentions[:, :, meaning[0], meaning[1]]  # (L, H)
    g = run.attentions[:, :, grammar[0], grammar[1]]
    both = np.minimum(a, g)
    ia, ig, ib = (np.unravel_index(int(np.argmax(x)), x.shape) for x in (a, g, both))
    return Relations(
        meaning,
        grammar,
        (int(ia[0]), int(ia[1]), float(a[ia])),
        (int(ig[0]), int(ig[1]), float(g[ig])),
        (int(ib[0]), int(ib[1]), float(a[ib]), float(g[ib])),
    )


def relation_question(run: BertRun, r: Relations) -> Choice:
    """Which head links the meaning pair most strongly? (options: the right one, the grammar
    pair's best head, the best head for both, and the weakest head for the meaning pair)."""
    a = run.attentions[:, :, r.meaning[0], r.meaning[1]]
    weakest = np.unravel_index(int(np.argmin(a)), a.shape)
    heads = []
    for lh in [r.best_meaning[:2], r.best_grammar[:2], r.both[:2], (int(weakest[0]), int(weakest[1]))]:
        if lh not in heads:
            heads.append(lh)
    order = sorted(range(len(heads)), key=lambda i: (heads[i][0], heads[i][1]))  # by position, not answer
    options = tuple(_head(heads[i]) for i in order)
    q, k = r.meaning
    why = (
        f"{_head(r.best_meaning[:2])} puts {r.best_meaning[2]:.0%} of {_word(run.tokens, q)}'s attention on "
        f"{_word(run.tokens, k)}, more than any of the {a.size} heads. The head best at the other link puts "
        f"{a[r.best_grammar[:2]]:.0%} there, and the best compromise ({_head(r.both[:2])}) manages "
        f"{r.both[2]:.0%} and {r.both[3]:.0%}: one distribution per token cannot serve both links."
    )
    return Choice(options, options.index(_head(r.best_meaning[:2])), why)


def stage_shapes(run: BertRun, bert: LoadedBert) -> dict[str, tuple[int, int]]:
    """Steps 2 and 4: the shapes of X, one head's Q_i, one head's attention, the concatenation
    and the output, for this sentence."""
    T, C, H = run.n_tokens, bert.d_model, bert.n_heads
    D = C // H
    return {"X": (T, C), "Q_i": (T, D), "A_i": (T, T), "head_i": (T, D), "concat": (T, H * D), "output": (T, C)}


def subspace_question(bert: LoadedBert, run: BertRun, layer: int, a: int, b: int) -> Choice:
    """Step 3: do heads a and b draw the sentence the same way? Answered by their pictures."""
    maps = subspaces.layer_maps(bert, run, layer)
    pa = np.concatenate([maps.queries[a], maps.keys[a]])
    pb = np.concatenate([maps.queries[b], maps.keys[b]])
    differ = float(np.abs(pa - pb).max())
    options = ("The same picture: one projection, seen twice", "Different pictures: each head has its own lens")
    why = (
        f"Their points differ by up to {differ:.2f} (fidelity {maps.fidelity[a]:.2f} and {maps.fidelity[b]:.2f}): "
        f"$W_{{{a}}}^Q, W_{{{a}}}^K$ and $W_{{{b}}}^Q, W_{{{b}}}^K$ are different matrices, so the same tokens land "
        "in different places."
    )
    return Choice(options, 1 if differ > 1e-3 else 0, why)


def previous_token_question(run: BertRun) -> tuple[Choice, tuple[int, int], tuple[int, int]]:
    """Step 5: which head reads the previous token most? Also returns that head and the head that
    reads [CLS] and [SEP] most, for the page to show."""
    m = atlas.measures(run)
    prev = m["to previous"]
    special = m["to [CLS]"] + m["to [SEP]"]
    best = tuple(int(i) for i in np.unravel_index(int(np.argmax(prev)), prev.shape))
    vertical = tuple(int(i) for i in np.unravel_index(int(np.argmax(special)), special.shape))
    ranked = [tuple(int(i) for i in np.unravel_index(int(k), prev.shape)) for k in np.argsort(prev, axis=None)]
    others = [ranked[len(ranked) // 2], ranked[0], vertical]  # a middling head, the least, the [CLS]/[SEP] one
    heads = [best] + [h for h in others if h != best]
    heads = list(dict.fromkeys(heads))[:4]
    options = tuple(_head(h) for h in sorted(heads))
    why = (
        f"{_head(best)} puts {prev[best]:.0%} of each token's attention on the token just before it "
        f"(Clark et al. 2019 found such heads in BERT too). {_head(vertical)} sends {special[vertical]:.0%} "
        "to [CLS] and [SEP] instead: a place to park attention when there is nothing to read."
    )
    return Choice(options, options.index(_head(best)), why), best, vertical


PREDICTIONS = (
    "The heads still attend in different ways",
    "Every head computes the same attention",
    "The heads attend more sharply (lower entropy)",
)


def sharing_outcome(before: collapse.LayerCollapse, after: collapse.LayerCollapse) -> dict[str, float]:
    """Step 6: what sharing Q, K and V does to one real layer (collapse_layer at alpha = 0 and at
    alpha = 1): head diversity before and after, the largest difference between heads' maps,
    parameters before and after."""
    return {
        "heads": after.weights.shape[0],
        "diversity before": metrics.mean_off_diagonal(before.diversity),
        "diversity after": metrics.mean_off_diagonal(after.diversity),
        "max difference between heads": float(np.abs(after.weights - after.weights[:1]).max()),
        "parameters before": before.parameters,
        "parameters after": after.parameters,
    }


def prediction_feedback(choice: int, outcome: dict[str, float]) -> tuple[bool, str]:
    """Was the learner's prediction what the layer did?"""
    identical = outcome["max difference between heads"] < collapse.SAME_WEIGHTS
    right = identical and choice == 1
    did = (
        f"the heads' attention now differs by at most {outcome['max difference between heads']:.1e} and the mean "
        f"divergence between heads fell from {outcome['diversity before']:.3f} to {outcome['diversity after']:.1e}"
    )
    if right:
        return True, (
            f"Right: {did}. {outcome['heads']} copies of one head, for {outcome['parameters after']:,} parameters "
            f"instead of {outcome['parameters before']:,}."
        )
    return False, (
        f"Not quite: {did}. With one $W^Q$ and one $W^K$ every head computes the same $Q_i K_i^\\top$, so the same "
        "softmax: the subspaces collapse into one."
    )


ROLE_SETS = (("k", "v"), ("k", "q"), ("v",), ("q",))
ROLE_NAMES = ("K and V", "Q and K", "V only", "Q only")


def which_roles_question(
    bert: LoadedBert,
    run: BertRun,
    layer: int,
    collapse_at: Callable[[collapse.CollapsePath], collapse.LayerCollapse] | None = None,
) -> tuple[Choice, dict[str, float]]:
    """Step 6, deeper: which shared projections make every head attend identically? Each option
    is tried on the real layer (alpha = 1, collapse.DEFAULT_SOURCE), through `collapse_at` if given
    (a page's cached collapse_layer); the right one is the option with the least divergence
    between heads, and it must be below collapse.SAME_TOLERANCE."""
    if collapse_at is None:

        def collapse_at(path: collapse.CollapsePath) -> collapse.LayerCollapse:
            return collapse.collapse_layer(bert, run, layer, path, overlap_roles=())

    div = {
        name: metrics.mean_off_diagonal(collapse_at(collapse.CollapsePath(1.0, roles=roles)).diversity)
        for roles, name in zip(ROLE_SETS, ROLE_NAMES)
    }
    least = min(div, key=div.get)
    if div[least] >= collapse.SAME_TOLERANCE:
        raise ValueError(
            f"no option makes the heads identical within {collapse.SAME_TOLERANCE:.0e} "
            f"(least: {least}, {div[least]:.1e})"
        )
    why = (
        r"Attention is $\mathrm{softmax}(Q_i K_i^\top / \sqrt{d_k})$: it depends on Q and K only. Measured on this "
        "layer, the mean "
        "divergence between heads is "
        + ", ".join(f"{d:.1e} sharing {n}" for n, d in div.items())
        + ". Sharing K and V (multi-query attention) keeps each head's own question."
    )
    return Choice(ROLE_NAMES, ROLE_NAMES.index(least), why), div


def shuffle_question(bert: LoadedBert, run: BertRun, layer: int, seed: int = 1) -> tuple[Choice, float]:
    """Step 7: shuffle the words (no position information): is each token's output the same,
    only reordered? Answered by build_stages' shuffle check on BERT's real layer."""
    s = build.build_stages(bert, run, layer, bert.n_heads, shuffle=True, seed=seed)
    options = ("The same outputs, only in the new order", "Different outputs: attention notices the order")
    why = (
        f"Largest difference after undoing the shuffle: {s.shuffle_error:.1e}. Attention only compares vectors "
        "with each other, so it cannot see where a token stands. BERT adds a learned position embedding to every "
        "token before layer 0 (its hidden states already know the order); the next lesson, positional "
        "encodings, shows how."
    )
    return Choice(options, 0 if s.shuffle_error < build.PERMUTED else 1, why), s.shuffle_error
