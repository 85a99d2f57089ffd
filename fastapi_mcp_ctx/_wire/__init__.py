"""Bytes and messages, pure and without I/O: JSON-RPC frames, the era envelope, list cursors, URI
templates, the text rules of outgoing messages.

Imports only ``errors`` (``settings`` is its sibling in the layers contract); everything above the wire imports it.
"""
