"""Multi-head attention, from scratch and in real models. Importable without Streamlit."""

from mha.core.attention import MultiHeadAttention, scaled_dot_product_attention

__all__ = ["MultiHeadAttention", "scaled_dot_product_attention", "load_model"]


def __getattr__(name: str):
    # load_model pulls in transformers (slow to import): only when asked for.
    if name == "load_model":
        from mha.models.catalog import load_model

        return load_model
    raise AttributeError(f"module 'mha' has no attribute {name!r}")
