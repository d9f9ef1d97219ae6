"""Multi-query and grouped-query attention on the real bundled weights: the conversion, the
uptraining, the ladder's measures; the cached model stays untouched."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from conftest import SENTENCES, weights_digest

from mha import MultiHeadAttention
from mha.analyses import ladder, uptrain
from mha.models.structures import Structure


@pytest.fixture(scope="module")
def run(bert):
    return bert.attend(SENTENCES[0])


def test_group_kv_mean_pools_each_group_and_keeps_queries(bert):
    layer = bert.scratch_layer(2)
    g4 = ladder.group_kv(layer, 4)
    assert g4.role_heads == (12, 4, 4) and g4.k_proj.weight.shape == (4 * 32, 384)
    torch.testing.assert_close(g4.q_proj.weight, layer.q_proj.weight)
    torch.testing.assert_close(g4.k_proj.weight[32:64], layer.k_proj.weight[96:192].reshape(3, 32, 384).mean(0))
    torch.testing.assert_close(g4.v_proj.bias[:32], layer.v_proj.bias[:96].reshape(3, 32).mean(0))
    assert ladder.group_kv(g4, 2).role_heads == (12, 2, 2)  # a grouped module can be pooled further


def test_group_kv_of_heads_that_already_share_changes_nothing(bert, run):
    x = torch.from_numpy(run.hidden_states[1]).unsqueeze(0)
    g3 = ladder.group_kv(bert.scratch_layer(1), 3)
    again = ladder.group_kv(g3, 3)
    for name, value in g3.state_dict().items():
        torch.testing.assert_close(again.state_dict()[name], value, rtol=0, atol=1e-7)
    # a distinct module whose K/V heads are equal within each group of 4: pooling is the identity
    torch.manual_seed(0)
    m = MultiHeadAttention(48, 8).eval()
    with torch.no_grad():
        for proj in (m.k_proj, m.v_proj):
            proj.weight.copy_(proj.weight.view(2, 4, 6, 48)[:, :1].expand(2, 4, 6, 48).reshape(48, 48))
            proj.bias.copy_(proj.bias.view(2, 4, 6)[:, :1].expand(2, 4, 6).reshape(48))
        y = torch.randn(1, 7, 48)
        torch.testing.assert_close(ladder.group_kv(m, 2)(y)[0], m(y)[0], rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        torch.testing.assert_close(again(x)[0], g3(x)[0], rtol=1e-5, atol=1e-6)


def test_uptraining_brings_the_layer_closer_and_is_deterministic(bert):
    before_digest = weights_digest(bert.model)
    texts = uptrain.generated_sentences(200, seed=1)
    assert texts == uptrain.generated_sentences(200, seed=1) and len(set(texts)) > 150
    inputs = bert.layer_inputs(texts, 5)
    assert inputs[0].shape[0] == 200 and inputs[1].sum(1).min() >= 5
    original = bert.scratch_layer(5)
    converted = ladder.group_kv(original, 4)
    seen = []
    a = uptrain.uptrain(original, converted, inputs, steps=60, progress=seen.append, every=0.0)
    b = uptrain.uptrain(original, converted, inputs, steps=60)
    assert a.after < a.before / 2 and a.losses == b.losses and a.after == b.after
    assert [p.step for p in seen] == list(range(1, 61)) and seen[-1].fraction == 1.0
    with torch.no_grad():  # the caller's converted module is not trained in place
        torch.testing.assert_close(converted.k_proj.weight, ladder.group_kv(original, 4).k_proj.weight)
    assert weights_digest(bert.model) == before_digest
    with pytest.raises(ValueError, match="steps"):
        uptrain.uptrain(original, converted, inputs, steps=0)


def test_ladder_measures_on_the_real_layer(bert, run):
    rungs = ladder.rungs(bert.n_heads)
    assert [r.name for r in rungs] == [
        "MHA",
        "GQA-6",
        "GQA-4",
        "GQA-3",
        "GQA-2",
        "MQA",
        "shared Q/K/V",
        "shared Q, K",
        "shared Q",
    ]
    m = {r.name: ladder.rung_measures(bert, run, 4, r) for r in rungs}
    C, H = bert.d_model, bert.n_heads
    for r in rungs:  # every rung's count is its structure's: a shared projection is one matrix
        layer = r.module(bert.scratch_layer(4))
        assert layer.role_heads == r.heads, r.name
        assert m[r.name].parameters == r.parameter_count(C) == MultiHeadAttention.parameter_count(C, H, heads=r.heads)
    # shared Q and K with per-head V: two C x D matrices instead of two C x C (it counted as MHA's 591,360)
    assert m["shared Q, K"].parameters == m["MHA"].parameters - 2 * ((C * C + C) - (C * 32 + 32)) == 320_320
    assert m["shared Q, K"].kv_cache == 6 * (1 + 12) * 32 * 2  # a decoder caches one K and 12 Vs
    assert m["MHA"].drift == pytest.approx(0, abs=1e-6) and m["MHA"].sentence_cosine == pytest.approx(1, abs=1e-5)
    params = [m[n].parameters for n in ("MHA", "GQA-6", "GQA-4", "GQA-3", "GQA-2", "MQA", "shared Q/K/V")]
    assert params == sorted(params, reverse=True) and len(set(params)) == len(params)
    assert m["MQA"].parameters == MultiHeadAttention.parameter_count(384, 12, (12, 1, 1))
    assert m["shared Q"].diversity > 1e-3  # one W^Q alone: the per-head keys keep the maps apart
    assert m["MHA"].kv_cache == 2 * 6 * 12 * 32 * 2 and m["MQA"].kv_cache == m["MHA"].kv_cache // 12
    # sharing K and V keeps different maps; sharing Q and K makes them identical
    assert m["MQA"].diversity > 1e-3 and m["shared Q, K"].diversity < 1e-9 and m["shared Q/K/V"].diversity < 1e-9
    for name, r in m.items():
        assert 0 <= r.drift <= np.log(2) + 1e-9 and -1 <= r.sentence_cosine <= 1 + 1e-6, name


def test_kv_cache_from_real_configs():
    """Bytes per token and at 4k and 32k tokens, each against the formula written here: layers x (K + V
    heads) x d_k x 2 bytes per token, a sliding layer's tokens capped at its window, MLA's latent
    (kv_lora_rank + qk_rope_head_dim) per layer in place of K and V."""
    from mha.models import structures

    s = {x.name: x for x in structures.public()}
    llama, mistral, deepseek = s["Llama-3-8B"], s["Mistral-7B-v0.1"], s["DeepSeek-V3"]
    assert llama.per_token() == 32 * 2 * 8 * 128 * 2 == 128 * 1024
    assert llama.cache_bytes(32768) == 32 * 2 * 8 * 128 * 2 * 32768  # 4 GiB: no window
    assert mistral.cache_bytes(4096) == llama.cache_bytes(4096) and mistral.cache_bytes(32768) == 32 * 2048 * 2 * 4096
    assert deepseek.per_token() == 61 * (512 + 64) * 2 and deepseek.cache_bytes(32768) == 61 * 576 * 2 * 32768
    gemma = structures.from_config(
        "Gemma 3 270M",  # its config.json's fields (mha/models/fetch_gemma.py converts it)
        {
            "num_hidden_layers": 18,
            "num_attention_heads": 4,
            "num_key_value_heads": 1,
            "head_dim": 256,
            "hidden_size": 640,
            "sliding_window": 512,
            "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 3,
        },
    )
    assert gemma.per_token() == 18 * 2 * 1 * 256 * 2 and gemma.sliding == 15
    assert gemma.cache_bytes(32768) == 3 * 1024 * 32768 + 15 * 1024 * 512  # 103.5 MiB, not 576 MiB
    assert gemma.cache_bytes(300) == gemma.per_token() * 300  # shorter than the window: no cap
    rows = {r["model"]: r for r in ladder.built_cache_table([gemma, deepseek, mistral])}
    assert rows["Gemma 3 270M"]["at 32,768 tokens"] == ladder.size(3 * 1024 * 32768 + 15 * 1024 * 512) == "104 MiB"
    assert rows["Gemma 3 270M"]["K/V cache per token, as built"] == "18 KiB"
    assert rows["Gemma 3 270M"]["with a K and V per head"] == ladder.size(18 * 2 * 4 * 256 * 2) == "72 KiB"
    assert rows["DeepSeek-V3"]["K/V heads per layer"] == "none: a latent of 576 values"
    assert rows["Mistral-7B-v0.1"]["at 32,768 tokens"] == "512 MiB"
    said = ladder.built_cache_words([gemma, deepseek, mistral])
    assert "Gemma 3 270M keeps 1 K/V head for its 4 query heads, 1/4 of the cache" in said
    assert (
        "its 15 sliding-window layers keep only their last 512 tokens, so at 32,768 tokens its cache is 104 MiB, "
        "not 576 MiB" in said
    )
    assert "DeepSeek-V3 caches no head's K or V but one latent of 576 values per layer" in said


def test_kv_cache_of_reference_decoders():
    assert ladder.kv_cache_bytes(32, 32, 128) == 512 * 1024  # a 7B model with MHA, fp16
    assert ladder.kv_cache_bytes(32, 8, 128) == 128 * 1024  # with GQA-8
    assert ladder.kv_cache_bytes(6, 1, 32, v_heads=12) == 6 * 13 * 32 * 2  # one K head, 12 V heads
    rows = {r["model"]: r for r in ladder.cache_table(ladder.REFERENCE_MODELS)}
    assert rows["a 7B model (32 x 32 x 128), e.g. Llama 2 7B"]["GQA"] == "GQA-8: 128 KiB (1/4)"
    # a group count that divides each model's heads: GQA-8 does not exist for 12 heads
    assert rows["bert-base shape (12 x 12 x 64)"]["GQA"] == "GQA-3: 9 KiB (1/4)"
    # one rule for every size (issue 57: 2.2 and 2.25 KiB for one number): 3 significant digits
    assert [ladder.size(b) for b in (2304, 13824, 512 * 1024 * 4096, 300)] == [
        "2.25 KiB",
        "13.5 KiB",
        "2 GiB",
        "300 bytes",
    ]
    built = ladder.built_cache_table([Structure("SmolLM2", 30, 9, 3, 64)])[0]  # K and V of 3 heads, 30 layers, fp16
    assert built["K/V cache per token, as built"] == "22.5 KiB" and built["at 4,096 tokens"] == "90 MiB"
    assert built["at 32,768 tokens"] == "720 MiB"  # 30 x 2 x 3 x 64 x 2 bytes x 32,768
    for heads in range(2, 65):
        g = ladder.gqa_groups(heads)
        assert g is None if all(heads % d for d in range(2, heads)) else (heads % g == 0 and 1 < g < heads)
    assert [ladder.gqa_groups(h) for h in (4, 6, 8, 12, 16, 32, 7)] == [2, 2, 2, 3, 4, 8, None]


def test_uptraining_keeps_a_shared_projection_shared(bert):
    """The tied rung trains as one matrix: after uptraining, every head still computes the same
    map (head diversity exactly 0), while its per-head values have moved. With untied copies
    (equal values in a distinct module) each head's Q/K got its own gradient and came apart."""
    rung = next(r for r in ladder.rungs(bert.n_heads) if r.name == "shared Q, K")
    texts = uptrain.generated_sentences(64, seed=2)
    inputs = bert.layer_inputs(texts, 5)
    held_out = [bert.attend(t) for t in uptrain.generated_sentences(4, seed=3)]
    out = ladder.uptrain_rung(bert, 5, rung, inputs, held_out, steps=40)
    m = out.fit.module
    assert m.role_heads == (1, 1, bert.n_heads) and m.num_parameters() == rung.parameter_count(bert.d_model)
    assert out.diversity_before == 0.0 and out.diversity_after == 0.0 and out.held_out_sentences == 4
    assert out.fit.after < out.fit.before
    converted = rung.module(bert.scratch_layer(5))
    assert not torch.equal(m.v_proj.weight, converted.v_proj.weight)  # it did train


