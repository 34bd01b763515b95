"""`memfleet mcp`: the memory tools and the known-facts block over the Model Context
Protocol (the `mcp` extra; docs/mcp.md). Nothing here is imported without that extra
but this docstring: worker.cli.mcp imports the server when the command runs."""
