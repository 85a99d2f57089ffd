"""Mechanisms the server drives beyond one request/response: the replica bus, change
notifications (2025 GET streams, 2026 ``subscriptions/listen`` streams), the per-session
resource subscription registry, server→client requests with the table of their pending
answers, resumable 2025 SSE streams (the event store, connections that tail it,
``Last-Event-ID`` resumption) and graceful shutdown (DESIGN.md "Layout as it grows", decision 9)."""
