"""Views of one attention map for display: hide special tokens, merge word pieces, pair blocks.

Each function takes attention (..., T, T) (rows = queries, columns = keys) and the token
metadata, and returns the new attention with the matching token labels. Rows of the result
still sum to 1 (except for a pair block, which is a slice and says so).
"""

from __future__ import annotations

import numpy as np

SPECIAL = ("[CLS]", "[SEP]", "[PAD]")
BLOCKS = ("A->A", "A->B", "B->A", "B->B")


def drop_special(
    att: np.ndarray, tokens: list[str], positions: list[int] | None = None
) -> tuple[np.ndarray, list[int]]:
    """Remove the rows and columns of [CLS]/[SEP] (or of `positions`, e.g. a decoder's first
    token) and renormalise each row to sum to 1.

    Returns (attention (..., T', T'), kept positions). A row whose whole mass was on special
    tokens becomes uniform over the kept tokens.
    """
    gone = set(positions) if positions is not None else {i for i, t in enumerate(tokens) if t in SPECIAL}
    keep = [i for i in range(len(tokens)) if i not in gone]
    if not keep:
        raise ValueError("the input has only special tokens: nothing is left after hiding them")
    sub = att[..., keep, :][..., :, keep]  # (..., T', T')
    total = sub.sum(axis=-1, keepdims=True)
    uniform = np.full_like(sub, 1.0 / len(keep))
    out = np.divide(sub, total, out=uniform, where=total > 1e-12)
    return out.astype(np.float32), keep


def merge_wordpieces(
    att: np.ndarray, tokens: list[str], word_ids: list[int | None]
) -> tuple[np.ndarray, list[str], list[int]]:
    """Merge the word pieces of each word: attention TO a word is the sum over its pieces,
    attention FROM a word is the mean over its pieces (so rows still sum to 1).

    Special tokens stay as their own unit. Returns (attention (..., W, W), word labels, the
    first token position of each word).
    """
    groups: list[list[int]] = []
    labels: list[str] = []
    last = object()
    for i, (tok, w) in enumerate(zip(tokens, word_ids)):
        if w is not None and w == last:
            groups[-1].append(i)
            labels[-1] += tok[2:] if tok.startswith("##") else tok
        else:
            groups.append([i])
            labels.append(tok)
        last = w if w is not None else object()
    T = len(tokens)
    # M (T, W): one-hot membership; to-word = A @ M (sum), from-word = mean over rows
    M = np.zeros((T, len(groups)), dtype=np.float32)
    for g, idx in enumerate(groups):
        M[idx, g] = 1.0
    to_words = att @ M  # (..., T, W)
    from_words = np.swapaxes(np.swapaxes(to_words, -1, -2) @ (M / M.sum(0)), -1, -2)  # (..., W, W)
    return from_words.astype(np.float32), labels, [g[0] for g in groups]


def pair_block(att: np.ndarray, segment_ids: list[int], block: str) -> tuple[np.ndarray, list[int], list[int]]:
    """The block of a sentence pair: "A->B" = queries in sentence A, keys in sentence B.

    Returns (attention (..., Tq, Tk), query positions, key positions). Rows of a block do not
    sum to 1: the rest of each row's weight falls in the other block.
    """
    if block not in BLOCKS:
        raise ValueError(f"block must be one of {BLOCKS}, got {block!r}")
    if 1 not in segment_ids:
        raise ValueError("this is a single sentence: type a second sentence to see pair blocks")
    seg = {"A": 0, "B": 1}
    q = [i for i, s in enumerate(segment_ids) if s == seg[block[0]]]
    k = [i for i, s in enumerate(segment_ids) if s == seg[block[-1]]]
    return att[..., q, :][..., :, k], q, k


def view(
    att: np.ndarray,
    tokens: list[str],
    word_ids: list[int | None],
    segment_ids: list[int],
    hide_special: bool = False,
    merge_words: bool = False,
    sinks: list[int] | None = None,
) -> tuple[np.ndarray, list[str], list[int]]:
    """Apply the display options in order (hide specials, then merge pieces).

    att: (..., T, T); sinks: the positions hide_special drops (None: [CLS]/[SEP]).
    Returns (attention (..., T', T'), labels, segment id of each unit).
    """
    tokens, word_ids, segment_ids = list(tokens), list(word_ids), list(segment_ids)
    if hide_special:
        att, keep = drop_special(att, tokens, sinks)
        tokens = [tokens[i] for i in keep]
        word_ids = [word_ids[i] for i in keep]
        segment_ids = [segment_ids[i] for i in keep]
    if merge_words:
        att, tokens, firsts = merge_wordpieces(att, tokens, word_ids)
        segment_ids = [segment_ids[i] for i in firsts]
    return att, tokens, segment_ids
