"""Beyond one request/response: responses that may stream, 2025 session records, resumable SSE streams
and their event store, change notifications (GET and ``subscriptions/listen`` streams), server→client
requests, the replica bus's interface, graceful shutdown (DESIGN.md decision 9).

Imports ``context``, ``_context``, ``_wire`` and the leaves; imported by ``_replicas``, ``_handlers`` and above.
"""
