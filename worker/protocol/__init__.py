"""The Redis hand-over protocol, both halves: keys, scripts, payload, job format
and events (docs/protocol.md). The client and the fleet stand on it."""
