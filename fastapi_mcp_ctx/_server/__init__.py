"""The HTTP exchange of both eras: the front door (``endpoint``, ``http``, ``authn``), the 2025 session
gate, batches, the method tables (``dispatch``, ``call_prep``, ``outcomes``) and input rounds.

Imports ``_handlers``, ``_transport``, ``_replicas`` and below; imported by ``router``, ``_stdio`` and ``testing``.
"""
