"""Three small services around the worker fleet, each in its own modules.

- The memory API (``memory_*``): a user's facts over HTTP (list, add, remove,
  trace, search, erase), behind bearer tokens.
- The chat stand-in (``chat_*``): one chat turn done the way a chat server
  should, handing the session over to the workers.
- The LLM stub (``llm_*``): an OpenAI-compatible server for tests and demos.

The memory API and the chat stand-in are served as one app (``app``, run by
``serve``) and share its plumbing: ``auth``, ``errors``, ``fields`` and
``deps``. They do not import each other; ``deps`` and ``app`` put them
together. The LLM stub imports neither and needs no database or Redis.
"""
