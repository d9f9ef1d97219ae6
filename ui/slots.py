"""Long runs (a training run, an uptraining, a heads study) take turns on a server: at most
MHA_TRAINING_SLOTS of them at once (default 1), the others wait in a queue, first come first
served, each told its place, so that one class's runs cannot stall every page."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator


class Slots:
    """`n` runs at once; the rest wait in order of arrival."""

    def __init__(self, n: int) -> None:
        self.n, self.running = max(1, n), 0
        self.queue: list[object] = []
        self.cond = threading.Condition()

    def waiting(self) -> int:
        with self.cond:
            return len(self.queue)

    @contextlib.contextmanager
    def turn(self, told: Callable[[int], None] | None = None, every: float = 0.5) -> Iterator[None]:
        """Hold a slot for the block. While it waits, told(place) is called with its place in the
        queue (1: next) whenever the place changes."""
        ticket, place, started = object(), None, False
        with self.cond:
            self.queue.append(ticket)
        try:
            while True:
                with self.cond:
                    if self.queue[0] is ticket and self.running < self.n:
                        self.queue.pop(0)
                        self.running += 1
                        started = True
                        self.cond.notify_all()
                        break
                    now = self.queue.index(ticket) + 1
                if now != place and told is not None:
                    place = now
                    told(now)  # outside the lock: it may draw on a page (and be stopped there)
                with self.cond:
                    self.cond.wait(every)
            yield
        finally:
            with self.cond:
                if started:
                    self.running -= 1
                else:
                    self.queue.remove(ticket)
                self.cond.notify_all()


TRAINING = Slots(int(os.environ.get("MHA_TRAINING_SLOTS", "1") or 1))
