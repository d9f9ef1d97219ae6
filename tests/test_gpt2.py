"""GPT-2, the third family, on a random GPT-2 of GPT-2 small's shape (12 layers x 12 heads x 768,
1024 positions), built and saved with Transformers at test time (GPT-2's own weights and tokenizer
are on the Hub only) and opened as the "local" model: its traits read from its config.json, the
from-scratch layers against Transformers' eager attention on every layer, its fused c_attn read as
views, and every page and lesson step with no sentence that is false for its structure."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import false_claims, traits_page_text
from streamlit.testing.v1 import AppTest

from livetest import ROOT
from mha.lesson import steps
from mha.models.gpt2 import save_random_gpt2
from mha.models.traits import Traits
from ui import cache
from ui.pages import PAGES

TEXT = "The chef who ran the small kitchen tasted the soup because it was far too salty."


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    """The random GPT-2, loaded once through the app's own cache (the pages below share it)."""
    path = save_random_gpt2(tmp_path_factory.mktemp("gpt2"))
    mp = pytest.MonkeyPatch()
    mp.setenv("MHA_MODEL_DIR", path)
    cache.clear()  # results kept for "local" belong to another directory
    yield cache.load_model("local")
    mp.undo()
    cache.clear()


def test_the_traits_are_read_from_the_config(gpt2):
    """Every trait against the saved config.json, read here with json (not through Transformers)."""
    cfg = json.loads((Path(gpt2.model.config._name_or_path) / "config.json").read_text())
    t = gpt2.traits
    assert cfg["model_type"] == "gpt2" and t.who == "GPT-2"
    assert (t.n_layers, t.n_heads, t.d_model) == (cfg["n_layer"], cfg["n_head"], cfg["n_embd"]) == (12, 12, 768)
    assert t.kv_groups == t.n_heads and not t.grouped and t.kv_phrase == "its own"
    assert t.causal and t.positions == "learned" and t.norm == "LayerNorm" and t.pre_norm and not t.gated_mlp
    assert t.task == "next-token" and t.parking == "first" and t.sink_name == "the first token"
    assert t.rope_theta is None and t.mlp_width == 4 * 768


def test_every_layer_matches_transformers_eager_attention(gpt2):
    """The from-scratch layer on the model's own tensors against GPT2Attention (eager, causal mask)
    on every layer: weights and output within 1e-5; the whole run's logits equal the model's."""
    run = gpt2.attend(TEXT, "Then it rained.")
    worst = {}
    for layer in range(gpt2.n_layers):
        ref_out, ref_w = gpt2.reference_attention(run, layer)
        out, w = gpt2.scratch_layer(layer)(run.layer_input(layer))
        worst[layer] = max(float((w - ref_w).abs().max()), float((out - ref_out).abs().max()))
        np.testing.assert_allclose(run.attentions[layer], w[0].numpy(), atol=1e-5)
        assert np.allclose(np.triu(run.attentions[layer], 1), 0)  # causal: nothing above the diagonal
    assert max(worst.values()) <= 1e-5, worst
    ids = torch.tensor([run.input_ids])
    with torch.inference_mode():
        ref = gpt2.model(ids).logits  # Transformers' own forward, final LayerNorm and tied head
        states, _ = gpt2.run_layers(gpt2.embed(ids))
        assert float((gpt2.logits(states[-1]) - ref).abs().max()) < 1e-4


def test_the_fused_projection_is_read_in_place(gpt2):
    """W^Q, W^K and W^V are three slices of one Conv1D weight (C x 3C): the from-scratch layer reads
    them as views of that tensor (no copy), 12 distinct heads, causal, no rotary positions."""
    layer = gpt2.scratch_layer(3)
    fused = gpt2.model.transformer.h[3].attn.c_attn.weight  # (C, 3C), applied as x W + b
    C = gpt2.d_model
    assert layer.role_heads == (12, 12, 12) and layer.causal and layer.rope_theta is None
    for r, proj in enumerate((layer.q_proj, layer.k_proj, layer.v_proj)):
        assert proj.weight.untyped_storage().data_ptr() == fused.untyped_storage().data_ptr()
        assert torch.equal(proj.weight, fused[:, r * C : (r + 1) * C].T)


