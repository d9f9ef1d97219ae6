"""The lesson: its steps, the answers computed on the learner's sentence, the recap, the glossary and the examples."""
