"""The parts :class:`~fastapi_mcp_ctx.context.Context` is assembled from: the call's state, its
read-only view, what it sends, what it asks, its content, logging and cancellation.

May import ``consent``, ``state``, the declarations (``contracts``, ``enrichment``, ``inputs``...), ``_wire``
and the leaves, never ``context`` itself; imported by ``context`` and every layer above it.
"""
