"""The servers the benchmark compares, one ASGI ``app`` per module, each run in its own uvicorn process.

``tools`` holds what every server registers (framework-free); ``sdk_server`` (official ``mcp``),
``fastmcp_server`` (``fastmcp``) and ``fastapi_ceiling`` (bare FastAPI) import it, and so does the
project's own ``examples/bench_app.py``.
"""
