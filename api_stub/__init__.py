"""Two stand-ins around memfleet, for tests, benches and demos; not the product.

- The chat stand-in (``chat_*``): one chat turn done the way a chat server
  should, handing the session over to the workers. ``chat_app`` serves it
  plugged into the memory API (worker.api, the product, which never imports
  api_stub): ``python -m api_stub.chat_app``. ``serve`` is the deprecated
  ``python -m api_stub.serve``, the same thing, kept for one release.
- The LLM stub (``llm_*``): an OpenAI-compatible server for tests and demos. It
  imports nothing of the chat stand-in or of worker.api and needs no database
  or Redis.
"""
