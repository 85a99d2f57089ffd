"""Several replicas of one app through Redis (DESIGN.md decision 9): ``link`` (the clients), the Redis forms of
``_transport``'s stores (``redis_sessions``, ``redis_events``, ``redis_bus``, ``redis_subscriptions``), ``relay``
(what one replica forwards to the others); only ``relay`` and ``stores`` work without the ``redis`` extra.

Imports ``_transport``, ``backends``, ``_wire`` and the leaves; imported by ``_server`` and ``router``.
"""
