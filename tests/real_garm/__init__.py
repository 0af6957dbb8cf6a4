"""Helpers for tests that run the real GARM binary."""
