"""The scripts that run inside the workload container, each one self-contained file.

``garm_entrypoint.py`` (pushed by the charm, run by Pebble: GARM's config rendered, GARM
exec'd) and ``provider_shim.py`` (built into the image by ``rockcraft.yaml``: GARM's provider
executable). Standard library only; they import nothing of the charm, nor each other. The charm
imports from the entrypoint the environment it writes for it (the contracts in
``pyproject.toml``).
"""
