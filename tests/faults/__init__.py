"""The fault campaign on real GARM (``tox -e faults``)."""