def test_the_uptraining_curves_log_axis_labels_whole_numbers():
    """A loss that falls from 0.5 to 0.2 stays inside one decade: Plotly labelled its log axis
    "5, 2" (the digits only); the axis now writes each tick as a number."""
    from mha import plots

    fig = plots.ladder.loss_curve([0.5, 0.4, 0.3, 0.2], "uptraining")
    axis = fig.layout.yaxis
    assert axis.type == "log" and axis.tickformat == ".2~g" and list(axis.tickvals) == [0.2, 0.5]
    # a loss over three decades: one tick a decade, so that they never run together on a phone
    wide = plots.ladder.loss_curve(list(np.geomspace(0.9, 0.0009, 50)), "uptraining").layout.yaxis
    assert list(wide.tickvals) == pytest.approx([0.001, 0.01, 0.1])


def test_a_heads_query_and_key_are_a_pair_so_mqa_pools_keys_in_unrelated_coordinates(bert, run):
    """What the sharing page says when MQA moves the output further than one shared Q, K and V: a
    head's W_i^Q and W_i^K are learned for each other. Turning one head's Q and K by the same
    rotation leaves BERT's layer exactly as it was, yet changes that head's MQA map: the pooled
    key mixes other heads' coordinates with a basis nothing fixed."""
    import copy

    layer = copy.deepcopy(bert.scratch_layer(2))
    x = run.layer_input(2)  # (1, T, C)
    mqa = ladder.Rung("MQA", (bert.n_heads, 1, 1), bert.n_heads, True)
    D = bert.d_model // bert.n_heads
    with torch.inference_mode():
        before, before_mqa = layer(x)[1][0], mqa.module(layer)(x)[1][0]  # (H, T, T) each
        turn = torch.linalg.qr(torch.randn(D, D, generator=torch.Generator().manual_seed(0)))[0]  # (D, D) orthogonal
        for proj in (layer.q_proj, layer.k_proj):  # head 0's rows: q_0 -> q_0 R, k_0 -> k_0 R
            proj.weight[:D] = turn.T @ proj.weight[:D]
            proj.bias[:D] = proj.bias[:D] @ turn
        after, after_mqa = layer(x)[1][0], mqa.module(layer)(x)[1][0]
    torch.testing.assert_close(after, before, atol=2e-6, rtol=0)  # the layer: the same maps, every head
    assert (after_mqa - before_mqa).abs().amax(dim=(1, 2)).min() > 0.01  # MQA: every head's map moves


