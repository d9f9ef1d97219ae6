"""Every page on the real grouped-query decoder (SmolLM2-135M-Instruct, converted once by
python -m mha.models.fetch): no traceback, no word of BERT's special tokens or shape, and the numbers a
page states checked against computations written here, independently of the page's own."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from conftest import false_claims, held_page_namespaces, plotly_array
from streamlit.testing.v1 import AppTest

from livetest import ROOT
from mha.analyses import atlas, build, sinks
from mha.models.catalog import DECODER_MODEL
from mha.models.llama import LoadedLlama
from mha.tasks import next_token
from ui.pages import PAGES

TEXT = "The chef who ran the small kitchen tasted the soup because it was far too salty."
BERT_WORDS = re.compile(r"\[CLS\]|\[SEP\]|MiniLM|\b384\b|6 layers|12 heads|72 heads")


@pytest.fixture(scope="module")
def run(smol):
    return smol.attend(TEXT)


def app() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params["model"] = DECODER_MODEL
    at.query_params["text"] = TEXT
    return at.run()


def page_text(at: AppTest) -> str:
    """The page's words, without What may be shared's section on three named models (BERT among them)."""
    from mha.lesson import side_by_side_words
    from mha.studies import side_by_side

    three = set(side_by_side_words.words(side_by_side.shipped()))
    parts = []
    for kind in ("markdown", "caption", "info", "warning", "success", "error", "title", "subheader", "header"):
        parts += [str(getattr(e, "value", "")) for e in at.get(kind) if str(getattr(e, "value", "")) not in three]
    parts += [f"{m.label} {m.value} {m.proto.delta} {m.proto.help}" for m in at.get("metric")]
    parts += [e.label for e in at.expander]
    return "\n".join(parts)


@pytest.fixture(scope="module")
def walked():
    """Every page of one session on the decoder: (page path -> its text), the app after the walk.
    After each page, the page namespaces still alive (none: conftest.held_page_namespaces)."""
    at = app()
    assert at.session_state["model"] == DECODER_MODEL, [e.value for e in at.error]
    texts = {}
    for p in PAGES:
        at.switch_page(p.path).run()
        assert not at.exception, (p.path, [e.value for e in at.exception])
        texts[p.path] = page_text(at)
        assert not held_page_namespaces(), f"{p.path}: the session holds the page's namespace"
    return texts, at


def test_every_page_runs_on_the_decoder_without_bert_words(walked, smol):
    """No BERT word, and no sentence its traits deny (conftest.false_claims: on this grouped model,
    no head given a W^K of its own)."""
    texts, _ = walked
    for path, text in texts.items():
        assert text.strip(), path
        found = BERT_WORDS.findall(text)
        assert not found, (path, found)
        assert not false_claims(text, smol.traits), (path, false_claims(text, smol.traits))


def test_the_heads_page_names_the_first_token_sink_with_its_share(walked, run):
    text = walked[0]["app_pages/bert_heads.py"]
    assert "Attention heads" in text and "lower triangle" in text and "heads 0-2, 3-5, 6-8" in text
    said = re.search(
        r"put (\d+)% of their weight on the first token, “The”.*?the (\d+) queries.*?(\d+) of 270 heads", text
    )
    assert said, text
    rows = run.attentions[:, :, 1:, :]  # (L, H, T-1, T): every query but the first, which can read only itself
    on_first = rows[..., 0].mean(-1)  # (L, H)
    assert int(said.group(1)) == round(100 * on_first.mean())
    assert int(said.group(2)) == run.n_tokens - 1
    assert int(said.group(3)) == int((on_first > 0.5).sum())


def test_sink_share_on_known_maps():
    T = 5
    first = np.zeros((1, 2, T, T))
    first[..., 0] = 1.0  # every query reads the first token only
    s = sinks.sink_share(first, [0], causal=True)
    assert s.queries == T - 1 and s.mean == 1.0 and s.heads_over(0.5) == 2
    flat = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]  # causal, even over what a query sees
    s = sinks.sink_share(flat[None, None], [0], causal=True)
    assert s.mean == pytest.approx(np.mean([1 / (i + 1) for i in range(1, T)]))  # a flat head is no sink
    assert s.heads_over(0.5) == 0


def test_causal_atlas_measures_on_known_maps():
    T = 6
    prev = np.zeros((T, T))
    prev[0, 0] = 1.0
    prev[np.arange(1, T), np.arange(T - 1)] = 1.0  # every query reads the token before it
    flat = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    m = atlas.head_measures(np.stack([prev, flat])[None], ["a"] * T, causal=True)
    assert "to [CLS]" not in m and "to next" not in m
    assert m["to previous"][0, 0] == 1.0 and m["to the first token"][0, 0] == pytest.approx(1 / (T - 1))
    assert m["entropy / ln T"][0, 1] == pytest.approx(1.0)  # even over the keys a query can read: 1
    assert m["entropy / ln T"][0, 0] == pytest.approx(0.0, abs=1e-9)
    assert list(atlas.pattern_labels(m, T)[0]) == ["diagonal", "heterogeneous"]


def test_next_token_loss_batched_equals_one_text_at_a_time(smol):
    """next_token's right-padded batches against CausalLM.next_token_loss, which runs each text
    alone and averages over every predicted token: with and without removed heads."""
    items = list(next_token.texts())[:12]
    assert next_token.evaluate(smol, items).loss == pytest.approx(smol.next_token_loss(items), abs=1e-3)
    mask = np.ones((smol.n_layers, smol.n_heads))
    mask[0] = 0.0  # layer 0's heads: the loss rises from about 5 to 7 nats (4 pool sentences)
    mask[17, 4] = 0.0
    batched = next_token.evaluate(smol, items, head_mask=mask).loss
    assert batched == pytest.approx(smol.next_token_loss(items, head_mask=mask), abs=1e-3)
    assert batched > next_token.evaluate(smol, items).loss + 0.05  # removing layer 0's heads costs
    whole = next_token.evaluate(smol)
    assert whole.n == len(next_token.texts()) and whole.perplexity == pytest.approx(np.exp(whole.loss))
    # the texts are human-written and never chosen by the model: the rank and score sets do not overlap
    assert not set(next_token.texts("rank")) & set(next_token.texts("score"))


def test_a_decoder_layer_sees_the_order_only_through_its_mask_and_rotation(smol, run):
    s = build.build_stages(smol, run, 5, smol.n_heads, shuffle=True, seed=3)
    e = s.order_errors
    assert e["as the model has it"] > 1e-2 and e["without the causal mask"] > 1e-2
    assert e["without the mask and the rotary positions"] < 1e-4
    assert s.parity is None  # shuffled, the model's own weights are not only reordered
    plain = build.build_stages(smol, run, 5, smol.n_heads)
    assert plain.parity < 1e-5 and plain.unrotated.shape == (smol.n_heads, run.n_tokens, run.n_tokens)


def test_collapse_page_task_is_the_next_token_loss(walked, smol):
    at = walked[1]
    at.switch_page("app_pages/collapse.py").run()
    task = next(m for m in at.metric if m.label.startswith("Task: next-token loss"))
    shown = float(task.value)
    layer = int(at.session_state["layer"])
    from mha.analyses import collapse
    from mha.analyses.collapse import CollapsePath

    path = CollapsePath(float(at.session_state["collapse_alpha"]), "scaled", ("k", "q", "v"))
    replace = {layer: collapse.module_at(smol.scratch_layer(layer), path)}
    items = list(next_token.texts())
    assert shown == pytest.approx(smol.next_token_loss(items, replace=replace), abs=2e-3)
    charts = [c for c in at.get("plotly_chart")]
    assert charts  # the pictures of the layer's heads are drawn
    first = plotly_array(__import__("json").loads(charts[0].proto.spec)["data"][0]["z"])
    assert np.isfinite(first).all()


def test_gradient_importance_matches_finite_differences(tmp_path):
    """Michel et al.'s |d loss / d gate| on a small random Llama against a central difference of
    the loss in one gate (independent: two forward passes, no autograd)."""
    from mha.models.llama import save_random_llama

    small = LoadedLlama.load(save_random_llama(tmp_path / "llama", layers=2, heads=4, kv_heads=2, width=32), "random")
    text = "A cat sat on the mat."
    grad = next_token.gradient_importance(small, [text])
    eps = 0.05  # central differences: error O(eps^2); float32 noise of a 10-nat loss needs a wide step
    for layer, head in ((0, 1), (1, 3)):
        up, down = torch.ones(2, 4), torch.ones(2, 4)
        up[layer, head], down[layer, head] = 1 + eps, 1 - eps
        diff = (small.next_token_loss([text], head_mask=up) - small.next_token_loss([text], head_mask=down)) / (2 * eps)
        assert grad[layer, head] == pytest.approx(abs(diff), rel=2e-2, abs=1e-5)


def test_causal_measures_count_only_what_a_query_can_read():
    """Score spread, entropy share and head diversity of a causal map leave out the keys a query
    cannot read and the first query (which has no choice); known answers."""
    from mha.analyses import metrics

    T = 6
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(2, T, T))
    scores[:, np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] = 1e3  # masked keys: must not count
    want = np.mean([scores[:, i, : i + 1].std(-1) for i in range(1, T)], axis=0)
    np.testing.assert_allclose(metrics.score_spread(scores, causal=True), want)
    even = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]  # even over what each query sees
    assert metrics.entropy_share(even[None], causal=True) == pytest.approx(1.0)
    assert metrics.entropy_share(even[None]) < 0.8  # read as BERT's, the same map looks sharp
    sharp = np.eye(T)  # each query reads itself: two copies are identical heads, whatever row 0 does
    assert metrics.mean_off_diagonal(metrics.head_diversity(metrics.causal_rows(np.stack([sharp, sharp]), True))) == 0
    prev = np.zeros((T, T))
    prev[0, 0] = 1.0
    prev[np.arange(1, T), np.arange(T - 1)] = 1.0
    both = metrics.head_diversity(metrics.causal_rows(np.stack([sharp, prev]), True))
    assert both[0, 1] == pytest.approx(np.log(2))  # every counted row: two disjoint keys, JS = ln 2
    assert metrics.head_diversity(np.stack([sharp, prev]))[0, 1] == pytest.approx(np.log(2) * (T - 1) / T)


def test_lesson_states_the_decoders_groups_after_the_prediction_and_in_the_recap(smol, run):
    """Step 6 (after the prediction) and the recap say what a grouped-query model shares, with its
    heads' diversity within and across K/V groups on the sentence, checked here with scipy's
    Jensen-Shannon distance (squared: the divergence, nats), and its K/V cache per token."""
    from scipy.spatial.distance import jensenshannon

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    for k, v in {"model": DECODER_MODEL, "text": TEXT, "step": "6", "lesson_share": "1"}.items():
        at.query_params[k] = v
    at.run()
    [r for r in at.radio if "predict" in str(r.key)][0].set_value(1).run()
    assert not at.exception, [e.value for e in at.exception]
    (said,) = [i.value for i in at.info if "What today's decoders answer" in i.value]
    layer = int(re.search(r"on your sentence in layer (\d+)", said).group(1))
    within, across = (float(x) for x in re.search(r"differ by ([\d.]+) .* by ([\d.]+);", said).groups())
    H, G, D = smol.n_heads, smol.traits.kv_groups, smol.d_model // smol.n_heads
    a = run.attentions[layer].astype(np.float64)  # (H, T, T); row 0 reads one key: left out
    js = {
        (i, j): np.mean([jensenshannon(a[i, q], a[j, q]) ** 2 for q in range(1, a.shape[1])])
        for i in range(H)
        for j in range(i + 1, H)
    }
    group = [h // (H // G) for h in range(H)]
    mine_within = np.mean([v for (i, j), v in js.items() if group[i] == group[j]])
    mine_across = np.mean([v for (i, j), v in js.items() if group[i] != group[j]])
    assert abs(within - mine_within) <= 6e-4 and abs(across - mine_across) <= 6e-4, (
        within,
        mine_within,
        across,
        mine_across,
    )
    per_token = [smol.n_layers * 2 * g * D * 2 for g in (G, H, 1)]  # K and V, every layer, fp16
    assert (
        f"is {per_token[0] / 1024:g} KiB per token (fp16), against {per_token[1] / 1024:g} KiB with a K and V per "
        f"head and {per_token[2] / 1024:g} KiB with one" in said
    )
    recap = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    longer = f"{TEXT} {TEXT}"  # 36 tokens: the ladder's whole-model runs would pass 2e10 multiply-adds here
    for k, v in {"model": DECODER_MODEL, "text": longer, "step": "recap", "layer": "0"}.items():
        recap.query_params[k] = v
    recap.run()
    assert not recap.exception, [e.value for e in recap.exception]
    assert any("What today's decoders answer" in m.value for m in recap.markdown)
    # no button for sentence cosines the recap never shows on a grouped model (its ladder has no MHA rung)
    assert not [b.label for b in recap.button if "whole model" in b.label or "Measure the rungs" in b.label]


def test_step_ones_feedback_says_when_a_causal_token_gives_most_to_itself(smol):
    """A causal query can read itself, and a head may give it most of its weight: the feedback's
    list names that word "(itself)" (the walk's sentence: "she" at 12 gives itself 87%)."""
    from mha.lesson import answers

    run = smol.attend(
        "The lawyer told the judge that she would appeal the ruling because she believed the ruling was unfair."
    )
    query, _ = answers.query_rule(run.tokens, run.traits)
    one = answers.one_query(run, query)
    why = answers.spread_question(run, one).why
    keys = [key for key, *_ in one.majority[:6]]
    best_self = float(run.attentions[:, :, query, query].max())  # the most any head gives the query itself
    assert (query in keys) == ("(itself)" in why)
    assert best_self > 0.5 and f"she” ({query}) (itself)" in why


def test_the_decoders_final_states_are_taken_before_its_final_norm(smol):
    """The sharing page says its decoder cosine reads the last layer's output before the final
    norm, naming the norm from the traits: the run's last states, put through the model's own
    final RMSNorm, are Transformers' last_hidden_state (which is after it)."""
    text = "The lawyer told the judge that she would appeal the ruling."
    run = smol.attend(text)
    ids, _ = smol.encode_batch([text])  # (1, T)
    with torch.inference_mode():
        after = smol.model.model(ids).last_hidden_state[0]  # (T, C): after the final norm
        normed = smol.model.model.norm(torch.as_tensor(run.hidden_states[-1])[None])[0]
    torch.testing.assert_close(normed.float(), after.float(), atol=2e-4, rtol=1e-4)
    assert not np.allclose(run.hidden_states[-1], after.numpy(), atol=1e-2)  # before: not the same states
    assert smol.traits.norm == "RMSNorm"  # the name the page reads from the traits


def test_the_sharing_page_words_what_one_w_q_leaves_on_a_grouped_model(walked, smol, run):
    """On a grouped model one W^Q leaves one map per K/V group, not one per head: the page says so, and
    the rung's maps, counted here, are exactly G distinct ones. Pre-norm: the residual carries on as it is;
    no W^O bias: removing the layer's attention leaves no output to compare."""
    from mha.analyses import ladder

    text = walked[0]["app_pages/sharing.py"]
    H, G = smol.n_heads, smol.traits.kv_groups
    assert f"compute one map: {G} maps for {H} heads" in text and "a $W^K$ of its own for each head" not in text
    q_only = next(r for r in ladder.rungs(H, False, G) if r.heads == (1, G, G))
    layer = int(walked[1].session_state["layer"])
    maps = ladder.rung_attention(smol, run, layer, q_only)  # (H, T, T)
    distinct = {tuple(np.round(m, 5).ravel()) for m in maps}
    assert len(distinct) == G
    assert "which carry on unchanged" in text and "post-norm" not in text
    assert f"leaves no output at all ({smol.traits.who}'s $W^O$ has no bias)" in text and not smol.traits.bias
