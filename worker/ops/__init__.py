"""Operator commands on users' memory: erase and consent, access export, import,
re-embed, expiry, dead letters, the demo."""
