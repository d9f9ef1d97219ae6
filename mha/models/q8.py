"""A decoder's token table kept the way its GGUF file stores it: Q8_0, one int8 code per number and
one float16 scale per block of 32 (ggml's format). Each number is scale x code, so the float32 that
Transformers dequantises is reproduced exactly, from a quarter of the bytes: Gemma 3's table (262,144
tokens x 640) is 179 MB instead of 671 MB. The table is both the embedding and, tied, the LM head;
the head dequantises BLOCK_ROWS tokens at a time and never holds the float32 table.

convert (mha/models/fetch.py) writes the table beside the converted weights (write_table); a
loader swaps it in (attach). Checked against the float32 copy in tests/test_q8.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

TABLE = "token_table.q8_0.safetensors"  # beside model.safetensors in a converted folder
BLOCK = 32  # numbers per scale (ggml's QK8_0)
BLOCK_ROWS = 8192  # tokens dequantised at a time by the head: 21 MB of float32 for Gemma 3
POSITIONS = 1024  # positions at a time against one block in Q8Head.nats


def read_gguf_table(gguf: Path) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The GGUF's token_embd as (codes (V, C) int8, scales (V, C // BLOCK) float16), or None if it
    is not stored as Q8_0."""
    from gguf import GGMLQuantizationType, GGUFReader

    for t in GGUFReader(str(gguf)).tensors:
        if t.name == "token_embd.weight":
            if t.tensor_type != GGMLQuantizationType.Q8_0:
                return None
            raw = np.asarray(t.data)  # (V, n_blocks * 34) bytes: per block a float16 scale, then 32 int8
            V = raw.shape[0]
            blocks = raw.reshape(V, -1, 2 + BLOCK)  # (V, n_blocks, 34)
            scales = np.ascontiguousarray(blocks[:, :, :2]).view(np.float16)[:, :, 0]  # (V, n_blocks)
            codes = np.ascontiguousarray(blocks[:, :, 2:]).view(np.int8).reshape(V, -1)  # (V, C)
            return torch.from_numpy(codes), torch.from_numpy(np.ascontiguousarray(scales))
    return None


def dequantise(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """(n, C) float32 from codes (n, C) and scales (n, C // BLOCK): scale x code, exact in float32
    (an 11-bit scale times a 7-bit code)."""
    n, C = codes.shape
    blocks = codes.view(n, C // BLOCK, BLOCK).float() * scales.float()[:, :, None]  # (n, C / 32, 32)
    return blocks.view(n, C)


def write_table(gguf: Path, folder: Path, reference: torch.Tensor) -> bool:
    """Write the GGUF's Q8_0 token table into `folder` if it reproduces `reference` (V, C), the
    float32 table Transformers read, bit for bit; returns whether it was written."""
    from safetensors.torch import save_file

    table = read_gguf_table(gguf)
    if table is None:
        return False
    codes, scales = table
    if codes.shape != reference.shape:
        return False
    for start in range(0, codes.shape[0], BLOCK_ROWS):
        rows = slice(start, start + BLOCK_ROWS)
        if not torch.equal(dequantise(codes[rows], scales[rows]), reference[rows]):
            return False
    save_file({"codes": codes, "scales": scales}, str(Path(folder) / TABLE))
    return True


class Q8Table(nn.Module):
    """The token table as codes (V, C) int8 and scales (V, C // BLOCK) float16 (buffers: read-only)."""

    def __init__(self, codes: torch.Tensor, scales: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("codes", codes)
        self.register_buffer("scales", scales)

    @property
    def n_tokens(self) -> int:
        return self.codes.shape[0]

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """(*ids.shape, C) float32 rows of the tokens `ids`."""
        flat = ids.reshape(-1)
        return dequantise(self.codes[flat], self.scales[flat]).view(*ids.shape, self.codes.shape[1])

    def block(self, start: int) -> torch.Tensor:
        """(n, C) float32 rows start .. start + BLOCK_ROWS (fewer at the end)."""
        stop = min(start + BLOCK_ROWS, self.n_tokens)
        return dequantise(self.codes[start:stop], self.scales[start:stop])


class Q8Embedding(nn.Module):
    """An embedding lookup from a Q8Table, times `scale` as Gemma's scaled embedding does (1: none)."""

    def __init__(self, table: Q8Table, scale: torch.Tensor | None = None) -> None:
        super().__init__()
        self.table = table
        self.register_buffer("embed_scale", scale, persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.table.rows(ids)  # (*ids.shape, C)
        return x if self.embed_scale is None else x * self.embed_scale.to(x.dtype)


class Q8Head(nn.Module):
    """The tied LM head: logits h @ table^T, BLOCK_ROWS tokens at a time."""

    def __init__(self, table: Q8Table) -> None:
        super().__init__()
        self.table = table

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """(..., V) logits of h (..., C)."""
        return torch.cat([h @ self.table.block(s).T for s in range(0, self.table.n_tokens, BLOCK_ROWS)], dim=-1)

    def nats(self, h: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """(P,) cross-entropy of target (P,) under the logits of h (P, C), without the (P, V) logits:
        a running log-sum-exp over the blocks of the table, each block dequantised once and applied
        to POSITIONS positions at a time (a (POSITIONS, BLOCK_ROWS) float32 block of logits, 32 MB)."""
        P = h.shape[0]
        top = torch.full((P,), -torch.inf)  # the largest logit so far, per position
        total = torch.zeros(P)  # sum of exp(logit - top) so far
        picked = torch.zeros(P)  # the target's logit, once its block is reached
        for s in range(0, self.table.n_tokens, BLOCK_ROWS):
            w = self.table.block(s)  # (n, C)
            for p in range(0, P, POSITIONS):
                at = slice(p, p + POSITIONS)
                logits = h[at] @ w.T  # (p, n)
                new_top = torch.maximum(top[at], logits.max(1).values)
                total[at] = total[at] * torch.exp(top[at] - new_top) + torch.exp(logits - new_top[:, None]).sum(1)
                top[at] = new_top
                local = target[at] - s
                inside = (local >= 0) & (local < w.shape[0])
                hit = logits.gather(1, local.clamp(0, w.shape[0] - 1)[:, None])[:, 0]
                picked[at] = torch.where(inside, hit, picked[at])
        return top + torch.log(total) - picked


def attach(model: nn.Module, folder: str | Path) -> bool:
    """Swap a causal LM's tied embedding and head (model.model.embed_tokens, model.lm_head) for the
    Q8_0 table in `folder`, if there is one; returns whether it did. The float32 table stays unread on
    disk (memory-mapped pages that are never touched take no memory)."""
    path = Path(folder) / TABLE
    laid_out = hasattr(model, "lm_head") and hasattr(getattr(model, "model", None), "embed_tokens")
    if not (path.is_file() and laid_out and getattr(model.config, "tie_word_embeddings", False)):
        return False
    from safetensors.torch import load_file

    stored = load_file(str(path))
    table = Q8Table(stored["codes"], stored["scales"])
    old = model.model.embed_tokens
    if tuple(table.codes.shape) != tuple(old.weight.shape):
        return False
    model.model.embed_tokens = Q8Embedding(table, getattr(old, "embed_scale", None))
    model.lm_head = Q8Head(table)
    return True
