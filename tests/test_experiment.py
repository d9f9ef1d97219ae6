"""The training experiment: real training (reduced steps where the claim allows), deterministic."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha.analyses import experiment as ex


@pytest.fixture(scope="module")
def default_run():
    """The default experiment at full steps (early stop ends the distinct model sooner)."""
    return ex.run(ex.Settings())


def test_default_settings_only_distinct_heads_learn(default_run):
    m = default_run.models
    assert m["distinct"].final_accuracy >= 0.95
    assert m["grouped"].final_accuracy >= 0.95 and m["mqa"].final_accuracy >= 0.95  # K/V may be shared
    assert m["distinct"].parameters > m["grouped"].parameters > m["mqa"].parameters > m["shared"].parameters
    assert m["shared"].final_accuracy <= 0.20
    assert m["single"].final_accuracy <= 0.20
    assert m["single"].parameters == m["distinct"].parameters > m["shared"].parameters
    assert m["shared"].steps_run == m["single"].steps_run == 1000  # never solved: trained to the end
    assert m["distinct"].steps_run < 1000  # solved early


def test_shared_heads_have_identical_attention_after_training(default_run):
    w = default_run.models["shared"].example_attention  # (H, T, T)
    assert w.shape[0] == 4 and np.abs(w - w[:1]).max() < 1e-6
    d = default_run.models["distinct"].example_attention
    assert np.abs(d - d[:1]).max() > 0.5  # distinct heads really differ


def test_distinct_heads_each_lock_onto_one_relation(default_run):
    w = default_run.models["distinct"].example_attention  # (H, T, T)
    T = w.shape[-1]
    found = set()
    for name in ex.RELATIONS:
        keys = ex.target_positions(name, T)
        q = [t for t in range(3, T)]
        share = [np.mean([w[h, t, keys[t]] for t in q]) for h in range(w.shape[0])]
        if max(share) > 0.8:
            found.add(int(np.argmax(share)))
    assert len(found) == 4  # four relations, four different heads


def test_one_relation_is_learned_by_all_three():
    r = ex.run(ex.Settings(n_relations=1, steps=300))
    for kind, m in r.models.items():
        assert m.final_accuracy >= 0.95, kind


def test_same_seed_same_result_and_progress_is_reported():
    events = []
    s = ex.Settings(steps=60)
    a = ex.run(
        s, lambda p: events.append((p.step, p.steps, list(p.training), len(p.curves["shared"][0]))), early_stop=False
    )
    b = ex.run(s)
    for kind in ex.MODELS:
        assert a.models[kind].losses == b.models[kind].losses
        assert a.models[kind].final_accuracy == b.models[kind].final_accuracy
        np.testing.assert_array_equal(a.models[kind].example_attention, b.models[kind].example_attention)
    # every = 0: one event per step, with the curves so far
    assert [e[0] for e in events] == list(range(1, 61)) and events[0][2] == list(ex.MODELS)
    assert all(e[1] == 60 and e[3] == e[0] for e in events)
    c = ex.run(ex.Settings(steps=60, seed=1))
    assert c.models["distinct"].losses != a.models["distinct"].losses


def test_progress_is_throttled_but_the_last_step_is_always_reported():
    events = []
    ex.run(ex.Settings(steps=40), lambda p: events.append(p.step), every=3600.0, early_stop=False)
    assert events == [1, 40]


def test_every_kind_starts_from_the_same_embeddings_and_read_out():
    models = ex.initial_models(ex.Settings())
    for part in ("tok", "pos", "readout"):
        ref = getattr(models["distinct"], part).state_dict()
        for kind in ex.MODELS[1:]:
            for name, value in getattr(models[kind], part).state_dict().items():
                assert torch.equal(value, ref[name]), (kind, part, name)


def test_targets_and_validation():
    tokens = torch.tensor([[5, 6, 7, 8, 9, 1]])
    target, valid = ex.targets(tokens, ["1 back", "first"])
    assert valid.tolist() == [False, True, True, True, True, True]
    assert target[0, 3].tolist() == [7, 5]
    assert ex.target_positions("2 back", 4) == [-1, -1, 0, 1]
    for bad in (dict(n_relations=0), dict(n_relations=5), dict(n_heads=3), dict(steps=0)):
        with pytest.raises(ValueError):
            ex.Settings(**bad).validate()
