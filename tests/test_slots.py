"""Training runs take turns on a server (ui.slots): at most n at once, first come first served,
each waiting run told its place in the queue."""

from __future__ import annotations

import threading
import time

from ui.slots import Slots


def test_runs_take_turns_in_order_and_are_told_their_place():
    slots = Slots(1)
    started, places, most = [], {}, [0]
    running = [0]
    lock = threading.Lock()

    def run(name: str) -> None:
        with slots.turn(lambda p: places.setdefault(name, []).append(p), every=0.01):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
                started.append(name)
            time.sleep(0.15)
            with lock:
                running[0] -= 1

    threads = []
    for name in "abc":
        threads.append(threading.Thread(target=run, args=(name,)))
        threads[-1].start()
        time.sleep(0.03)  # a, then b, then c arrive
    for t in threads:
        t.join()
    assert started == ["a", "b", "c"] and most[0] == 1
    assert places == {"b": [1], "c": [2, 1]}  # a started at once; c moved up when a finished
    assert slots.waiting() == 0 and slots.running == 0


def test_two_slots_run_two_at_once_and_a_stopped_wait_leaves_the_queue():
    slots = Slots(2)
    inside = threading.Barrier(2, timeout=2)

    def run() -> None:
        with slots.turn():
            inside.wait()  # both are inside together, or this times out

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert slots.running == 0

    class Stopped(Exception):
        pass

    def told(place: int) -> None:
        raise Stopped  # Streamlit stops a script whose page was left: the wait ends there

    with slots.turn():
        with slots.turn():
            try:
                with slots.turn(told):
                    raise AssertionError("a third run got in")
            except Stopped:
                pass
            assert slots.waiting() == 0
