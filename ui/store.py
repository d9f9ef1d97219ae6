"""The one way results are shared by sessions: a SharedStore computes a value once under a lock
(a session that asks meanwhile waits for it), keeps it read-only (no session can change what
another sees, no copy per read) and drops the least recently used values beyond a bound (count,
bytes, or both). Plain Python: the Streamlit layer (cache.py) decides what goes in which store.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import torch


def read_only(value: Any) -> int:
    """Make every numpy array inside `value` (dataclasses, dicts, lists, tuples) read-only;
    returns the bytes the value holds (arrays exactly, other objects roughly)."""
    if isinstance(value, np.ndarray):
        value.setflags(write=False)
        return value.nbytes
    if isinstance(value, torch.Tensor):  # counted; a reader copies it (uptrain clones its inputs)
        return value.element_size() * value.numel()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return 64 + sum(read_only(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return 64 + sum(read_only(k) + read_only(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return 64 + sum(read_only(v) for v in value)
    return sys.getsizeof(value)


class SharedStore:
    """Values shared by every session, by key: the least recently used go first once there are
    more than `size` of them or they hold more than `budget_mb` MB. With `group` (key -> group),
    a new value never pushes out values of its own group (the results of the sentence a page is
    showing stay together, even if they alone pass the budget). Values are made read-only
    (read_only) as they come in."""

    def __init__(
        self, size: int | None = 16, budget_mb: float | None = None, group: Callable[[Hashable], Any] | None = None
    ) -> None:
        self.size, self.budget = size, None if budget_mb is None else budget_mb * 2**20
        self.group = group
        self.items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()  # key -> (value, bytes), by last use
        self.added: dict[Hashable, int] = {}  # key -> when it was put (a counter): entries' order
        self.bytes, self.lock, self.puts = 0, threading.Lock(), 0
        self.computing: dict[Hashable, threading.Lock] = {}

    def lock_for(self, key: Hashable) -> threading.Lock:
        """A lock per key: hold it while computing the value, so a second session waits for the
        first one's result instead of computing it again."""
        with self.lock:
            return self.computing.setdefault(key, threading.Lock())

    def busy(self, key: Hashable) -> bool:
        """Some session is computing `key` now (for a message; get_or_compute decides who computes)."""
        with self.lock:
            lock = self.computing.get(key)
        return lock is not None and lock.locked()

    def get(self, key: Hashable) -> Any:
        with self.lock:
            if key not in self.items:
                return None
            self.items.move_to_end(key)
            return self.items[key][0]

    def put(self, key: Hashable, value: Any) -> None:
        size = read_only(value)
        with self.lock:
            if key in self.items:
                self.bytes -= self.items.pop(key)[1]
            self.items[key] = (value, size)
            self.puts += 1
            self.added[key] = self.puts
            self.bytes += size
            self._evict_while(key, lambda: (self.size is not None and len(self.items) > self.size) or self._over())

    def entries(self) -> list[tuple[Hashable, Any]]:
        """Every (key, value) held now, in the order they were put, oldest first (a snapshot; no
        use is recorded): the last entry is the newest result, whatever was read since."""
        with self.lock:
            return [(k, self.items[k][0]) for k in sorted(self.items, key=self.added.__getitem__)]

    def _make_room(self, key: Hashable) -> None:
        """Before computing `key`, drop what its put would drop anyway: other groups' entries while
        the store is over budget (the one sentence in view may exceed it alone). Computing a new
        sentence's results then does not hold the last sentence's beside them."""
        with self.lock:
            self._evict_while(key, self._over)

    def _over(self) -> bool:
        return self.budget is not None and self.bytes > self.budget

    def _evict_while(self, key: Hashable, over: Callable[[], bool]) -> None:
        """Drop the oldest entries of groups other than key's while over() (the caller holds the lock)."""
        while over():
            old = next((k for k in self.items if k != key and not self._same_group(k, key)), None)
            if old is None:
                break
            self.bytes -= self.items.pop(old)[1]
            self.added.pop(old, None)

    def _same_group(self, a: Hashable, b: Hashable) -> bool:
        return self.group is not None and self.group(a) == self.group(b)

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value of `key`, computed (once, whoever asks meanwhile waits) if it is not here."""
        value = self.get(key)
        if value is None:
            with self.lock_for(key):
                value = self.get(key)
                if value is None:
                    self._make_room(key)
                    value = compute()
                    self.put(key, value)
            with self.lock:
                self.computing.pop(key, None)
        return value

    def drop(self, which: Callable[[Hashable], bool]) -> int:
        """Drop the values whose key `which` picks (a model no longer in memory); returns how many."""
        with self.lock:
            keys = [k for k in self.items if which(k)]
            for k in keys:
                self.bytes -= self.items.pop(k)[1]
                self.added.pop(k, None)
        return len(keys)

    def clear(self) -> None:
        """Drop every value (tests that swap the model behind a name)."""
        with self.lock:
            self.items.clear()
            self.added.clear()
            self.bytes = 0
