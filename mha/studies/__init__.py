"""Studies that score the model's structure on its own task: they combine mha.tasks with mha.analyses."""
