"""The parts :class:`~fastapi_mcp_ctx.context.Context` is assembled from: the call's state, its
read-only view, what it sends, what it asks, its content, logging and cancellation.

Imports ``state``, the declarations (``contracts``, ``enrichment``, ``inputs``...), ``_wire`` and the leaves,
never ``context``; imported by ``context``, ``_transport``, ``_server``, ``_stdio`` and the package's face.
"""
