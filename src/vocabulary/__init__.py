"""The vocabulary between the sides: what the Juju side hands the GARM side, and back.

The desired state and its frozen specs, the runner options and the runner template (with
``templates/``), the GitHub endpoint and App key checks, the notices a pass holds back, the
security events and the trace spans. It knows neither Juju nor GARM: it imports neither ``ops``
nor ``httpx``, nor any other package of ``src/`` but the container's scripts (the contracts in
``pyproject.toml``, run by ``lint-imports``).
"""
