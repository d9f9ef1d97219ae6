"""Time the from-scratch MultiHeadAttention against torch.nn.MultiheadAttention, same process.

Both return per-head weights (need_weights=True, average_attn_weights=False). Prints the
median of N runs after warm-up, and the ratio scratch / torch (target <= 1.0).

    python bench/bench_attention.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics

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
            # interleave the two so that machine noise hits both alike
            t_ours, t_ref = [], []
            for _ in range(3):
                t_ours.append(median_seconds(lambda ours=ours, x=x: ours(x), args.runs // 3 + 1, warmup=3))
                t_ref.append(
                    median_seconds(
                        lambda ref=ref, x=x: ref(x, x, x, need_weights=True, average_attn_weights=False),
                        args.runs // 3 + 1,
                        warmup=3,
                    )
                )
        a, b = statistics.median(t_ours), statistics.median(t_ref)
        print(f"{B:>2} {T:>4} {C:>4} {H:>3} {a * 1e3:>11.3f} {b * 1e3:>9.3f} {a / b:>6.2f}")


if __name__ == "__main__":
    main()
