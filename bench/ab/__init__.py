"""Revision A/B harnesses: this checkout beside another git revision, interleaved in one
run on one machine (docs/bench.md, "Comparing two versions on this machine")."""
