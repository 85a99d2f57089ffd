# The example server with every backend driver: docker compose up (see compose.yaml).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY fastapi_mcp_ctx ./fastapi_mcp_ctx
COPY alembic ./alembic
COPY examples ./examples
RUN pip install --no-cache-dir '.[server,redis,sql]'
EXPOSE 8000
CMD ["uvicorn", "examples.quickstart:app", "--host", "0.0.0.0", "--port", "8000"]