def test_sharing_less_is_explained_only_where_the_task_says_it_cost_more():
    """recap.further speaks only where the held-out task (a constructed verdict here) says MQA is surely
    worse than one shared Q, K and V with every layer converted, and says the drift comparison only
    in the direction measured on the sentence; without a verdict, or with a tie, it says nothing."""
    from mha.lesson import recap
    from mha.studies.verdict import CONVERTED, MODEL, REMOVED, Entry, Verdict

    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 400)

    def task(mqa_noise: float, one_noise: float, pooling: str = "scale restored") -> Verdict:
        noisy = {n: gold + rng.normal(0, s, 400) for n, s in (("MQA", mqa_noise), ("shared Q/K/V", one_noise))}
        entries = [
            Entry(MODEL, "MHA", "", gold + rng.normal(0, 0.1, 400)),
            Entry(REMOVED, "", "", rng.normal(size=400)),
        ]
        entries += [Entry(CONVERTED, n, pooling, v) for n, v in noisy.items()]
        return Verdict("test", "similarity", gold, None, entries, [])

    def m(drift):
        return ladder.RungMeasures(ladder.Rung("x", (4, 1, 1), 4), 0, 0, drift, 0.1, 0.5, None)

    closer = {(4, 1, 1): m(0.25), (1, 1, 1): m(0.18)}
    worse = task(3.0, 0.5)
    said = recap.further(worse, closer, closer, 4)
    a, b = (worse.score(worse.find(CONVERTED, n, "scale restored")) for n in ("MQA", "shared Q/K/V"))
    assert f"MQA (K and V shared) scores {a:.3f} and one shared Q, K and V {b:.3f}" in said and a < b
    assert "which drifts less from each head's own (0.180)" in said and "(scale restored)" in said
    odd = {(4, 1, 1): m(0.15), (1, 1, 1): m(0.18)}
    assert "the maps alone do not explain the order" in recap.further(worse, odd, odd, 4)
    assert recap.further(task(0.5, 0.5), closer, closer, 4) == ""  # tied on the task: no box
    assert recap.further(task(0.5, 3.0), closer, closer, 4) == ""  # MQA better: no box
    assert recap.further(None, closer, closer, 4) == ""
    assert "averaged over all heads" in said and "another head's keys" in said
    grouped = recap.further(worse, closer, closer, 4, kv_groups=2)  # heads of one group already share their key
    assert "its K/V group's $W^K$" in grouped and "averaged over all 2 groups" in grouped
    assert "(mean-pooled)" in recap.further(task(3.0, 0.5, "mean-pooled"), closer, closer, 4)
    # the order said is this conversion's: the other pooling and the uptrained pair are said beside it, as
    # their own intervals order them (here the other pooling reverses it)
    from mha.lesson import verdict as words
    from mha.studies.verdict import UPTRAINED

    both = task(3.0, 0.5)
    both.entries += [
        Entry(CONVERTED, "MQA", "mean-pooled", gold + rng.normal(0, 0.2, 400)),
        Entry(CONVERTED, "shared Q/K/V", "mean-pooled", gold + rng.normal(0, 3.0, 400)),
        Entry(UPTRAINED, "MQA", "mean-pooled", gold + rng.normal(0, 0.5, 400)),
        Entry(UPTRAINED, "shared Q/K/V", "mean-pooled", gold + rng.normal(0, 0.5, 400)),
    ]
    said = recap.further(both, closer, closer, 4)
    plain = [both.find(CONVERTED, n, "mean-pooled") for n in ("MQA", "shared Q/K/V")]
    assert words.chain(both, plain).startswith("MQA (mean-pooled) ") and " > " in words.chain(both, plain)
    ups = [both.find(UPTRAINED, n, "mean-pooled") for n in ("MQA", "shared Q/K/V")]
    assert (
        f"This order belongs to this conversion (scale restored, untrained): with the other pooling, "
        f"{words.chain(both, plain)}; uptrained, {words.chain(both, ups)}." in said
    )


