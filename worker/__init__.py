"""memfleet's worker side, one package per audience (docs/architecture.md):

- ``worker.client``: what a chat server imports (the hand-over, status, events);
- ``worker.read``: reading memory back for a prompt;
- ``worker.protocol``: the Redis protocol both halves speak (docs/protocol.md);
- ``worker.fleet``: the worker processes; ``worker.pipeline``: one run's stages;
- ``worker.store``: PostgreSQL and every SQL statement; ``worker.providers``: the models;
- ``worker.ops`` and ``worker.cli``: the operator's commands (``memfleet``);
- the top-level modules (config, errors, telemetry, memory_rules, ...): what all share.
"""
