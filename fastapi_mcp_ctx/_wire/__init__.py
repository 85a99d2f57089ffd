"""Bytes and messages, pure and without I/O: JSON-RPC frames, the era envelope, list cursors, URI
templates, the text rules of outgoing messages.

Imports only the leaves (``errors``, ``settings``); everything above the wire imports it.
"""
