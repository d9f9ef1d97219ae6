"""Shared fixtures: one load of the real bundled BERT per test session (no mocks, no network)."""

from __future__ import annotations

import os
import shutil

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported anywhere
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["MHA_CLASS_PURGE_EVERY"] = "0"  # AppTest's app.py here: no purge thread (each test has its own database)
os.environ["MHA_WARM"] = "0"  # AppTest runs app.py here: no background warm-up racing tests that count computations

import pytest  # noqa: E402

from mha.lesson.examples import DEFAULT_TEXT, MAKING_DIFFICULT  # noqa: E402

SENTENCES = [
    DEFAULT_TEXT,  # repeated words
    "Unbelievably, the tokenizer splits words like 'antidisestablishmentarianism'!",  # sub-words
    MAKING_DIFFICULT,
]


@pytest.fixture(scope="session")
def bert():
    from mha.models.catalog import load_model

    return load_model()


@pytest.fixture(scope="session")
def smol():
    """The real decoder, loaded once per session through the app's own cache (AppTest runs in this
    process, so its pages and the tests share this one load)."""
    from mha.models import fetch
    from mha.models.catalog import DECODER_MODEL
    from ui.cache import load_model

    if not fetch.is_converted():
        pytest.fail(f"the decoder is not in {fetch.cache_dir()}: run python -m mha.models.fetch first (README)")
    return load_model(DECODER_MODEL)


def plotly_array(value):
    """A numeric array from figure JSON: Plotly 6+ sends numpy arrays as {dtype, bdata, shape}."""
    import base64

    import numpy as np

    if isinstance(value, dict) and "bdata" in value:
        arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if shape:
            arr = arr.reshape([int(s) for s in str(shape).split(",")])
        return arr
    return np.asarray(value, dtype=float)


def chromium_or_skip() -> str:
    """Debian's chromium; skip locally without it, fail under CI=true."""
    path = shutil.which("chromium")
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("chromium is not installed: CI must install it (apt-get install -y chromium)")
        pytest.skip("chromium not found: apt-get install -y chromium to run the real-browser tests")
    return path


def weights_digest(model) -> str:
    """A SHA-256 of every weight of a torch module: equal digests, bit-identical weights."""
    from mha.models.family import weights_digest as digest

    return digest(model)


def held_page_namespaces() -> list[str]:
    """The page files (app_pages/*.py) whose module namespace is still alive after a full
    collection: a session that keeps one (a widget's lambda or callback defined in the page)
    keeps every array the page made, its sentence's run among them."""
    import gc

    gc.collect()
    return [
        str(o["__file__"])
        for o in gc.get_objects()
        if isinstance(o, dict) and "/app_pages/" in str(o.get("__file__", "")).replace("\\", "/")
    ]


# real servers, browsers, nginx, and the PostgreSQL test database (test_classroom.py empties it too)
LIVE = {"test_browser.py", "test_sessions.py", "test_class_browser.py", "test_classroom.py"}


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: the live tests together, the decoder's (its files)
    together, and otherwise its file."""
    name = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return "live" if name in LIVE else "decoder" if name.startswith("test_decoder") else name


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist (`-n 2`, pyproject.toml) hands out whole units (scope_of), in the order of
    collection (`--no-loadscope-reorder`): the live tests one after another in one worker, first
    (the longest unit: servers, browsers, nginx, one PostgreSQL database and artifacts/), while
    the other worker runs the rest, each file whole (its module fixtures computed once) and the
    decoder's tests in one (one load of SmolLM2)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ByUnit(config, log)


def pytest_collection_modifyitems(items):
    """The live tests first (stable: the rest keep their order)."""
    items.sort(key=lambda item: item.path.name not in LIVE)


def false_claims(text: str, t) -> list[str]:
    """Sentences of `text` that claim a structure the traits deny: rotary positions on a model
    without them, K/V groups on a model whose every head has its own K and V, [CLS]/[SEP] on a
    model that parks on its first token, and a head's own W^K (W_i^K, W_3^K) on a grouped model."""
    import re

    wrong = []
    if t.positions != "rotary":
        wrong += re.findall(r"(?i)[^.]*\b(?:rotary|RoPE|RoFormer)\b[^.]*", text)
    if not t.grouped:
        wrong += re.findall(
            r"(?i)[^.]*(?:query heads share|K/V groups? \d|grouped-query model|its group's shared)[^.]*", text
        )
    if t.parking != "special":
        wrong += re.findall(r"[^.]*\[(?:CLS|SEP)\][^.]*", text)
    if t.grouped:
        wrong += re.findall(r"[^.]*W_\{?(?:i|\d+)\}?\^K[^.]*", text)
    if t.kv_groups == 1:  # multi-query: one K/V head, so no groups of heads to speak of
        wrong += re.findall(r"(?i)[^.]*(?:within \d+ groups|groups of \d+ heads|K/V group \d)[^.]*", text)
    if t.heads_width != t.d_model:  # d_k set by the model: d_model / h is not a head's width, W^O is not C x C
        C = t.d_model
        wrong += re.findall(
            rf"[^.]*(?:d_k = d_{{model}} ?/ ?h\$ = |W\^O\$? \(?{C} x {C}\b|\bd_k = {C // t.n_heads}\b)[^.]*", text
        )
    if not t.scale_is_standard:
        wrong += re.findall(r"[^.]*Q_i K_i\^\\top / \\sqrt\{d_k\}[^.]*", text)
    return wrong


def traits_page_text(at) -> str:
    """What the page says about the model: every sentence, metric and heading, without the
    glossary's definitions (general definitions, shown only where their term applies)."""
    from mha.lesson import glossary

    names = tuple(f"**{t.name}**" for t in glossary.TERMS)
    parts = []
    for kind in ("markdown", "caption", "info", "warning", "success", "error", "title", "subheader", "header"):
        parts += [str(getattr(e, "value", "")) for e in at.get(kind)]
    parts = [p for p in parts if not p.startswith(names)]
    parts += [f"{m.label} {m.value} {m.proto.delta} {m.proto.help}" for m in at.get("metric")]
    return "\n".join(parts)
