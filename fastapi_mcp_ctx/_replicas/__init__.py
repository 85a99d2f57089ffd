"""Several replicas of one application, through Redis (DESIGN.md decision 9).

:mod:`.link` (the Redis clients), :mod:`.redis_sessions` (session records, GET-stream
leases), :mod:`.redis_events` (the SSE event log as Redis Streams), :mod:`.redis_bus` (the
replica bus on pub/sub) and :mod:`.relay` (what one replica forwards to the others). Only
:mod:`.relay` and :mod:`.stores` import nothing of redis-py; the others need the ``redis`` extra.
"""
