"""The Juju unit-agent stand-in: the packed charm run as Juju runs it (hook tools as processes)."""
