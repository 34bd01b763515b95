# The MCP server over streamable HTTP (`memfleet mcp --http`, docs/mcp.md): memfleet's
# wheel and requirements/mcp.txt (runtime + the `api` and `mcp` extras). Built from the
# repository root by compose, or: docker build -f deploy/compose/mcp.Dockerfile -t memfleet-mcp .
# Its own image rather than a variant of api.Dockerfile: the memory API's image stays
# without the MCP SDK and what it pulls (cryptography, jsonschema, sse-starlette, ...),
# and each Dockerfile names its one lock file. The api extra in mcp.txt adds three small
# packages (fastapi, annotated-doc, httptools); uvicorn then parses with httptools, as in
# `make venv`.
FROM python:3.11.14-slim@sha256:c8271b1f627d0068857dce5b53e14a9558603b527e46f1f901722f935b786a39 AS build
WORKDIR /src
# pip and setuptools from the lock (hash-checked), then the wheel built with them:
# no build dependency is fetched unpinned.
COPY requirements/build.txt ./requirements/
RUN pip install --no-cache-dir --require-hashes -r requirements/build.txt
COPY pyproject.toml ./
COPY worker ./worker
COPY api_stub ./api_stub
COPY schema ./schema
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels .

FROM python:3.11.14-slim@sha256:c8271b1f627d0068857dce5b53e14a9558603b527e46f1f901722f935b786a39
# Dependencies from the lock, hash-checked; the wheel alone without them (--no-deps).
COPY requirements/build.txt requirements/mcp.txt /tmp/requirements/
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --require-hashes -r /tmp/requirements/build.txt \
    && pip install --no-cache-dir --require-hashes -r /tmp/requirements/mcp.txt \
    && pip install --no-cache-dir --no-deps /wheels/*.whl \
    && rm -rf /wheels /tmp/requirements \
    && groupadd --system --gid 10001 memfleet \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin memfleet
# Numeric, so that Kubernetes' runAsNonRoot can verify it (a name it cannot); the
# manifests and compose run it with a read-only root file system and /tmp writable.
USER 10001:10001
# The memory API's URL: --api-url, or MEMFLEET_API_URL in the environment.
CMD ["memfleet", "mcp", "--http", "--host", "0.0.0.0", "--port", "8090"]
