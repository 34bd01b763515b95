# The memory API and the LLM stub for deploy/compose: memfleet's wheel with the
# `api` extra (FastAPI, uvicorn, PyJWT). Built from the repository root by compose.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml ./
COPY worker ./worker
COPY api_stub ./api_stub
COPY schema ./schema
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
COPY --from=build /wheels /wheels
RUN whl="$(ls /wheels/*.whl)" \
    && pip install --no-cache-dir "${whl}[api]" \
    && rm -rf /wheels \
    && useradd --system --no-create-home memfleet
USER memfleet
CMD ["python", "-m", "api_stub.serve", "--host", "0.0.0.0", "--port", "8088"]
