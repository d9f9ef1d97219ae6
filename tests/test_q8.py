"""The decoders' token tables kept as their GGUF files store them (mha/models/q8.py): one Q8_0 table
that is both the embedding and the LM head, its numbers exactly those Transformers dequantised (the
float32 copy on disk) and those the gguf package's own dequantiser reads from the file; the head's
logits and its blockwise cross-entropy against float32 and torch's cross_entropy; and the float32
table never read by a loaded model."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from torch.nn import functional as F

from mha.models import fetch, fetch_gemma, q8


def float32_rows(folder: Path, rows: np.ndarray) -> torch.Tensor:
    """(n, C) rows of the float32 table Transformers dequantised at conversion (model.safetensors),
    read a run of consecutive rows at a time (not the whole table)."""
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        table = f.get_slice("model.embed_tokens.weight")
        runs = np.split(rows, np.flatnonzero(np.diff(rows) != 1) + 1)  # consecutive runs of rows
        return torch.cat([table[int(r[0]) : int(r[-1]) + 1] for r in runs])


def ggufs_own(gguf: Path, rows: np.ndarray) -> np.ndarray:
    """(n, C) the rows as the gguf package dequantises the file's token_embd (not this project's code)."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    t = next(t for t in GGUFReader(str(gguf)).tensors if t.name == "token_embd.weight")
    return dequantize(np.asarray(t.data)[rows], t.tensor_type)


def resident_kb(path: Path) -> int:
    """kB of the file `path` in this process's memory, over every map of it (/proc/self/smaps)."""
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):  # a mapping's header: address range ... path
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


def check_table(model, folder: Path, gguf: Path | None, sample: np.ndarray) -> None:
    """One table for embedding and head (a structure, not equal values); its rows bit-identical to the
    float32 copy and (if `gguf`) to gguf's dequantiser; the model's float32 table never paged in."""
    embed, head = model.model.model.embed_tokens, model.model.lm_head
    assert isinstance(embed, q8.Q8Embedding) and isinstance(head, q8.Q8Head) and embed.table is head.table
    assert embed.table.codes.dtype == torch.int8 and embed.table.scales.dtype == torch.float16
    ids = torch.as_tensor(sample)
    mine = embed.table.rows(ids)
    assert torch.equal(mine, float32_rows(folder, sample))
    if gguf is not None:  # reading a GGUF parses its whole vocabulary: 12 s for Gemma 3's
        assert np.array_equal(mine.numpy(), ggufs_own(gguf, sample))
    with torch.inference_mode():
        model.attend("the embedding and the head both read the table")
    resident = resident_kb(folder / "model.safetensors")
    table_kb = embed.table.codes.numel() * 4 / 1024  # what the float32 table would take
    assert resident * 1024 < (folder / "model.safetensors").stat().st_size - 0.9 * table_kb * 1024, resident


def test_smollm2s_table_is_its_ggufs_own_numbers(smol):
    """SmolLM2's 49,152 rows, every one."""
    gguf = fetch._installed_gguf() or fetch.cache_dir() / fetch.GGUF  # where fetch found it
    check_table(smol, fetch.converted_dir(), gguf, np.arange(smol.model.config.vocab_size))


def test_the_head_and_its_cross_entropy_match_float32(smol):
    """Logits within 1e-5 of h @ W^T in float32, and the blockwise cross-entropy within 1e-5 of
    torch's on the full logits, for targets at the ends of the vocabulary and of its blocks."""
    head = smol.model.lm_head
    W = float32_rows(fetch.converted_dir(), np.arange(smol.model.config.vocab_size))  # (V, C)
    V = W.shape[0]
    h = torch.randn(37, W.shape[1], generator=torch.Generator().manual_seed(0))  # (P, C)
    target = torch.tensor([0, 1, V - 1, q8.BLOCK_ROWS - 1, q8.BLOCK_ROWS, 2 * q8.BLOCK_ROWS] * 6 + [V // 2])
    with torch.inference_mode():
        ref = h @ W.T  # (P, V)
        assert float((head(h) - ref).abs().max()) < 1e-5 * float(ref.abs().max())
        nats = head.nats(h, target)
    assert torch.allclose(nats, F.cross_entropy(ref, target, reduction="none"), atol=1e-5, rtol=1e-6)


def test_a_tiny_table_reads_blockwise_as_it_would_whole(monkeypatch):
    """Random codes and scales, blocks of 3 rows and 2 positions: forward and nats against the
    dequantised table, on more positions than one chunk and a vocabulary that is not a multiple."""
    g = torch.Generator().manual_seed(1)
    codes = torch.randint(-127, 128, (11, 64), generator=g, dtype=torch.int8)
    scales = (torch.rand(11, 2, generator=g) / 50).half()
    monkeypatch.setattr(q8, "BLOCK_ROWS", 3)
    monkeypatch.setattr(q8, "POSITIONS", 2)
    head = q8.Q8Head(q8.Q8Table(codes, scales))
    W = codes.float().view(11, 2, 32) * scales.float()[:, :, None]  # (V, 2, 32): scale x code
    W = W.view(11, 64)
    h = torch.randn(5, 64, generator=g)
    target = torch.tensor([0, 10, 3, 5, 9])
    assert torch.allclose(head(h), h @ W.T, atol=1e-6)
    assert torch.allclose(head.nats(h, target), F.cross_entropy(h @ W.T, target, reduction="none"), atol=1e-5)


@pytest.mark.parametrize("folder", ["smol", "gemma"])
def test_a_converted_copy_without_its_table_is_converted_again(folder, tmp_path, monkeypatch):
    """A copy converted before the table existed is incomplete: fetched again, not served without it."""
    monkeypatch.setenv(fetch.CACHE_ENV, str(tmp_path))
    where = fetch.converted_dir() if folder == "smol" else fetch_gemma.converted_dir()
    where.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", fetch_gemma.TERMS_FILE):
        (where / name).write_text("{}")
    complete = fetch.is_converted if folder == "smol" else fetch_gemma.is_converted
    assert not complete()
    (where / q8.TABLE).write_text("{}")
    assert complete()
