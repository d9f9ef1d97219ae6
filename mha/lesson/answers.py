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

from mha.analyses import atlas, build, collapse, metrics, subspaces
from mha.lesson import agreement, check_question, structure_words
from mha.lesson.structure_words import key_of
from mha.plots.common import token_label, token_text

if TYPE_CHECKING:
    from mha.models.family import LoadedModel
    from mha.models.run import Run
    from mha.models.traits import Traits


def small(x: float, tol: float = 1e-5) -> str:
    """A difference for a learner: 0 said as "exactly 0", a tiny one as zero to float precision
    (float32 arithmetic in another order differs by about 1e-7), others to 2 significant digits."""
    if x == 0:
        return "exactly 0"
    if abs(x) < tol:
        return f"{x:.1e}: zero to float precision"
    return f"{x:.2g}"


def differ_words(x: float, what: str = "they") -> str:
    """How much two things differ at most, for a learner: exactly 0 is said as "identical"."""
    if x == 0:
        return f"{what} are identical: they differ by exactly 0"
    return f"{what} differ by at most {small(x)}"


def signed(x: float, digits: int = 3) -> str:
    """A change with its sign, never "-0.000": what rounds to zero is written 0.000."""
    text = f"{x:+.{digits}f}"
    return text[1:] if float(text) == 0 else text


def change_words(change: float, low: float, high: float, digits: int = 3) -> str:
    """A measured change beside its 90% bootstrap interval: a change whose interval spans 0 is
    "no measurable change", whatever its sign (issue: +0.004 shown as a gain inside -0.007 to +0.014)."""
    interval = f"90% interval {signed(low, digits)} to {signed(high, digits)}"
    if low <= 0 <= high:
        return f"no measurable change ({interval})"
    return f"{signed(change, digits)} ({interval})"


def share(x: float) -> str:
    """A share as a percentage that never rounds up to 100% (0.998 -> 99.8%) or down to 0%."""
    if 0.99 < x < 1 or 0 < x < 0.01:
        return f"{x:.1%}"
    return f"{x:.0%}"


def number(x: float) -> str:
    """A measure for a table: counts with thousands separators, others to 4 significant digits."""
    return f"{x:,.0f}" if x == int(x) and abs(x) >= 1000 else f"{x:.4g}"


@dataclass(frozen=True)
class Choice:
    """A multiple-choice question: options, the index of the right one, and why."""

    options: tuple[str, ...]
    answer: int
    why: str


def _head(lh: tuple[int, int]) -> str:
    return f"layer {lh[0]}, head {lh[1]}"


def _word(tokens: list[str], i: int) -> str:
    return f"“{token_text(tokens[i])}” ({i})"


PRONOUNS = ("he", "she", "it", "they", "him", "her", "them", "we", "us", "you", "i", "me")
FUNCTION_WORDS = frozenset(
    "the a an of on in at to by for with from into onto over under about as and or but nor so yet if than "
    "then that this these those there here is am are was were be been being do does did has have had not no "
    "his her its their our your my which who whom whose what when where why how all any some each every "
    "can could will would shall should may might must before after because while although though since until "
    "unless whether once also very just too not".split()
)


def parking_words(run: Run) -> str:
    """The tokens step 1 leaves out, where heads park attention, in words."""
    t = run.traits
    return f"{', '.join(t.special_tokens) if t.parking == 'special' else t.sink_name} and punctuation"


def query_rule(tokens: list[str], traits: Traits) -> tuple[int, str]:
    """Step 1's query token and the rule that chose it: the first personal pronoun (what it refers
    to is a link a head must make), else the first content word (a whole word, not a function
    word); in a causal model, which reads only the tokens before a query, the last of them, so the
    query has the most to read. Raises ValueError if the sentence has neither."""
    causal = traits.causal
    kinds = subspaces.token_kinds(tokens)
    if traits.parking == "first":
        kinds = ["special" if i == 0 else k for i, k in enumerate(kinds)]  # the first token is the sink
    whole = [
        i
        for i, (t, kind) in enumerate(zip(tokens, kinds))
        if kind == "word" and not t.startswith("##") and not (i + 1 < len(tokens) and tokens[i + 1].startswith("##"))
    ]
    order, which = (whole[::-1], "last") if causal else (whole, "first")
    for i in order:
        if tokens[i].strip().lower() in PRONOUNS:
            return i, f"the {which} personal pronoun (he, she, it, they, ...) in your sentence"
    for i in order:
        if tokens[i].strip().lower() not in FUNCTION_WORDS and any(c.isalpha() for c in tokens[i]):
            return i, (
                f"the {which} content word in your sentence (not a function word such as “the” or “was”)"
                + ("; the model is causal, so a later word has more tokens before it to read" if causal else "")
            )
    raise ValueError("the sentence needs a whole word that is not a function word")


