"""House rules: what holds for the whole repository (boundaries, sizes, docs, workflows, rock)."""
