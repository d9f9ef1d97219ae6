"""When two heads agree on a key (the lesson's subspace step): each must pick it, not only give it
its largest weight by a hair (a fresh walk found "agree" said of a head at 3 % against 2.3 % next)."""

from __future__ import annotations

import numpy as np


def words(w: np.ndarray, a: int, b: int, key: int) -> str:
    """Words for heads a, b whose largest weight (w (H, T): one query's rows) is on one key: they agree
    only if each gives it at least twice its next largest weight."""
    nxt = {h: float(np.sort(w[h])[-2]) for h in (a, b)}
    flat = [h for h in (a, b) if w[h, key] < 2 * nxt[h]]
    if not flat:
        return ": different lenses can still agree on one key."
    h = flat[0]
    return f": the same largest key, though head {h} barely prefers it ({w[h, key]:.0%} against {nxt[h]:.0%} next)."