def test_the_recap_names_the_conversion_and_its_baselines(bert, run):
    """The recap's MQA diversity is the rescaled conversion's, beside BERT's, random maps exactly as
    sharp (recomputed by shuffling BERT's own rows here) and each head's drift from its own map;
    it promises no working layer it did not measure."""
    from mha.analyses import metrics
    from mha.lesson import recap

    original = bert.scratch_layer(4)
    plain, scaled = (
        {m.rung.name: m for m in ladder.ladder_measures(bert, run, 4, [(r, r.module(original)) for r in rs], False)}
        for rs in (ladder.rungs(bert.n_heads), ladder.rungs(bert.n_heads, True))
    )
    base = ladder.baselines(bert, run, 4, whole=False)
    said = recap.production(4, plain, scaled, base)
    attn = run.attentions[4]
    rng = np.random.default_rng(0)  # seed 0 of shuffled_diversity's four: one shuffle, within its spread
    one = metrics.mean_off_diagonal(metrics.head_diversity(rng.permuted(attn, axis=-1)))
    assert base.random_diversity == pytest.approx(one, rel=0.1) and base.random_diversity > plain["MHA"].diversity
    mqa = scaled["MQA"]
    assert f"layer 4's heads differ by {mqa.diversity:.3f} ({plain['MQA'].diversity:.3f} with the plain mean" in said
    assert f"against {plain['MHA'].diversity:.3f} in BERT's layer and {base.random_diversity:.3f} for random" in said
    assert f"drifts {mqa.drift:.3f} from its own map in BERT, {mqa.drift / plain['MHA'].diversity:.0%} of" in said
    assert "trains back" not in said and not re.search(r"keeps? \d+%", said)  # no share of diversity "kept"


