"""Tasks: a long ``tools/call`` becomes a task any replica can report, update or cancel.

One engine serves both eras' wire shapes (spec 2025-11-25 ``basic/utilities/tasks``, SEP-1686;
2026-07-28 extension ``io.modelcontextprotocol/tasks``, SEP-2663), bottom to top:

- ``records.py``: a task's record (owner, status, timestamps, ``ttlMs``, result or error, pending
  input requests and answers) as a flat map of strings, and the :class:`TaskStore` Protocol;
- ``memory_store.py`` (one process) and ``redis_store.py`` (every replica; ``MCP_SESSION_STORE_URL=redis://…``);
- ``retry.py``: the running replica's own store steps, run again through a store outage;
- ``channel.py``: a running task's questions (``ctx.elicit``, ``ctx.request_input``...) become the
  record's ``inputRequests``; answers come back from ``tasks/update`` on any replica;
- ``engine.py``: creation (durable before the answer), the background run with its renewed lease,
  cancellation and updates relayed to the running replica, shutdown;
- ``wire.py``: the methods and result shapes of both eras.

Imports ``_replicas`` (the Redis link, the relay), ``_transport``, ``_context`` and below;
imported by ``_server`` (the dispatcher's method table) and ``router.py``.
"""
