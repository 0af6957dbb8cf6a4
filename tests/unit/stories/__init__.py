"""Behaviour stories: the real charm through several hooks, one feature across modules."""