def content_token(run: Run) -> int:
    """A token worth following by default: the first content word (query_rule's choice; "mole" in the
    lesson's sentence), else the second token."""
    try:
        return query_rule(run.tokens, run.traits)[0]
    except ValueError:
        return min(1, run.n_tokens - 1)


MOST = 0.5  # "most of a token's weight": more than half of it


@dataclass(frozen=True)
class OneQuery:
    """Step 1: where every head sends one query token's attention.

    top, weight: (L, H) the key each head gives the largest share of the query's weight to, among
    the sentence's words ([CLS], [SEP] and punctuation, where heads park attention, left out), and
    that weight.
    targets: one entry per distinct top key, (key, layer, head, weight) of the head that gives it
    the most, strongest first.
    majority: the same for the words some head gives MOST of the query's weight (more than half).
    parking: (L, H) each head's share of the query's weight on [CLS], [SEP] and punctuation.
    """

    query: int
    top: np.ndarray
    weight: np.ndarray
    targets: tuple[tuple[int, int, int, float], ...]
    majority: tuple[tuple[int, int, int, float], ...] = ()
    parking: np.ndarray | None = None

    @property
    def parked(self) -> int:
        """Heads that give the parking tokens together more than half of the query's weight."""
        return int((self.parking > MOST).sum()) if self.parking is not None else 0

    @property
    def heads_with_a_word(self) -> int:
        """Heads that give one word of the sentence more than half of the query's weight."""
        return int((self.weight > MOST).sum())

    def compare(self, attentions: np.ndarray, k: int = 4, skip: tuple[int, ...] = ()) -> QueryRows:
        """The k strongest targets' heads and the best compromise: the one head whose weakest
        weight on those k keys is largest (its weights on them sum to at most 1). Targets in `skip`
        are left out (step 1 leaves out the token just before the query: which head reads the
        previous token is step 5's question), unless nothing else is left."""
        kept = [t for t in self.targets if t[0] not in skip] or list(self.targets)
        skipped = tuple(key for key in skip if key in {t[0] for t in self.targets} and len(kept) < len(self.targets))
        top = kept[:k]
        keys = [key for key, *_ in top]
        on = attentions[:, :, self.query][:, :, keys]  # (L, H, k)
        layer, head = (int(i) for i in np.unravel_index(int(np.argmax(on.min(-1))), on.shape[:2]))
        heads = [(la, he) for _, la, he, _ in top] + [(layer, head)]
        rows = np.stack([attentions[la, he, self.query] for la, he in heads])  # (k + 1, T)
        weights = tuple(w for *_, w in top)
        return QueryRows(rows, heads, keys, on[layer, head], min(weights), weights, skipped)


@dataclass(frozen=True)
class QueryRows:
    """Step 1's picture: the query's attention row in each target's strongest head, then in the
    best compromise (rows (k + 1, T), heads: (layer, head) per row), the target keys, the
    compromise's weights on them (k,) and the smallest of the specialists' weights."""

    rows: np.ndarray
    heads: list[tuple[int, int]]
    keys: list[int]
    compromise: np.ndarray
    specialist: float
    weights: tuple[float, ...] = ()  # each target's weight in its strongest head
    skipped: tuple[int, ...] = ()  # targets left out of the columns (compare's skip)

    def caption(self, tokens: list[str], parking: str = "[CLS], [SEP] and punctuation") -> str:
        """What the picture shows, from its numbers: how much the best compromise keeps for the
        weakest target against the specialists, or that every head agrees."""
        k = len(self.keys)
        read = (
            "Each column is one head's weights for this token (they sum to 1); colour: a cell's weight, number: the "
            f"same in % (none under 5 %). Left out when finding where a head sends it: {parking}, "
            "where heads park attention (step 5). "
            + "".join(
                f"The token just before it, “{token_text(tokens[t])}” ({t}), is left out of these columns: which head "
                "reads the previous token is step 5's question. "
                for t in self.skipped
            )
        )
        if k < 2:
            return read + (
                "Among the words, every head gives its largest share of this token's weight to the same word: here "
                "the heads agree. Pick another token."
            )
        labels = [token_label(tokens[t]) for t in self.keys]
        # a word met twice in the sentence is two tokens: their positions tell them apart
        names = ", ".join(
            f"“{label}” ({t})" if [token_label(x) for x in tokens].count(label) > 1 else f"“{label}”"
            for label, t in zip(labels, self.keys)
        )
        most = sum(w > MOST for w in self.weights)
        share = (
            f"; {'none' if most == 0 else most} of them {'gets' if most == 1 else 'get'} more than half of this "
            "token's weight from that head (the question counts those)"
            if self.weights
            else ""
        )
        weakest = float(self.compromise.min())
        against = (
            f", against at least {self.specialist:.0%} from the specialist heads." if weakest < self.specialist else "."
        )
        return read + (
            f"The first {k} columns are the strongest head for each of {k} different tokens ({names}), the token some "
            f"head gives its largest share to{share}. A single head "
            f"serving all {k} would have to split one distribution that sums to 1: the best any head does on all {k} "
            f"at once is the last column, with {weakest:.0%} on the weakest{against}"
        )


