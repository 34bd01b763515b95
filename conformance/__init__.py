"""The conformance suite: any client of the hand-over protocol (docs/protocol.md),
driven through a small adapter program (JSON lines on stdin and stdout), against a
real Redis, a real PostgreSQL, the LLM stub and a real memfleet worker.

    python -m conformance --adapter "python -m conformance.adapters.python_adapter"

docs/conformance.md lists the checks and the adapter protocol. Nothing imports this
package; it imports worker.* (the reference) and api_stub.llm_stub (the model stub).
"""
