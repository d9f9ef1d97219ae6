"""The sharing verdict in tables and words (mha/studies/verdict.py): what the pages and the recap say
about each rung on the model's own held-out task, said only as far as the paired bootstrap
intervals allow (an order between two rungs only where the interval of their difference excludes 0).

Every sentence is made from the verdict's numbers and the model's traits; nothing is written for one
model. Shapes: N items (pairs or texts).
"""

from __future__ import annotations

from mha.lesson.answers import signed
from mha.studies.verdict import CONVERTED, FLOOR, MODEL, REMOVED, UPTRAINED, Change, Entry, Verdict

PLAIN, SCALED = "mean-pooled", "scale restored"  # ladder.Rung.pooling
AINSLIE_UPTRAIN = 0.05  # Ainslie et al. 2023 uptrain a converted checkpoint for 5 % of its pre-training steps


def higher_is_better(v: Verdict) -> bool:
    return v.task == "similarity"


def fmt(v: Verdict, x: float) -> str:
    """A score as the pages show it: three decimals (a Spearman, or nats per token)."""
    return f"{x:.3f}"


def held_out(v: Verdict) -> str:
    """The held-out set and its score, in words."""
    if v.task == "similarity":
        return f"Spearman's rho on the {v.n_items} STS Benchmark dev pairs (Cer et al. 2017), higher is better"
    return (
        f"next-token loss on {v.n_items} STS Benchmark dev sentences (Cer et al. 2017), nats per token over the "
        f"{int(v.tokens.sum()):,} tokens they predict, lower is better"
    )


def score_name(v: Verdict) -> str:
    """A column heading: "Spearman (STS dev)" or "loss (nats)"."""
    return "Spearman (STS dev)" if v.task == "similarity" else "loss (nats)"


def better(v: Verdict, c: Change) -> int:
    """+1 if b (c = b - a) is surely better than a, -1 surely worse, 0 if the interval spans 0."""
    if c.spans_zero:
        return 0
    return 1 if (c.low > 0) == higher_is_better(v) else -1


def label(e: Entry, own: str) -> str:
    """An entry's name for a sentence or a row."""
    if e.kind == MODEL:
        return f"{own} (the model)"
    if e.kind == REMOVED:
        return "attention removed"
    extra = {CONVERTED: "", UPTRAINED: ", uptrained", FLOOR: ", random projections"}[e.kind]
    return f"{e.rung} ({e.pooling}{extra})" if e.kind != UPTRAINED else f"{e.rung} (uptrained)"