def one_query(run: Run, query: int) -> OneQuery:
    """Every head's attention for token `query`: its top key among the sentence's words (not
    [CLS], [SEP] or punctuation) and that weight, and the distinct top keys."""
    if not 0 <= query < run.n_tokens:
        raise ValueError(f"query must be a token position 0..{run.n_tokens - 1}, got {query}")
    own = np.array([kind == "word" for kind in subspaces.token_kinds(run.tokens)])
    own[run.sinks] = False  # where heads park attention: [CLS]/[SEP], or a decoder's first token
    row = np.where(own, run.attentions[:, :, query], -1.0)  # (L, H, T), parking keys never on top
    top = row.argmax(-1)  # (L, H)
    weight = np.take_along_axis(row, top[..., None], -1)[..., 0]
    best: dict[int, tuple[int, int, int, float]] = {}
    for (layer, head), key in np.ndenumerate(top):
        w = float(weight[layer, head])
        if int(key) not in best or w > best[int(key)][3]:
            best[int(key)] = (int(key), int(layer), int(head), w)
    targets = tuple(sorted(best.values(), key=lambda t: -t[3]))
    majority = tuple(t for t in targets if t[3] > MOST)
    parking = run.attentions[:, :, query][:, :, ~own].sum(-1)  # (L, H)
    return OneQuery(query, top, weight, targets, majority, parking)


SPREAD_OPTIONS = ("None: no head gives a word more than half", "1 word", "2 or 3 words", "4 or more words")


def spread_question(run: Run, q: OneQuery) -> Choice:
    """Predict before the chart: leaving out the parking tokens, to how many different words of
    the sentence does some head give more than half of the query's weight? Answered by counting
    those words; the feedback says where the rest of the heads put it."""
    n = len(q.majority)
    answer = 0 if n == 0 else 1 if n == 1 else 2 if n <= 3 else 3
    total, word = q.top.size, _word(run.tokens, q.query)
    listed = ", ".join(  # a causal query may give most to itself: said, as it counts among the words
        f"{_word(run.tokens, key)}{' (itself)' if key == q.query else ''} {w:.0%}" for key, _, _, w in q.majority[:6]
    )
    rest = total - q.heads_with_a_word - q.parked
    with_word = q.heads_with_a_word
    why = (
        f"{with_word} of the {total} heads {'gives' if with_word == 1 else 'give'} one word of the sentence more "
        f"than half of {word}'s weight, "
        + (f"and those are {n} different words" if n != 1 else "all of them on one word")
        + (f" (the strongest head for each: {listed}{', ...' if n > 6 else ''})" if n else "")
        + f". {q.parked} {'head puts' if q.parked == 1 else 'heads put'} more than half on {parking_words(run)} "
        f"(on average the {total} heads give them {float(q.parking.mean()):.0%} of its weight)"
        + (f"; the other {rest} give no single token more than half." if rest else ".")
    )
    return Choice(SPREAD_OPTIONS, answer, why)


def stage_shapes(run: Run, bert: LoadedModel) -> dict[str, tuple[int, int]]:
    """Steps 2 and 4: the shapes of X, one head's Q_i, one head's attention, the concatenation
    and the output, for this sentence."""
    T, C, H = run.n_tokens, bert.d_model, bert.n_heads
    D = bert.traits.d_head
    return {"X": (T, C), "Q_i": (T, D), "A_i": (T, T), "head_i": (T, D), "concat": (T, H * D), "output": (T, C)}


