"""Expired classes deleted on a schedule that every replica runs: a daemon thread per server
process calls classes.purge every PURGE_EVERY seconds ($MHA_CLASS_PURGE_EVERY, default 600), so
a class's data is gone within 10 minutes of its 24 hours, whether or not another class starts.
Replicas that purge at once do no harm: each delete is one transaction, and a second finds
nothing left."""

from __future__ import annotations

import functools
import logging
import os
import threading

from . import classes

log = logging.getLogger("mha.classroom")


def every() -> float:
    """Seconds between two purges; 0 turns the schedule off (the test process, whose tests each
    use their own database)."""
    try:
        value = float(os.environ.get("MHA_CLASS_PURGE_EVERY", "600"))
    except ValueError:
        return 600.0
    return 0.0 if value <= 0 else max(0.5, value)


def _loop(stop: threading.Event) -> None:
    while True:
        try:
            n = classes.purge()
            if n:
                log.warning("deleted %d expired class(es) with their seats and answers", n)
        except Exception as e:  # noqa: BLE001 (a database that does not answer now: the next round tries again)
            log.warning("could not delete expired classes: %s", type(e).__name__)
        if stop.wait(every()):
            return


@functools.cache
def start() -> threading.Event:
    """The purge thread of this process, started once (set the returned event to stop it)."""
    stop = threading.Event()
    if not every():
        return stop
    threading.Thread(target=_loop, args=(stop,), name="mha-class-purge", daemon=True).start()
    return stop
