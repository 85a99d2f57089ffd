# One image for every compose service (see compose.yaml): `fastapi-mcp-ctx migrate` creates the
# ctx.state schema, `fastapi-mcp-ctx serve` runs the quickstart app (or, in the replicas profile,
# examples/replicated_app.py with sessions on Redis). Runs as a non-root user.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY fastapi_mcp_ctx ./fastapi_mcp_ctx
RUN pip install '.[server,sql,redis,cli]'
COPY examples ./examples
RUN useradd --system --uid 10001 --home-dir /app --no-create-home --shell /usr/sbin/nologin mcp
USER 10001
EXPOSE 8000
CMD ["fastapi-mcp-ctx", "serve", "examples.quickstart:app", "--host", "0.0.0.0", "--port", "8000"]
