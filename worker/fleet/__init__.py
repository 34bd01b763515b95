"""The fleet's runtime: ARQ settings, the job and its outcomes, heartbeats, metrics, the webhook."""
