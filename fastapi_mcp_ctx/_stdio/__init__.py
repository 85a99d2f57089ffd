"""The stdio transport: an app's ``McpRouter`` served on a process's stdin/stdout (``serve``, ``__main__``),
one connection (``session``), its framing, batches and notifications, on ``_server``'s transport-neutral core.

Imports ``_discovery``, ``router`` and everything below; imported by ``cli`` only.
"""
