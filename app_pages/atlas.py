"""Head atlas: per-head measures from the literature, the heads that link two words, two sentences compared."""

import streamlit as st

import ui
from mha import plots
from mha.analyses import atlas

st.title("Head atlas")
st.markdown(
    "What does each head do on *your* sentence? These are the measures researchers used to "
    "map BERT's heads (Clark et al. 2019; Voita et al. 2019; Kovaleva et al. 2019), computed live."
)
inp = ui.inputs()
run = ui.run_or_stop(inp)
m = ui.cached_measures(inp)
hover = atlas.hover_text(m)
MEASURES = atlas.numeric(m)

st.header("Every head, coloured by one measure")
measure = ui.setting_widget("selectbox", "Measure", "atlas_measure", options=MEASURES)
zmax = atlas.uniform_entropy(run.n_tokens) if measure == "entropy" else 1.0
ui.chart(
    plots.atlas.atlas_heatmap(m[measure], hover, f"{measure} (hover a head for all its measures)", zmax=zmax),
)
TH = atlas.PATTERN_THRESHOLDS
THRESHOLDS = (  # the rule in words
    f"vertical at least {TH['vertical']:g}, diagonal at least {TH['diagonal']:g}, vertical+diagonal at least "
    f"{TH['vertical+diagonal']:g} with each at least {TH['mixed_min']:g}, block at least {TH['block']:g}"
)
if run.traits.causal:
    st.caption(
        "Shares are the mean weight a query puts on those keys ('previous' = key j = i - 1; punctuation = the tokens "
        "'.' and ',' as in Clark et al. 2019). The model is causal: a query reads only itself and the tokens before "
        "it, so there is no 'next', and the first token, which can read only itself, is left out of every mean. "
        "Entropy in nats; 'entropy / ln T' divides each query's entropy by the most it can have, ln of the number "
        "of keys it can read (1 = uniform over them). Confidence = mean largest weight on a token other than the "
        "first (Voita et al. 2019 leave out the token where heads park attention; here that is the first token, "
        "an attention sink: Xiao et al. 2024). Patterns are the app's own rule after Kovaleva et al. 2019, with "
        f"'vertical' meaning the first token; thresholds: {THRESHOLDS}."
    )
else:
    st.caption(
        "Shares are the mean weight a query puts on those keys ('previous' = key j = i - 1, 'next' = "
        "j = i + 1; punctuation = the tokens '.' and ',' as in Clark et al. 2019). "
        f"Entropy in nats, from 0 (one key) to ln T = {atlas.uniform_entropy(run.n_tokens):.2f} (uniform). "
        "Confidence = mean largest weight on a token other than [CLS] and [SEP] (Voita et al. 2019 leave out the "
        "end-of-sentence token, where heads park attention; BERT's heads park on [CLS] as well, so both are left "
        "out). Patterns are the app's own rule after "
        f"Kovaleva et al. 2019, thresholds: {THRESHOLDS}."
    )
layer, head = ui.layer_head(run)
st.info(
    atlas.describe(m, m["pattern"][layer, head], layer, head, run.n_tokens, run.traits.window(layer)),
    icon=":material/psychology:",
)
ui.chart(
    plots.heads.attention_heatmap(run.attentions[layer, head], run.tokens, f"Layer {layer}, head {head}"),
)

st.header("Link finder: which heads connect two tokens?")
st.markdown("As in the original paper's figure of heads linking *making* to *difficult*, ranked over all heads.")
f1, f2, f3 = st.columns([2, 2, 1])
if run.traits.causal:  # a query reads only keys before it: the later word asks, the earlier one is read
    q = ui.token_picker("From (query)", run.tokens, run.n_tokens - 1, "link_q", f1)
    k = ui.token_picker("To (key)", run.tokens, 1, "link_k", f2)
else:
    q = ui.token_picker("From (query)", run.tokens, atlas.find_token(run.tokens, "making", 1), "link_q", f1)
    k = ui.token_picker(
        "To (key)", run.tokens, atlas.find_token(run.tokens, "difficult", run.n_tokens - 2), "link_k", f2
    )
both = ui.setting_widget("toggle", "Either direction", "link_both", f3)
if run.traits.causal and k > q and not both:
    st.info(
        "The model is causal: a query reads only itself and the tokens before it, so every head gives a later "
        "key 0. Pick a key at or before the query, or turn on *Either direction*."
    )
ranking = atlas.link_ranking(run.attentions, q, k, both)
st.dataframe(
    [{"layer": l, "head": h, "weight": round(w, 4), "pattern": m["pattern"][l, h]} for l, h, w in ranking[:10]],
    hide_index=True,
)
cols = st.columns(3)
for col, (l, h, w) in zip(cols, ranking[:3]):
    ui.chart(
        plots.heads.attention_heatmap(
            run.attentions[l, h], run.tokens, f"Layer {l}, head {h}: {w:.2f}", height=420, key_labels=False
        ),
        container=col,
    )

