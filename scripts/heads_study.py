"""Write the bundled model's "Do we need every head?" study into mha/data/heads_study.json, so that
no visitor waits for it (the page uses it only if it was computed on exactly the loaded weights,
the pair files and the study's settings: mha.tasks.pruning.shipped_study). Run it again after changing
the study's code, settings or the pairs; tests/test_pruning.py recomputes part of the file.

    python scripts/heads_study.py
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from mha.models.catalog import load_model  # noqa: E402
from mha.tasks import pruning  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "mha" / pruning.STUDY_FILE


def main() -> None:
    bert = load_model()
    torch.set_num_threads(os.cpu_count() or 1)
    t0 = time.perf_counter()
    study = pruning.heads_study(
        bert, progress=lambda done, total: print(f"\r{done} of {total} model runs", end="", file=sys.stderr)
    )
    print(file=sys.stderr)
    OUT.write_text(pruning.study_to_json(study, pruning.study_stamp(bert)) + "\n", encoding="utf-8")
    print(
        f"{bert.name}: study in {time.perf_counter() - t0:.1f} s, written to {OUT.relative_to(OUT.parents[2])}: "
        + ", ".join(
            f"held out on {h.name}: {h.can_go()} (strictly {pruning.seed_spread(h.strict)})" for h in study.held_out
        )
        + f"; in sample {study.in_sample.can_go()}; random {sorted(study.random_can_go())} heads can go"
    )


if __name__ == "__main__":
    main()
