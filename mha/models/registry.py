"""The model families, by Transformers' `model_type`: adding a family is one line here (and its
module, mha/models/<family>.py, implementing mha.models.family.LoadedModel)."""

from __future__ import annotations

from mha.models.bert import LoadedBert
from mha.models.family import LoadedModel
from mha.models.gemma3 import LoadedGemma3
from mha.models.gpt2 import LoadedGPT2
from mha.models.llama import LoadedLlama

FAMILIES: dict[str, type[LoadedModel]] = {f.MODEL_TYPE: f for f in (LoadedBert, LoadedLlama, LoadedGPT2, LoadedGemma3)}


def family_of(model_type: str) -> type[LoadedModel]:
    """The family that loads a model of this `model_type` (ValueError for any other)."""
    if model_type not in FAMILIES:
        raise ValueError(f"no family loads a {model_type!r} model; registered: {sorted(FAMILIES)}")
    return FAMILIES[model_type]
