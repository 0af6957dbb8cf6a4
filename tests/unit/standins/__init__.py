"""Tests of the test parts: the GARM emulator, the GitHub and provider stand-ins, the helpers."""
