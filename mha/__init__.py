"""Multi-head attention, from scratch and in a real BERT. Importable without Streamlit."""

from mha.core.attention import MultiHeadAttention, scaled_dot_product_attention

__all__ = ["MultiHeadAttention", "scaled_dot_product_attention", "load_bert"]


def __getattr__(name: str):
    # load_bert pulls in transformers (slow to import): only when asked for.
    if name == "load_bert":
        from mha.models.bert import load_bert

        return load_bert
    raise AttributeError(f"module 'mha' has no attribute {name!r}")
