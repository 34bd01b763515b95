"""Adapters of the conformance suite: the Python client's, and a deliberately broken
one that shows the suite catches a careless port (docs/conformance.md)."""