def other_split(n_heads: int, d_model: int, d_head: int | None = None) -> tuple[int, int]:
    """Step 4's what-if: another number of heads, (heads, d_k). A model whose head size is its own
    (d_head, with n_heads * d_head != d_model) keeps it with twice as many heads; otherwise the
    same width split again: twice as many, else half as many, else one, whichever splits d_model evenly."""
    if d_head is not None and n_heads * d_head != d_model:
        return 2 * n_heads, d_head
    for h in (2 * n_heads, n_heads // 2, 1):
        if h >= 1 and h != n_heads and d_model % h == 0:
            return h, d_model // h
    raise ValueError(f"no other split of {d_model} for {n_heads} heads")


def subspace_question(bert: LoadedModel, run: Run, layer: int, a: int, b: int) -> Choice:
    """Step 3: will heads a and b send the step's token (content_token) to the same key, the one with
    its largest weight? Answered by their attention; the feedback says where each head sends it and
    how far apart the two heads' pictures are."""
    token = content_token(run)
    w = run.attentions[layer, :, token]  # (H, T): the token's weights in every head of the layer
    ka, kb = int(np.argmax(w[a])), int(np.argmax(w[b]))
    options = ("The same key in both heads", "Different keys")
    t, word = run.traits, _word(run.tokens, token)
    where = (
        f"Head {a} gives {word} its largest weight on {_word(run.tokens, ka)} ({w[a, ka]:.0%}), head {b} on "
        f"{_word(run.tokens, kb)} ({w[b, kb]:.0%}). "
    )
    if a == b:
        why = where + (
            f"Both panels are head {a}: one $W_{{{a}}}^Q$ and one {key_of(t, a)}, so the same picture and the same "
            "key. Pick two different heads to compare two lenses."
        )
        return Choice(options, 0, why)
    if t.grouped and a // t.group_size == b // t.group_size:
        which = "the model's only one" if t.kv_groups == 1 else f"K/V group {a // t.group_size}"
        matrices = (
            f"heads {a} and {b} read one $W^K$ ({which}): their keys are the same points, but "
            f"$W_{{{a}}}^Q$ and $W_{{{b}}}^Q$ put the query in different places"
        )
    else:
        matrices = f"$W_{{{a}}}^Q$, {key_of(t, a)} and $W_{{{b}}}^Q$, {key_of(t, b)} are different matrices"
    maps = subspaces.layer_maps(bert, run, layer)
    pa = np.concatenate([maps.queries[a], maps.keys[a]])
    pb = np.concatenate([maps.queries[b], maps.keys[b]])
    differ, longest = float(np.abs(pa - pb).max()), subspaces.longest_point(maps, [a, b])
    why = where + (
        f"Each head scores the keys in its own subspace: {matrices}. Their pictures differ by up to {differ:.2f}, "
        f"{differ / longest:.0%} of the longest point vector in the two ({longest:.2f}; fidelity "
        f"{maps.fidelity[a]:.2f} and {maps.fidelity[b]:.2f})"
        + (agreement.words(w, a, b, ka) if ka == kb else ": different lenses, different keys.")
    )
    return Choice(options, 0 if ka == kb else 1, why)


def previous_token_question(run: Run) -> tuple[Choice, tuple[int, int], tuple[int, int]]:
    """Step 5: which head reads the previous token most? Also returns that head and the head that
    reads [CLS] and [SEP] most, for the page to show."""
    m = atlas.measures(run)
    prev = m["to previous"]
    special = atlas.sink_share(m)
    best = tuple(int(i) for i in np.unravel_index(int(np.argmax(prev)), prev.shape))
    vertical = tuple(int(i) for i in np.unravel_index(int(np.argmax(special)), special.shape))
    ranked = [tuple(int(i) for i in np.unravel_index(int(k), prev.shape)) for k in np.argsort(prev, axis=None)]
    others = [ranked[len(ranked) // 2], ranked[0], vertical]  # a middling head, the least, the [CLS]/[SEP] one
    heads = [best] + [h for h in others if h != best]
    heads = list(dict.fromkeys(heads))[:4]
    options = tuple(_head(h) for h in sorted(heads))
    why = (
        f"{_head(best)} puts {share(prev[best])} of a token's attention on the token just before it, on average over "
        "the tokens that have one "
        f"(Clark et al. 2019 found such heads in BERT too). {_head(vertical)} sends {share(special[vertical])} "
        f"to {run.traits.sink_name} instead: a place to park attention when there is nothing to read"
        + (" (an attention sink, Xiao et al. 2024)." if run.traits.parking == "first" else ".")
    )
    return Choice(options, options.index(_head(best)), why), best, vertical


PREDICTIONS = (
    "The heads still attend in different ways",
    "Every head computes the same attention",
    "Every head spreads its weight evenly over the tokens",
)
UNIFORM = 0.99  # "evenly": a map's entropy at least this share of ln T


def prediction_feedback(choice: int, ans: check_question.Answer) -> tuple[bool, str]:
    """Was the learner's prediction what the layer did? Each option is graded by what it says:
    the heads differ, the heads are identical, the maps are uniform (entropy at least UNIFORM of ln T)."""
    right = (not ans.identical, ans.identical, ans.entropy_shared >= UNIFORM)[choice]
    differ = (
        "no two heads' attention now differs at all (the largest difference is exactly 0)"
        if ans.difference_shared == 0
        else f"the heads' attention now differs by at most {small(ans.difference_shared)}"
    )
    did = f"{differ} and the mean divergence between heads fell from {ans.diversity_bert:.3f} to " + (
        "exactly 0" if ans.diversity_shared == 0 else small(ans.diversity_shared)
    )
    heads = f"the effective number of heads went from {ans.heads_bert:.1f} to {ans.heads_shared:.1f}"
    if right and choice == 1:
        return True, (
            f"Right: {did}, and {heads}: {ans.n_heads} copies of one head, for {ans.params_shared:,} parameters "
            f"instead of {ans.params_distinct:,}."
        )
    entropy = (
        f"The mean entropy of a map went from {ans.entropy_bert:.2f} to {ans.entropy_shared:.2f} of $\\ln T$ "
        "(1 would be even weights)."
    )
    return right, ("Right" if right else "Not quite") + f": {did}, and {heads}. " + (entropy if choice == 2 else "")


ROLE_SETS = (("k", "v"), ("k", "q"), ("v",), ("q",))
ROLE_NAMES = ("K and V", "Q and K", "V only", "Q only")


def which_roles_question(
    bert: LoadedModel,
    run: Run,
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
        f"Attention is ${structure_words.map_tex(bert.traits)}$: it depends on Q and K only. Measured on this "
        "layer, the mean "
        "divergence between heads is "
        + ", ".join(f"{small(d)} sharing {n}" for n, d in div.items())
        + ". Sharing K and V (multi-query attention) keeps each head's own question."
    )
    return Choice(ROLE_NAMES, ROLE_NAMES.index(least), why), div


def shuffle_question(bert: LoadedModel, run: Run, layer: int, seed: int = 1) -> tuple[Choice, float]:
    """Step 7: shuffle the rows of a layer's input: is each token's output the same, only
    reordered? Answered by build_stages' shuffle check on the real layer: yes for BERT's
    attention, no for a decoder's, whose causal mask and rotary positions see the order (the
    feedback then says how much of that each of them makes)."""
    s = build.build_stages(bert, run, layer, bert.n_heads, shuffle=True, seed=seed)
    options = ("The same outputs, only in the new order", "Different outputs: attention notices the order")
    if s.order_errors is not None:
        e, t = s.order_errors, run.traits
        plain = list(e)[-1]  # every order-aware part removed
        masked = next((k for k in e if k.startswith("without the causal mask")), "")  # and its window, if any
        sees = [
            *(["its causal mask lets a token read only the tokens before it"] if t.causal else []),
            *([f"its window lets it read only the last {t.window(layer):,} of them"] if t.window(layer) else []),
            *(
                ["its rotary positions turn q and k by their place before they meet (Su et al. 2021)"]
                * (t.positions == "rotary")
            ),
        ]
        why = (
            f"Largest difference after undoing the shuffle: {small(e['as the model has it'])}. This layer sees the "
            f"order: {', and '.join(sees)}."
            + (
                f" Without the mask{' and its window' if masked.endswith('window') else ''} it still differs by "
                f"{small(e[masked])};"
                if len(e) == 3
                else ""
            )
            + f" {plain.replace('the mask and the rotary positions', 'the mask and the rotation')} the same weights "
            f"only reorder (largest difference {small(e[plain])}): the dot product itself knows no positions. "
            + (
                f"{t.who} also adds a learned position vector to each token before layer 0; "
                if t.positions == "learned"
                else "BERT adds a position vector to each token before layer 0 instead; "
            )
            + "where positions enter is the next lesson, positional encodings."
        )
    else:
        why = (
            f"Largest difference after undoing the shuffle: {small(s.shuffle_error)}. Attention only compares vectors "
            "with each other, so it cannot see where a token stands. The sentence's own word order reaches "
            f"{run.traits.who} another way: it adds a learned position embedding to every token before layer 0, so "
            "reordering the words "
            "themselves does change its outputs; the next lesson, positional encodings, shows how."
        )
    return Choice(options, 0 if s.shuffle_error < build.PERMUTED else 1, why), s.shuffle_error
