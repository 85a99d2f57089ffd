"""The stdio transport: an app's ``McpRouter`` served on a process's stdin/stdout (``serve``), one
connection (``session``), its framing, batches and notifications.

Imports ``router`` and everything below it; imported by ``cli`` only.
"""
