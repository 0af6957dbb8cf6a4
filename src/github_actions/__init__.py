"""The charm's own door to GitHub's Actions service (ADR 0016): ``from github_actions import``.

One runner scale set looked up by name and deleted, with the configurator's GitHub App
(``scale_sets``). Knows neither Juju nor GARM: the GARM side may use it, it imports nothing of
the charm (the contracts in ``pyproject.toml``).
"""

from github_actions.scale_sets import (
    ActionsClient,
    GitHubError,
    GitHubScaleSet,
    GitHubTarget,
    app_jwt,
    refused_as_taken,
)

__all__ = [
    "ActionsClient",
    "GitHubError",
    "GitHubScaleSet",
    "GitHubTarget",
    "app_jwt",
    "refused_as_taken",
]
