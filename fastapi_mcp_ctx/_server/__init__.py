"""The exchange of both eras: the HTTP front door (``claim``, ``front_door``, ``endpoint``, ``http``, ``authn``), the 2025 session gate,
batches, and the transport-neutral core stdio shares (``dispatch``, ``handshake``, ``tool_calls``, ``call_prep``, ``outcomes``, ``batch_core``).

Imports ``_handlers``, ``_transport``, ``_replicas`` and below; imported by ``router``, ``_stdio`` and ``testing``.
"""
