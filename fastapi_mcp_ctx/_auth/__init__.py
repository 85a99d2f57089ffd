"""Who is calling and what their tokens prove: Host/Origin rules, the local-only gate, bearer JWTs
and their JWKS, per-operation scopes, RFC 9728 metadata, the sealed ``requestState``.

Imports ``auth``, ``backends``, ``settings`` and the leaves; imported by ``_handlers``, ``_server``, ``router`` and ``cli``.
"""