@pytest.mark.parametrize("heads", [(12, 12), (9, 3), (4, 1), (8, 2)])
def test_the_ladder_starts_at_the_models_own_rung_and_repeats_no_structure(heads):
    """The first rung is the model as built (MHA, GQA-G, or MQA for one K/V head); no two rungs are
    one structure (with one K and one V, sharing Q, K or Q alone is shared Q/K/V); the structure
    table's cache at 4,096 tokens caps each sliding layer at its window (the formula written here)."""
    from mha.lesson import sharing_tables

    H, G = heads
    rungs = ladder.rungs(H, False, G)
    assert rungs[0].name == ("MHA" if G == H else "MQA" if G == 1 else f"GQA-{G}") and rungs[0].heads == (H, G, G)
    assert len({r.heads for r in rungs}) == len(rungs), [r.name for r in rungs]
    if G == 1:
        assert [r.name for r in rungs] == ["MQA", "shared Q/K/V"]
    windows = (512, 512, None)  # two sliding layers, one full: 4,096 tokens are cached only by the full one
    rows = sharing_tables.structure(rungs, 3, 64 * H, False, 64, windows=windows)
    for r, row in zip(rungs, rows):
        per_layer_token = (r.heads[1] + r.heads[2]) * 64 * 2  # K and V heads x d_k x 2 bytes (fp16)
        assert row["at 4,096 tokens"] == ladder.size(per_layer_token * (512 + 512 + 4096))
        assert row[sharing_tables.KV] == ladder.size(per_layer_token * 3)