st.header("Compare two sentences")
other = ui.setting_widget("text_input", "Compare with", "compare_text")
if other.strip():
    inp_b = inp.with_text(other)
    if inp_b.cut:
        st.warning(f"The sentence to compare was cut to its first {ui.MAX_CHARS:,} characters.")
    m_b = ui.cached_measures(inp_b)
    cmp_measure = ui.setting_widget(
        "selectbox", "Measure to compare", "compare_measure", options=[k for k in MEASURES if k in m_b]
    )
    diff, top = atlas.compare(m, m_b, cmp_measure)
    ui.chart(plots.atlas.atlas_heatmap(diff, None, f"{cmp_measure}: compared minus yours", diverging=True))
    T_b = len(ui.cached_run(inp_b).tokens)
    most_a, most_b = atlas.most_entropy(run.n_tokens, run.traits.causal), atlas.most_entropy(T_b, run.traits.causal)
    st.caption(
        f"Yours has {run.n_tokens} tokens, the compared sentence {T_b}. The measures depend on length as well as on "
        + (
            "the head: uniform attention gives query i an entropy of ln of the number of keys it can read, "
            + (
                "i + 1 (or W on a sliding layer past its window W), "
                if run.traits.sliding_layers and max(run.n_tokens, T_b) > run.traits.widest_window
                else "i + 1, "
            )
            + f"a mean of {most_a:.2f} against {most_b:.2f} nats here"
            + (" in a full layer" if run.traits.sliding_layers else "")
            if run.traits.causal
            else f"the head: uniform attention gives each key 1/T and an entropy of ln T ({most_a:.2f} against "
            f"{most_b:.2f} nats here)"
        )
        + ", so part of a change in a share or in the raw entropy is the length. 'entropy / ln T' divides that "
        "part out."
        if T_b != run.n_tokens
        else f"Both have {T_b} tokens: the length is the same, so the change is the heads'."
    )
    st.dataframe(
        [
            {"layer": l, "head": h, "yours": round(a, 3), "compared": round(b, 3), "change": round(b - a, 3)}
            for l, h, a, b in top
        ],
        hide_index=True,
    )
else:
    st.info("Type a second sentence to compare.")

st.header("Raw attention, rollout and value-weighted, for one token")
default = (
    run.n_tokens - 1 if run.traits.causal else atlas.find_token(run.tokens, "mole", 1)
)  # causal: the one that reads all
tok = ui.token_picker("Token", run.tokens, default, "views_tok")
with st.spinner("Computing rollout and value-weighted attention..."):
    tv = ui.cached_token_views(inp, tok)
top = max(float(rows.max()) for rows in tv.values())
for name, rows in tv.items():  # one under another: side by side, a third of the page ran the key labels together
    ui.chart(plots.atlas.token_rows(rows, run.tokens, f"{name}: “{plots.common.token_label(run.tokens[tok])}”", top))
st.caption(
    f"One colour scale for the three (0 to {top:.2f}): colour = the share of the token's reading that goes to "
    "each key (columns), per layer (rows). Raw attention is one layer's weights averaged over heads; rollout "
    "multiplies them through "
    "the layers with the residual as 0.5 I (Abnar & Zuidema 2020); value-weighted is the norm of "
    "what each key actually adds to the token's output, ||sum over heads of alpha f(x)|| "
    "(Kobayashi et al. 2020), scaled to sum to 1. "
    "Attention shows where a head reads, not why the model decides what it does "
    "(Jain & Wallace 2019; Wiegreffe & Pinter 2019)."
    + (
        " In a causal model a token reads only the tokens before it, and rollout drifts to the first token through "
        f"the layers whatever the heads do: with every head spreading its weight evenly, {run.n_layers} layers would "
        f"already give the first token "
        f"{atlas.even_rollout_share(run.n_layers, run.n_tokens, tok, run.traits.windows):.0%} of this token's rollout"
        + (" (each layer over the keys its window leaves)" if run.traits.sliding_layers else "")
        + ". Read that column as the structure, not as something the heads learned."
        if run.traits.causal
        else ""
    )
)
st.download_button(
    "Measures of every head (.csv)", atlas.to_csv(m), file_name="head_measures.csv", mime="text/csv", on_click="ignore"
)
ui.words(
    "[CLS] and [SEP]",
    "first token",
    *(("causal mask",) if run.traits.causal else ()),
    "attention patterns",
    "attention rollout",
    "confidence",
    "value-weighted attention",
    "nats",
)
