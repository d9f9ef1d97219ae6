"""Write mha/data/side_by_side.json: the bundled BERT, SmolLM2 and Gemma 3 measured side by side
(mha.studies.side_by_side), one model loaded at a time, each with its shipped sharing verdict
(scripts/sharing_verdict.py first). tests/test_side_by_side.py recomputes part of it independently.

    python scripts/side_by_side.py
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from mha.analyses import subspaces  # noqa: E402
from mha.models.catalog import DECODER_MODEL, DEFAULT_MODEL, GEMMA_MODEL, load_model  # noqa: E402
from mha.studies import (
    side_by_side,  # noqa: E402
    verdict,  # noqa: E402
)

OUT = Path(__file__).resolve().parents[1] / "mha" / side_by_side.FILE


def main() -> None:
    torch.set_num_threads(os.cpu_count() or 1)
    rows = []
    for name in (DEFAULT_MODEL, DECODER_MODEL, GEMMA_MODEL):
        t0 = time.perf_counter()
        model = load_model(name)
        v = verdict.shipped_verdict(model)
        if v is None:
            sys.exit(f"{name} has no shipped verdict for these weights: run scripts/sharing_verdict.py {name} first")
        rows.append(side_by_side.measure(model, subspaces.pool_runs(model), v))
        print(f"{name}: {rows[-1]} ({time.perf_counter() - t0:.0f} s)")
        del model, v
        gc.collect()
    OUT.write_text(side_by_side.to_json(rows) + "\n", encoding="utf-8")
    print(f"written to {OUT}")


if __name__ == "__main__":
    main()
