"""Every step of the lesson, rendered server-side after the model is loaded: median seconds per
step over repeated reruns through Streamlit's AppTest (target < 0.5 s each).

    python bench/bench_lesson.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import server_threads

server_threads()

from streamlit.testing.v1 import AppTest  # noqa: E402

from livetest import ROOT  # noqa: E402
from mha.lesson.steps import STEPS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()  # loads the model
    for step in range(1, len(STEPS) + 1):
        times = []
        for n in range(args.runs + 1):
            at.session_state["step"] = step
            t0 = time.perf_counter()
            at.run()
            if n:  # the first run of a step fills its caches
                times.append(time.perf_counter() - t0)
        assert not at.exception, [e.value for e in at.exception]
        median = statistics.median(times)
        print(
            f"step {step} ({STEPS[step - 1].title}): median {median:.3f} s, first {max(times):.3f} s  "
            f"{'OK' if median < 0.5 else 'OVER'}"
        )
    at.session_state["step"] = 6  # the check question with sharing switched on
    at.run()
    next(r for r in at.radio if "predict" in str(r.key)).set_value(1).run()
    at.toggle(key="_w_lesson_share").set_value(True).run()
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
    print(f"step 6 with sharing on (grids, measures, the roles question): median {statistics.median(times):.3f} s")


if __name__ == "__main__":
    main()