GROUPED = Traits("SmolLM2-135M-Instruct", "SmolLM2", "", 30, 9, 576, 3, True, "rotary", "RMSNorm", True, True, 1536,
                 "next-token", "first", rope_theta=1e5)  # fmt: skip
PER_HEAD = Traits("all-MiniLM-L6-v2", "BERT", "", 6, 12, 384, 12, False, "learned", "LayerNorm", False, False, 1536,
                  "similarity", "special", ("[CLS]", "[SEP]"))  # fmt: skip


def test_the_claims_check_can_fail():
    """false_claims flags what it is for: rotary and group words on GPT-2's traits, [CLS] on a
    decoder's, a head's own W^K on a grouped model, and passes the same words on the right model."""
    gpt2 = Traits(
        "g", "GPT-2", "", 12, 12, 768, 12, True, "learned", "LayerNorm", True, False, 3072, "next-token", "first"
    )
    said = "Its queries are rotated by RoPE. Its 9 query heads share 3 K/V projections. It parks on [CLS]."
    assert len(false_claims(said, gpt2)) == 3
    assert len(false_claims(said, GROUPED)) == 1  # [CLS]
    assert false_claims("$W_0^Q, W_0^K$ and $W_1^Q, W_1^K$ are different matrices.", GROUPED)
    assert not false_claims("$W_0^Q, W_0^K$ and $W_1^Q, W_1^K$ are different matrices.", gpt2)


def test_lesson_step_3_and_the_recap_give_no_head_its_own_key_on_a_grouped_model():
    """With SmolLM2's structure (heads 0-2 share one W^K) step 3 and the recap say each head's own
    W_i^Q and its group's W^K; with a K per head (BERT's) they say W_i^K."""
    two_heads = next(s for s in steps.STEPS if s.key == "two-heads")
    for t in (GROUPED, PER_HEAD):
        shape = steps.Shape(12, t)
        said = two_heads.opening(shape) + "\n" + steps.STEPS[-1].opening(shape)
        assert not false_claims(said, t), false_claims(said, t)
        assert ("its group's $W^K$" in said) is t.grouped and ("W_i^K" in said) is not t.grouped


def test_every_page_and_lesson_step_on_gpt2(gpt2):
    """Every page and every lesson step on GPT-2 runs without a traceback and says nothing its
    traits deny (no rotary positions, no K/V groups, no [CLS] or [SEP]); the sharing page sets its
    12 K/V heads beside SmolLM2's 3."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params["model"] = "local"
    at.query_params["text"] = TEXT
    at.run()
    assert at.session_state["model"] == "local", [e.value for e in at.error]
    said = {}
    for page in PAGES:
        at.switch_page(page.path).run()
        assert not at.exception, (page.path, [e.value for e in at.exception])
        if page.file == "lesson.py":
            for n in range(1, len(steps.STEPS) + 1):
                at.session_state["step"] = n
                at.run()
                for radio in [r for r in at.radio if str(r.key).startswith("_w_q_")]:  # answered: the feedback shows
                    radio.set_value(0).run()
                assert not at.exception, (n, [e.value for e in at.exception])
                said[f"lesson step {n}"] = traits_page_text(at)
        said[page.path] = traits_page_text(at)
    for where, text in said.items():
        assert not false_claims(text, gpt2.traits), (where, false_claims(text, gpt2.traits))
    assert "GPT-2" in said["app_pages/overview.py"]
    order = f"lesson step {steps.number('order')}"
    assert "GPT-2's causal mask" in said[order] and "only reorder" in said[order]  # answered: its feedback was read
    sharing = said["app_pages/sharing.py"]
    assert "GPT-2 small" in sharing and "SmolLM2-135M" in sharing
