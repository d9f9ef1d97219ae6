"""Write the bundled models' sharing verdicts into mha/data/verdict_<model>.json, so that no visitor
waits for them (a page uses one only if it was computed on exactly the loaded weights, data and
settings: mha.studies.verdict.shipped_verdict). Run it again after changing the verdict's code or
settings; tests/test_verdict.py recomputes part of each file independently.

    python scripts/sharing_verdict.py [model ...]   # default: the bundled BERT and the decoder
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from mha.models.catalog import DECODER_MODEL, DEFAULT_MODEL, load_model  # noqa: E402
from mha.studies import verdict  # noqa: E402

ROOT = Path(__file__).resolve().parents[1] / "mha"


def main(names: list[str]) -> None:
    torch.set_num_threads(os.cpu_count() or 1)
    for name in names:
        model = load_model(name)
        t0 = time.perf_counter()
        v = verdict.verdict_study(
            model, progress=lambda done, total, n=name: print(f"\r{n}: {done} of {total}", end="", file=sys.stderr)
        )
        print(file=sys.stderr)
        out = ROOT / verdict.verdict_file(name)
        out.write_text(verdict.verdict_to_json(v, verdict.verdict_stamp(model)) + "\n", encoding="utf-8")
        scores = ", ".join(f"{e.kind} {e.rung} {e.pooling}: {v.score(e):.3f}".replace("  ", " ") for e in v.entries)
        where = out.relative_to(ROOT.parent)
        print(f"{name}: verdict in {time.perf_counter() - t0:.0f} s, written to {where}: {scores}")


if __name__ == "__main__":
    main(sys.argv[1:] or [DEFAULT_MODEL, DECODER_MODEL])
