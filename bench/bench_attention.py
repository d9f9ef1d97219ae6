"""Time the from-scratch MultiHeadAttention against torch.nn.MultiheadAttention, same process.

Both return per-head weights (need_weights=True, average_attn_weights=False). Each sample times
a batch of calls long enough (about 20 ms) for the clock, the two alternate sample by sample so
that machine noise hits both alike, and the ratio is the median of the paired ratios
scratch / torch (target <= 1.05); the times are the medians of the samples.

    python bench/bench_attention.py [--runs 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from common import median_seconds

from mha import MultiHeadAttention
from mha.core.reference import to_torch_mha

SHAPES = [(1, 32, 384, 12), (1, 128, 768, 12), (8, 512, 768, 12)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, threads={torch.get_num_threads()}, runs={args.runs}")
    print(f"{'B':>2} {'T':>4} {'C':>4} {'H':>3} {'scratch ms':>11} {'torch ms':>9} {'ratio':>6}")
    for B, T, C, H in SHAPES:
        ours = MultiHeadAttention(C, H).eval()
        ref = to_torch_mha(ours).eval()
        x = torch.randn(B, T, C)
        with torch.inference_mode():
            calls = (
                (lambda ours=ours, x=x: ours(x)),
                (lambda ref=ref, x=x: ref(x, x, x, need_weights=True, average_attn_weights=False)),
            )
            inner = max(1, round(0.02 / median_seconds(calls[1], 5, warmup=3)))  # calls per sample: ~20 ms
            samples = [[], []]
            for _ in range(args.runs):
                for fn, out in zip(calls, samples):
                    t0 = time.perf_counter()
                    for _ in range(inner):
                        fn()
                    out.append((time.perf_counter() - t0) / inner)
        a, b = statistics.median(samples[0]), statistics.median(samples[1])
        ratio = statistics.median(o / r for o, r in zip(*samples))
        print(f"{B:>2} {T:>4} {C:>4} {H:>3} {a * 1e3:>11.3f} {b * 1e3:>9.3f} {ratio:>6.2f}")


if __name__ == "__main__":
    main()
