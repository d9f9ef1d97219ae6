"""Example sentences: the lesson's own, and a few that show something worth seeing."""

from __future__ import annotations

DEFAULT_TEXT = "The mole on his arm was not a mole but a rare insect."
MAKING_DIFFICULT = (
    "It is in this spirit that a majority of American governments have passed new laws "
    "since 2009 making the registration or voting process more difficult."
)
EXAMPLES = {
    "Two moles": DEFAULT_TEXT,
    "Making ... more difficult": MAKING_DIFFICULT,
    "Coreference": "The trophy did not fit in the suitcase because it was too big.",
    "Long paragraph": (
        "Attention lets every token look at every other token and take a weighted average of "
        "what it finds. A single head has one set of weights per token, so it must blend every "
        "kind of relation into one average: the verb that agrees with its subject, the pronoun "
        "that points back to a name, the adjective that colours a noun, the word just before. "
        "Multi-head attention runs several of these averages side by side. Each head projects "
        "the tokens into its own smaller space with its own learned matrices, attends there, "
        "and hands back a short vector; the vectors are joined end to end and mixed by one more "
        "matrix. Because the projections differ, the heads can specialise: one may follow "
        "syntax, another may track meaning, another may simply look at the next word. If all "
        "heads shared one projection they would compute the same thing, and the extra heads "
        "would add cost without adding a single new point of view. Researchers who studied "
        "BERT found heads that attend to the separator token, heads that attend to the previous "
        "or next word, and heads that link determiners to their nouns or objects to their verbs."
    ),
}
