"""Deprecated for one release: `memfleet api` serves the memory API (docs/api.md).

``python -m api_stub.serve`` runs what it always ran, the memory API with the chat
stand-in plugged in (api_stub.chat_app: its routes with MEMFLEET_CHAT_STANDIN), with
the same options. Use `memfleet api` for the product, ``python -m api_stub.chat_app``
for the stand-in.
"""

import sys

from api_stub.chat_app import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m api_stub.serve"))
