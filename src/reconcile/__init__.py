"""One reconcile pass in GARM, and the removal teardown: everything that writes to GARM.

``chain`` runs the pass (credentials, entities, charmed template, scale sets, then deletions in
reverse); ``credentials``, ``entities`` and ``charmed_template`` each own one kind of object;
``scalesets`` owns the scale-set pass; ``teardown`` deletes what the charm made on removal.
Nothing here imports ops or a Juju-side module: the charm hands in a ``DesiredState``.
"""
