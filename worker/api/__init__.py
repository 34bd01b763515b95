"""The memory API: a user's facts over HTTP (list, add, remove, trace, search, erase,
export, consent), the hand-over and its events for chat servers in any language, and
the memory panel (``panel/``, package data), behind bearer tokens. `memfleet api`
serves it (``serve``; the `api` extra, docs/api.md).

``app`` builds the ASGI app and ``deps`` what its lifespan builds once; the routes
(``memory_*``, ``panel_*``, ``handover_*``, ``session_routes``, ``event_*``,
``readiness``) stand on shared plumbing: ``auth`` and ``service_auth`` (who calls),
``errors``, ``fields``, ``guards``, ``exports``, ``write_rate``, ``long_polls``,
``wait_poller``, ``key_cache``, ``read_timing``. What is served with it but is not
the product (the chat stand-in, api_stub) plugs in through ``extensions``; nothing
here imports api_stub.
"""
