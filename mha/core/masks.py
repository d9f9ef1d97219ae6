"""Which keys each query may read: padding, the future on a causal layer, and keys beyond a sliding
window (Beltagy et al. 2020, "Longformer"; Jiang et al. 2023, "Mistral 7B"; Gemma 3's local layers),
as one bool mask. Transformers' sliding_window of W lets query t read keys t - W + 1..t."""

from __future__ import annotations

import torch


def attention_mask_for(
    attention_mask: torch.Tensor | None,
    T: int,
    causal: bool,
    device: torch.device | None = None,
    window: int | None = None,
) -> torch.Tensor | None:
    """Which keys each query may read, as a bool mask broadcastable to (B, H, T, T), or None.

    attention_mask: (B, T), 1 = real token, 0 = padding (a padded key is never read).
    causal: query t reads keys 0..t only (a decoder); otherwise every key (an encoder such as BERT).
    device: where the causal mask is made (the input's device).
    window: a sliding window of W keys: query t reads keys t - W + 1..t only (its own and the W - 1
    before it, Transformers' sliding_window); None = no window. Only with causal.
    """
    if window is not None and (not causal or not isinstance(window, int) or window < 1):
        raise ValueError(f"a sliding window is a positive whole number of keys on a causal layer, got {window!r}")
    mask = None
    if attention_mask is not None:
        if attention_mask.dim() != 2:
            raise ValueError(
                f"attention_mask must have shape (B, T) with 1 for tokens and 0 for padding, "
                f"got shape {tuple(attention_mask.shape)}"
            )
        mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
    if causal:
        lower = torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T): key <= query
        if window is not None and window < T:
            lower = lower.triu(1 - window)  # (T, T): and key > query - W
        mask = lower if mask is None else mask & lower  # (B, 1, T, T)
    return mask