def _ranked(v: Verdict, entries: list[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: -v.score(e) if higher_is_better(v) else v.score(e))


def chain(v: Verdict, entries: list[Entry]) -> str:
    """The entries best first, each neighbour pair joined by ">" (or "<" for a loss, whose better
    value is lower) where the 90 % paired interval of their difference excludes 0, and by "≈" where it
    does not: an order said only as far as the intervals allow."""
    own = v.model_entry.rung
    ranked = _ranked(v, entries)
    sign = ">" if higher_is_better(v) else "<"
    out = f"{label(ranked[0], own)} {fmt(v, v.score(ranked[0]))}"
    for a, b in zip(ranked, ranked[1:]):
        out += f" {sign if better(v, v.change(a, b)) == -1 else '≈'} {label(b, own)} {fmt(v, v.score(b))}"
    return out


def chain_key(v: Verdict) -> str:
    sign = ">" if higher_is_better(v) else "<"
    return (
        f"{sign}: the 90 % paired bootstrap interval of the two neighbours' difference excludes 0 (resampling "
        f"the {v.n_items} {'pairs' if v.task == 'similarity' else 'texts'}); ≈: it includes 0, so this set cannot "
        "tell them apart. Each sign compares neighbours only."
    )


def rungs_of(v: Verdict, kind: str, pooling: str = PLAIN) -> list[Entry]:
    """The rungs' entries of one kind and pooling, in the ladder's order."""
    return [e for e in v.entries if e.kind == kind and e.pooling == pooling]


TABLE_COLUMNS = (  # (kind, pooling, heading) of table(), after the rung
    (CONVERTED, PLAIN, "converted, mean-pooled"),
    (CONVERTED, SCALED, "converted, scale restored"),
    (UPTRAINED, PLAIN, "uptrained"),
    (FLOOR, PLAIN, "random projections"),
)


def table(v: Verdict) -> list[dict]:
    """The verdict's table, every layer changed: the model, each rung (converted both ways, uptrained,
    its random floor), every head removed; scores to 3 decimals as text, "—" where a row has none."""

    def cell(e: Entry | None) -> str:
        return "—" if e is None else fmt(v, v.score(e))

    rows = [{"rung": f"{v.model_entry.rung} (the model)", **{h: "—" for *_, h in TABLE_COLUMNS}}]
    rows[0][TABLE_COLUMNS[0][2]] = cell(v.model_entry)
    for e in rungs_of(v, CONVERTED):
        rows.append({"rung": e.rung, **{h: cell(v.find(kind, e.rung, pooling)) for kind, pooling, h in TABLE_COLUMNS}})
    gone = {h: "—" for *_, h in TABLE_COLUMNS} | {TABLE_COLUMNS[0][2]: cell(v.removed_entry)}
    rows.append({"rung": "every head removed", **gone})
    return rows


def interval_rows(v: Verdict) -> list[dict]:
    """Every entry's change from the model with its 90 % interval (for the chart and the download)."""
    base, own = v.model_entry, v.model_entry.rung
    out = []
    for e in v.entries:
        c = v.change(base, e)
        out.append(
            {
                "variant": label(e, own),
                "kind": e.kind,
                "rung": e.rung or own,
                "pooling": e.pooling,
                "score": v.score(e),
                "change from the model": c.change,
                "low": c.low,
                "high": c.high,
            }
        )
    return out


def against_removal(v: Verdict) -> str:
    """Which untrained conversions score no better than removing every head, said with their intervals."""
    gone = v.removed_entry
    own = v.model_entry.rung
    below, tied = [], []
    for e in rungs_of(v, CONVERTED, PLAIN) + rungs_of(v, CONVERTED, SCALED):
        verdict = better(v, v.change(gone, e))
        (below if verdict == -1 else tied if verdict == 0 else []).append(f"{label(e, own)} {fmt(v, v.score(e))}")
    if not below and not tied:
        return f"Every untrained conversion scores better than removing every head ({fmt(v, v.score(gone))})."
    parts = []
    if below:
        parts.append(f"{_list(below)} {_verb(below, 'scores', 'score')} worse than removing every head")
    if tied:
        parts.append(
            f"{_list(tied)} cannot be told apart from removing every head"
            if not below
            else f"{_list(tied)} cannot be told apart from it"
        )
    return (
        "Converted without training, "
        + "; ".join(parts)
        + f" ({fmt(v, v.score(gone))}): a bare conversion of every layer may keep no more of the task than no "
        "attention at all."
    )


def _verb(items: list, one: str, many: str) -> str:
    return one if len(items) == 1 else many


def _list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def budget(v: Verdict) -> str:
    """What the uptraining cost, beside Ainslie et al.'s."""
    b = v.budget
    tokens = float(f"{b['tokens_per_layer']:.2g}")  # about: two significant digits
    return (
        f"each layer fitted alone to reproduce the model's own layer output, {b['steps']:,} steps of "
        f"{b['batch']} generated sentences (about {tokens:,.0f} tokens per layer), then "
        f"the whole model scored. Ainslie et al. (2023) uptrain the whole converted model for {AINSLIE_UPTRAIN:.0%} of "
        "its pre-training steps: this is a far smaller, layer-wise fit"
    )


def won_back(v: Verdict, rung: str) -> float | None:
    """The share of what converting `rung` lost (plain mean) that its uptraining wins back, or None."""
    conv, up = v.find(CONVERTED, rung, PLAIN), v.find(UPTRAINED, rung, PLAIN)
    if conv is None or up is None:
        return None
    lost = v.score(v.model_entry) - v.score(conv)
    if (lost <= 0) if higher_is_better(v) else (lost >= 0):
        return None
    return (v.score(up) - v.score(conv)) / lost


def kept(v: Verdict, e: Entry) -> float:
    """The share of what attention adds that the entry keeps (Verdict.kept)."""
    return v.kept(e)


def kept_words(v: Verdict) -> str:
    """How much of what attention adds each rung keeps, converted (plain mean) and uptrained."""
    gone, model = v.score(v.removed_entry), v.score(v.model_entry)
    items, shares = [], []
    for conv in rungs_of(v, CONVERTED):
        up = v.find(UPTRAINED, conv.rung, PLAIN)
        shares += [kept(v, e) for e in (conv, up) if e is not None]
        items.append(f"{conv.rung} {kept(v, conv):.0%}" + (f" → {kept(v, up):.0%}" if up is not None else ""))
    adds = (
        f"Attention raises the score by {model - gone:.3f}"
        if higher_is_better(v)
        else f"Attention lowers the loss by {gone - model:.3f} nats per token"
    )
    return (
        f"**How much it matters.** {adds} ({fmt(v, gone)} with every head removed, {fmt(v, model)} with the model's "
        "own). Of that, each rung keeps, converted (mean-pooled) → uptrained: "
        + "; ".join(items)
        + (" (below 0 %: worse than no attention at all)" if min(shares) < 0 else "")
        + ". The uptraining is a short layer-wise fit (below), not Ainslie et al.'s: what a full uptraining keeps "
        "is not measured here."
    )


def uptrained_words(v: Verdict) -> str:
    """What uptraining wins back, rung by rung, against the model and removal, and their order."""
    gone = v.removed_entry
    ups = rungs_of(v, UPTRAINED)
    items = []
    for up in ups:
        conv, share = v.find(CONVERTED, up.rung, PLAIN), won_back(v, up.rung)
        items.append(
            f"{up.rung} {fmt(v, v.score(conv))} → {fmt(v, v.score(up))}"
            + (f" ({share:.0%})" if share is not None else "")
        )
    over = [u for u in ups if better(v, v.change(gone, u)) == 1]
    worse = [u.rung for u in ups if (share := won_back(v, u.rung)) is not None and share < 0]
    return (
        f"Uptrained ({budget(v)}), from the plain mean: "
        + "; ".join(items)
        + " (in brackets: the share of what the conversion lost that uptraining wins back"
        + (f"; below 0 %: the fit made {' and '.join(worse)} worse on the task" if worse else "")
        + "). "
        + f"The model scores {fmt(v, v.score(v.model_entry))}, every head removed {fmt(v, v.score(gone))}; "
        + (
            ("the uptrained rung scores" if len(ups) == 1 else f"all {len(ups)} uptrained rungs score")
            + " better than removal."
            if len(over) == len(ups)
            else f"{len(over)} of the {len(ups)} uptrained rungs score better than removal."
        )
        + f" Uptrained, best first: {chain(v, [v.model_entry, *ups, gone])}."
    )


def contrast(v: Verdict) -> str:
    """The check question on the task: one shared W^Q, W^K, W^V (every head the same head) against every
    uptrained rung whose heads keep a projection of their own, all uptrained alike."""
    one = v.find(UPTRAINED, "shared Q/K/V", PLAIN)
    others = [e for e in rungs_of(v, UPTRAINED) if e.rung not in ("shared Q/K/V", "shared Q, K")]
    if one is None or not others:
        return ""
    verdicts = {e.rung: better(v, v.change(one, e)) for e in others}
    ahead = [f"{e.rung} {fmt(v, v.score(e))}" for e in others if verdicts[e.rung] == 1]
    tied = [f"{e.rung} {fmt(v, v.score(e))}" for e in others if verdicts[e.rung] == 0]
    behind = [f"{e.rung} {fmt(v, v.score(e))}" for e in others if verdicts[e.rung] == -1]
    return (
        f"Uptrained alike, one shared $W^Q, W^K, W^V$ (every head the same head) scores {fmt(v, v.score(one))}; of the "
        f"{len(others)} rungs whose heads do not all compute one map (a $W^Q$ per head, or a $W^K$ per K/V group), "
        + (f"{_list(ahead)} {_verb(ahead, 'scores', 'score')} better" if ahead else "none scores better")
        + (f", {_list(tied)} cannot be told apart from it" if tied else "")
        + (f", {_list(behind)} {_verb(behind, 'scores', 'score')} worse" if behind else "")
        + " (90 % paired intervals)."
    )


def alone_table(v: Verdict, layer: int) -> list[dict]:
    """Layer `layer` converted alone: each rung and pooling, its score and its changes."""
    a = v.layer(layer)
    name = score_name(v)

    def interval(c: Change) -> str:
        return f"{signed(c.change)} ({signed(c.low)} to {signed(c.high)})"

    rows = [
        {
            "rung": f"{r.rung} ({r.pooling})",
            name: round(r.score, 3),
            "change from the model (90 %)": interval(r.vs_model),
        }
        for r in a.rungs
    ]
    rows.append(
        {
            "rung": f"layer {layer}'s attention removed",
            name: round(a.removed, 3),
            "change from the model (90 %)": interval(a.removed_change),
        }
    )
    return rows


def alone_words(v: Verdict, layer: int) -> str:
    """Whether converting one layer alone can rank the rungs: the spread of its scores against the
    model's and removal's, and how many conversions the intervals tell apart from that layer's removal."""
    a = v.layer(layer)
    scores = [r.score for r in a.rungs]
    apart = sum(better(v, r.vs_removed) != 0 for r in a.rungs)
    base = v.score(v.model_entry)
    return (
        f"With layer {layer} alone converted, every rung scores {fmt(v, min(scores))} to {fmt(v, max(scores))} "
        f"(the model {fmt(v, base)}), and removing that layer's attention scores {fmt(v, a.removed)}. "
        f"The intervals tell {apart} of the {len(a.rungs)} conversions apart from that removal"
        + (
            ": one layer alone cannot rank the rungs, which is why Ainslie et al. convert every layer."
            if apart <= len(a.rungs) // 2
            else "."
        )
    )


def check_answer(v: Verdict, who: str) -> str:
    """Step 6's answer on the task: one shared W^Q, W^K, W^V in every layer, converted both ways, each
    against removal, then the uptrained contrast."""
    gone = v.removed_entry
    found = [(p, v.find(CONVERTED, "shared Q/K/V", p)) for p in (SCALED, PLAIN)]
    found = [(p, e) for p, e in found if e is not None]
    if not found:
        return ""
    word = {1: "better than", -1: "worse than", 0: "not measurably different from"}
    parts = [f"{fmt(v, v.score(e))} {p} ({word[better(v, v.change(gone, e))]} removing every head)" for p, e in found]
    return (
        f"**On {who}'s own task**, {held_out(v)}: with one shared $W^Q, W^K, W^V$ in every layer, converted "
        f"without training, the score goes from {fmt(v, v.score(v.model_entry))} to {_list(parts)}; every head "
        f"removed scores {fmt(v, v.score(gone))}. " + contrast(v)
    )


def recap_words(v: Verdict, who: str) -> str:
    """The recap's verdict: the order of the untrained conversions, removal, and what uptraining wins back."""
    return (
        f"**Measured by {who}'s own task**, {held_out(v)}, every layer converted (Ainslie et al. 2023 convert a "
        f"whole checkpoint), best first: {chain(v, [v.model_entry, *rungs_of(v, CONVERTED), v.removed_entry])}. "
        + against_removal(v)
        + " "
        + contrast(v)
    )


def order_rows(v: Verdict, kind: str = CONVERTED, pooling: str = PLAIN) -> list[Entry]:
    """The model, one kind of rungs and removal: what chain() orders on the page."""
    return [v.model_entry, *rungs_of(v, kind, pooling), v.removed_entry]
