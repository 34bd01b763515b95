"""The `memfleet` command line: one module per command group."""

from worker.cli.main import main

__all__ = ["main"]
