"""The scale-set pass and what it drives: names, bodies, templates, retirement, sweep, runners.

``reconciler`` is the pass; ``table`` and ``progress`` read its results for the action and the
status. Nothing here imports ops or a Juju-side module.
"""
