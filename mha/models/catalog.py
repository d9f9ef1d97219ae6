"""One way to load any model on the allow-list (mha/models/bert.py's REGISTRY): a BERT (mha/models/bert.py) or the
grouped-query decoder (mha/models/llama.py, obtained once by mha/models/fetch.py). Pages hold the result as a
LoadedModel and ask its family only to word a sentence."""

from __future__ import annotations

from mha.models import bert, fetch
from mha.models.family import LoadedModel

Progress = fetch.Progress


def family(name: str) -> str:
    """ "encoder" or "decoder" for an allow-listed name (ValueError for any other)."""
    specs = {s.name: s for s in bert.available_models()}
    if name not in specs:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(specs)}")
    return specs[name].family


def load_model(name: str | None = None, progress: Progress | None = None) -> LoadedModel:
    """The allow-listed model `name` (None: the bundled BERT). The decoder is fetched and converted
    on its first use, progress(fraction, message) told what happens; a source that cannot be
    reached raises bert.ModelUnavailableError saying what to do."""
    if name is None or family(name) == "encoder":
        return bert.load_bert(name)
    from mha.models.llama import load_decoder

    try:
        where = fetch.decoder_dir(progress, hub=bert._hub_reachable)
    except fetch.FetchError as e:
        raise bert.ModelUnavailableError(str(e)) from None
    return load_decoder(where, name)
