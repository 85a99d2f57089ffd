"""Mechanisms the server drives beyond one request/response: the replica bus, change
notifications (2025 GET streams, 2026 ``subscriptions/listen`` streams), the per-session
resource subscription registry, and server→client requests with the table of their pending
answers (DESIGN.md "Layout as it grows", decision 9)."""
