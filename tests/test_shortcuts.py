"""Every shortcut the pages take for speed gives the numbers of the long way round: a layer run from
the run's own entering states, the ladder's batched runs after the changed layer, a layer whose
every head is removed skipped, and the work estimate that decides when a page asks first."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from conftest import SENTENCES, plotly_array
from streamlit.testing.v1 import AppTest
from torch.utils.flop_counter import FlopCounterMode

from livetest import ROOT
from mha.analyses import collapse, ladder
from mha.analyses.collapse import CollapsePath
from mha.models import cost

LONG = " ".join(["the river runs past seven old mills and under a stone bridge"] * 42)  # 506 tokens


@pytest.fixture(scope="module")
def run(bert):
    return bert.attend(SENTENCES[0])


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def test_a_layer_run_from_the_runs_entering_states_equals_the_full_run(bert, run):
    """The issue's check: resuming at layer l from run.hidden_states[l] gives the full forward pass
    (Transformers' own, in run) to 1e-6, for every l, with and without a changed layer."""
    for layer in range(bert.n_layers):
        with torch.inference_mode():
            states, _ = bert.run_layers(run.layer_state(layer), start=layer)
        assert relative(states[-1][0].numpy(), run.hidden_states[-1]) < 1e-6, layer
    shared = {2: collapse.module_at(bert.scratch_layer(2), CollapsePath(1.0))}
    full = bert.encode_with(run, replace=shared)[-1]  # from the embeddings, every layer run again
    with torch.inference_mode():
        resumed, _ = bert.run_layers(run.layer_state(2), replace=shared, start=2, keep=False)
    assert relative(resumed[-1][0].numpy(), full) < 1e-6
    assert relative(full, run.hidden_states[-1]) > 1e-3  # the change is real


def test_removed_heads_run_the_model_from_their_first_layer_with_the_same_maps(bert, run):
    """The heads page's map with heads removed: the layers before the first removed head are the
    run's own, the rest resumed from the run's states; equal to the whole model run again with
    the heads masked (attend_with, from the embeddings) as closely as the two agree on the model
    unchanged (float32: 1.4e-6 here), at most 1e-5; nothing removed: the run's maps."""
    from mha.tasks import pruning, similarity

    assert pruning.attentions_without(bert, run, ()) is run.attentions
    noise = np.abs(bert.attend_with(run)[1] - run.attentions).max()
    for removed in ([(3, 1)], [(2, 0), (4, 5), (2, 7)], [(0, 11)]):
        mask = similarity.head_mask(bert, removed)
        _, full = bert.attend_with(run, head_mask=mask)
        full = full * mask[:, :, None, None]
        got = pruning.attentions_without(bert, run, removed)
        first = min(layer for layer, _ in removed)
        assert np.array_equal(got[:first], run.attentions[:first])
        assert np.abs(got - full).max() <= min(1e-5, max(2 * noise, 1e-6)), removed
        assert all(not got[layer, head].any() for layer, head in removed)
        assert np.abs(got[first + 1 :] - run.attentions[first + 1 :]).max() > 1e-3  # the removal is real


def test_the_ladders_batched_runs_equal_one_full_run_per_rung(bert, run):
    layer = 1
    original = bert.scratch_layer(layer)
    rungs = ladder.rungs(bert.n_heads) + ladder.rungs(bert.n_heads, rescale=True)
    modules = [r.module(original) for r in rungs]
    finals = ladder.ladder_finals(bert, run, layer, modules, chunk=3)
    for rung, m, got in zip(rungs, modules, finals):
        full = bert.encode_with(run, replace={layer: m})[-1]  # (T, C) the whole model, from the embeddings
        want = float(np.dot(full.mean(0), run.hidden_states[-1].mean(0)))
        want /= float(np.linalg.norm(full.mean(0)) * np.linalg.norm(run.hidden_states[-1].mean(0)))
        assert abs(got - want) < 1e-6, rung.name
    assert finals[0] == pytest.approx(1.0, abs=1e-7)  # MHA: the model's own layer, not run again
    assert min(finals) < 0.99


def test_a_layer_with_every_head_removed_is_skipped_with_the_same_numbers(bert, run):
    m = bert.scratch_layer(3)
    x = run.layer_input(3)
    with torch.inference_mode():
        zeroed, _ = m(x, None, torch.zeros(bert.n_heads))
        assert torch.equal(m.silent_output(x), zeroed)
    for layers in ([3], range(bert.n_layers)):
        fast = collapse.removal_effect(bert, run, layers)  # skips the removed layers' heads
        slow = bert.encode_with(run, head_mask=collapse.removal_mask(bert, layers))[-1]  # computes them
        assert fast["mean token cosine"] == pytest.approx(
            collapse._effect(slow, run.hidden_states[-1])["mean token cosine"], abs=1e-6
        )


def test_the_work_estimate_counts_what_torch_counts(bert):
    """layer_macs against PyTorch's own FLOP counter on one real layer (2 FLOPs per multiply-add)."""
    for T in (16, 200):
        h = bert.embed(bert.tokenize(" ".join(["word"] * (T - 2))).ids)
        with torch.inference_mode(), FlopCounterMode(display=False) as counter:
            bert.model.encoder.layer[0](h)
        counted = counter.get_total_flops() / 2
        assert cost.layer_macs(bert, T) == pytest.approx(counted, rel=0.02), T
    L = bert.n_layers
    assert cost.forward_passes(bert, 512, [(0, 0)]) == 1.0
    assert cost.forward_passes(bert, 512, [(3, 0), (3, 0)]) == pytest.approx(2 * (L - 3) / L)  # twice layers 3..L-1
    ffn = cost.layer_macs(bert, 512, heads=False) / cost.layer_macs(bert, 512)
    assert cost.forward_passes(bert, 512, [(0, L)]) == pytest.approx(ffn) and ffn < 0.7  # every head removed
    assert cost.forward_passes(bert, 512, [(L - 2, 1)]) == pytest.approx((1 + ffn) / L)  # one layer without heads
    run = bert.attend(" ".join(["word"] * 198))
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        bert.run_layers(run.layer_state(L - 1), head_mask=torch.zeros(L, bert.n_heads), start=L - 1, keep=False)
    assert cost.layer_macs(bert, 200, heads=False) == pytest.approx(counter.get_total_flops() / 2, rel=0.02)
    # measures between heads: on this narrow model the path's 11 points and the ladder's 18 versions of
    # a layer outgrow 3 forward passes at 512 tokens (bench_collapse: measured 5.5), not at 128 or 256
    H = bert.n_heads
    assert collapse.sweep_counts(H) == (11, 11 * 3 * H, 11 * H * (H - 1) // 2)
    both = ladder.rungs(H) + ladder.rungs(H, rescale=True)  # 18, of which 4 give every head one map
    # pairs: 14 rungs' heads, 4 shuffles of each of the 18 rungs' maps and 4 of the model's (random baselines)
    assert ladder.ladder_counts(both) == (19, H * 37, (14 + ladder.RANDOM_SEEDS * 18 + 4) * H * (H - 1) // 2)
    assert ladder.RANDOM_SEEDS == 4  # as many as the baseline's (metrics.shuffled_diversity): one number for the model
    for counts in (collapse.sweep_counts(H), ladder.ladder_counts(both)):
        assert not cost.measures_at_once(bert, 512, cost.measures_macs(bert, 512, *counts))
        assert cost.measures_at_once(bert, 128, cost.measures_macs(bert, 128, *counts))
    assert cost.measures_at_once(bert, 256, cost.measures_macs(bert, 256, *collapse.sweep_counts(H)))


def promised_runs(at: AppTest) -> int:
    """The number of runs the page's info box says the button takes."""
    said = next(i.value for i in at.info if "wait for the button" in i.value and " runs " in i.value)
    return int(re.search(r"take (\d+) runs", said).group(1))


def measures_said(at: AppTest) -> str:
    """The info box of measures between heads that wait for a button (ui.long_measures)."""
    return next(i.value for i in at.info if "waits for the button" in i.value)


def counting_runs(monkeypatch) -> list[int]:
    """Every sentence that LoadedModel.run_layers runs from now on, one entry per batch row."""
    from mha.models.family import LoadedModel

    rows: list[int] = []
    original = LoadedModel.run_layers

    def counted(self, h, *args, **kwargs):
        rows.append(h.shape[0])
        return original(self, h, *args, **kwargs)

    monkeypatch.setattr(LoadedModel, "run_layers", counted)
    return rows


def measures_table(at: AppTest):
    """The sharing page's table of the plainly mean-pooled rungs on the sentence."""
    return next(d.value for d in at.dataframe if "head diversity (JS), mean-pooled" in d.value.columns)


def test_long_sentences_wait_for_the_button_and_then_show_the_same_numbers(bert, monkeypatch):
    """On 512 tokens the ladder's sentence cosines and the collapse page's whole-model cosines are
    too much work to run as the page opens: the page says so and how many runs they take, and the
    button runs exactly that many."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["text"] = LONG
    at.switch_page("app_pages/sharing.py").run()
    assert not at.exception
    # first the rungs' measures inside the layer (heads^2 T^2 on this narrow model): the counts said
    H, pairs, T = bert.n_heads, bert.n_heads * (bert.n_heads - 1) // 2, bert.attend(LONG).n_tokens
    said = measures_said(at)
    assert "16 converted versions of layer 0" in said and f"measured on {T} x {T}" in said
    original = bert.scratch_layer(0)  # "converted": the versions that do not read the model's own tensors
    both = ladder.rungs(H) + ladder.rungs(H, rescale=True)
    assert sum(not r.module(original).shares_weights_with(original) for r in both) == 16
    assert f"every two of their {H} heads" in said
    assert not [d for d in at.dataframe if "head diversity (JS), mean-pooled" in d.value.columns]  # not yet
    structure = next(d.value for d in at.dataframe if "parameters (layer)" in d.value.columns)
    assert structure.set_index("rung").loc["MQA", "parameters (layer)"] == (
        ladder.Rung("MQA", (H, 1, 1), H).module(bert.scratch_layer(0)).num_parameters()
    )
    at.button(key="sharing_inside").click().run()
    assert not at.exception
    run = bert.attend(LONG)
    plain = ladder.rungs(H)
    direct = ladder.ladder_measures(bert, run, 0, [(r, r.module(bert.scratch_layer(0))) for r in plain], whole=False)
    shown = measures_table(at).set_index("rung")
    for m in direct:  # the same numbers as the long way round, as shown
        assert shown.loc[m.rung.name, "head diversity (JS), mean-pooled"] == float(f"{m.diversity:.3g}"), m.rung.name
        assert shown.loc[m.rung.name, "attention drift (JS), mean-pooled"] == round(m.drift, 3), m.rung.name
    promised = promised_runs(at)
    table = measures_table(at)
    cosines = [c for c in table.columns if c.startswith("sentence cosine")]
    assert cosines and table[cosines].isna().all().all()
    rows = counting_runs(monkeypatch)
    at.button(key="sharing_whole").click().run()
    assert sum(rows) == promised == 18
    table = measures_table(at)
    assert not table[cosines].iloc[:-1].isna().any().any()
    mqa = ladder.Rung("MQA", (bert.n_heads, 1, 1), bert.n_heads)
    full = bert.encode_with(run, replace={0: mqa.module(bert.scratch_layer(0))})[-1]
    want = collapse.final_cosine(full, run.hidden_states[-1], run.traits)
    got = table.set_index("rung").loc["MQA", "sentence cosine, mean-pooled"]
    assert got == pytest.approx(want, abs=6e-4)  # shown to 3 decimals
    at.switch_page("app_pages/collapse.py").run()
    assert not at.exception
    assert any("not run" in str(m.value) for m in at.metric)
    # the path's 11 points wait too; the figures above compare with its ends, computed at once
    said = measures_said(at)  # the 9 points between the ends, which the figures above already use
    assert "9 points between alpha = 0 and 1 run layer 0 9 times" in said and f"({9 * pairs:,} pairs" in said
    sweep = collapse.alpha_sweep(bert, run, 0, CollapsePath())
    diversity = next(m for m in at.metric if m.label.startswith("Head diversity"))
    assert f"{sweep[0]['head diversity (JS)']:.3f}" in diversity.proto.delta
    from mha.analyses import metrics

    compared = []  # every pair of head maps the button's work compares (metrics._mix_plogp: one call a pair)
    mix = metrics._mix_plogp
    monkeypatch.setattr(metrics, "_mix_plogp", lambda *a: compared.append(1) or mix(*a))
    at.button(key="collapse_path").click().run()
    assert len(compared) == 9 * pairs  # the box's "594 pairs", counted as they run
    assert not at.exception
    drawn = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if "Distinct (alpha = 0)" in c.proto.spec)
    curve = next(t for t in drawn["data"] if t["name"] == "head diversity (JS)")
    np.testing.assert_allclose(plotly_array(curve["x"]), [p["alpha"] for p in sweep])
    np.testing.assert_allclose(plotly_array(curve["y"]), [p["head diversity (JS)"] for p in sweep], rtol=1e-12)
    promised, rows[:] = promised_runs(at), []
    at.button(key="collapse_whole").click().run()
    assert not any("not run" in str(m.value) for m in at.metric)
    assert len(rows) == promised == 4  # one sentence per run: two points of the path, two baselines
    # every layer shared: its heads removed is the model without heads, one run fewer (at once here)
    at.radio(key="_w_collapse_scope").set_value("every layer").run()
    assert not at.exception and not any("not run" in str(m.value) for m in at.metric)


def test_the_lessons_recap_waits_for_the_same_button_on_a_long_sentence(monkeypatch):
    """The lesson's last step quotes the ladder's measures inside the layer: on a long sentence they wait
    for a button as on What may be shared, while the verdict on the task (shipped, not per sentence) is
    said at once; nothing runs the whole model on the sentence."""
    text = " ".join(["a small boat drifts along the quiet canal towards the harbour lights"] * 40)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["text"] = text
    at.query_params["step"] = "recap"
    at.switch_page("app_pages/lesson.py")
    rows = counting_runs(monkeypatch)
    at.run()
    assert not at.exception and sum(rows) == 0
    assert "16 converted versions" in measures_said(at)  # first the rungs inside the layer, as on What may be shared
    said = " ".join(m.value for m in at.markdown)
    assert "**Measured by BERT's own task**" in said and "Inside one layer" not in said
    at.button(key="lesson_inside").click().run()
    assert not at.exception and sum(rows) == 0  # the layer alone, never the whole model on 512 tokens
    said = " ".join(m.value for m in at.markdown)
    assert "Inside one layer, on your sentence" in said and "**Measured by BERT's own task**" in said


def test_the_atlas_reads_the_runs_own_attention_with_the_same_numbers(bert, run):
    """The token views' rollout row and value-weighted row, and the confidence over kept keys,
    against the long way round: the full rollout product, the layer recomputed by trace, and a
    copy of the kept keys (the sentence has [CLS] and [SEP] to leave out: two runs of kept keys
    would be one; a key left out inside the sentence splits them)."""
    from mha.analyses import atlas

    att = run.attentions
    for token in (0, 3, run.n_tokens - 1):
        np.testing.assert_allclose(atlas.rollout_row(att, token), atlas.rollout(att)[:, token, :], atol=1e-12)
        m, x = bert.scratch_layer(2), run.layer_input(2)
        with torch.inference_mode():
            tr = m.trace(x)
            want = (tr.weights[0, :, token, :, None] * atlas._contributions(m, tr)).sum(0).norm(dim=-1).numpy()
        got = atlas.value_weighted_row(m, x, token, torch.from_numpy(att[2, :, token, :]))
        assert relative(got, want) < 1e-5
    keys = np.ones(run.n_tokens, dtype=bool)
    keys[[0, 4, run.n_tokens - 1]] = False
    np.testing.assert_array_equal(atlas.confidence(att, keys), att[..., keys].max(-1).mean(-1))


def test_the_task_resumes_from_kept_states_with_the_same_score(bert, monkeypatch):
    """The bundled pairs' states kept at every 3rd layer only (checkpoints.Checkpoints, as for a larger
    model: here a smaller budget): a layer changed in between, or a head removed there, resumes from
    the kept layer before it, and scores exactly what a run from the embeddings scores. The bundled
    model keeps all; the STS dev pairs resume the same way."""
    from mha.tasks import checkpoints, similarity

    assert sorted(similarity._kept_states(bert, "written")[1][0].states) == list(range(bert.n_layers + 1))
    all_states = similarity._STATES.pop(bert)
    per_layer = sum(t.nbytes for c in all_states["written"][1] for t in c.states.values()) / (bert.n_layers + 1)
    monkeypatch.setattr(checkpoints, "CHECKPOINT_MB", 3.5 * per_layer / 2**20)  # room for 3 of the 7
    try:
        assert sorted(similarity._kept_states(bert, "written")[1][0].states) == [0, 3, bert.n_layers]
        for layer in (1, 4, bert.n_layers - 1):
            change = {layer: collapse.module_at(bert.scratch_layer(layer), CollapsePath(1.0))}
            kept = similarity.evaluate(bert, replace=change)  # from the kept states
            full = similarity.evaluate(bert, pairs=similarity.similarity_pairs(), replace=change)  # from the embeddings
            assert kept.value == full.value, layer
            gone = similarity.head_mask(bert, [(layer, 2), (layer, 5)])
            kept = similarity.evaluate(bert, head_mask=gone)
            assert kept.value == similarity.evaluate(bert, similarity.similarity_pairs(), head_mask=gone).value
            assert kept.value != similarity.evaluate(bert).value  # the heads were removed
        change = {4: collapse.module_at(bert.scratch_layer(4), CollapsePath(1.0))}
        dev = similarity.evaluate(bert, "dev", replace=change)
        assert dev.value == similarity.evaluate(bert, similarity.sts_pairs("dev"), replace=change).value
    finally:
        similarity._STATES[bert] = all_states
