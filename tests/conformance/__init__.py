"""Tests that pin GARM's behaviour, run against both real GARM and the emulator."""
