"""Keys, tokens and a loopback JWKS / authorization-server metadata server for the auth tests.

:class:`KeyServer` is a real HTTP server on 127.0.0.1 (a thread, port chosen by the OS) serving
``/jwks.json`` from a mutable key list, ``/.well-known/oauth-authorization-server`` and
``/.well-known/openid-configuration``; it counts the requests per path and can be made
unreachable (``down = True`` answers 503, ``stop()`` closes the socket).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

RESOURCE = "https://mcp.example.test/mcp"
METADATA_URL = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"


@dataclass
class RsaKey:
    kid: str
    private: rsa.RSAPrivateKey

    @classmethod
    def generate(cls, kid: str) -> RsaKey:
        return cls(kid, rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def jwk(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
        return {**data, "kid": self.kid, "use": "sig", "alg": "RS256"}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    def sign(self, claims: dict[str, Any], *, kid: str | None = None, alg: str = "RS256") -> str:
        """A token signed with this key; its header names ``kid`` (default: this key's)."""
        return jwt.encode(claims, self.private, algorithm=alg, headers={"kid": kid or self.kid})


def claims(issuer: str, **overrides: Any) -> dict[str, Any]:
    """Valid claims for ``RESOURCE`` (``None`` values are dropped)."""
    now = int(time.time())
    values: dict[str, Any] = {
        "iss": issuer,
        "aud": RESOURCE,
        "sub": "alice",
        "tid": "tenant-a",
        "client_id": "client-1",
        "scope": "notes:read",
        "iat": now,
        "nbf": now,
        "exp": now + 300,
    }
    values.update(overrides)
    return {k: v for k, v in values.items() if v is not None}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(claims_: dict[str, Any], alg: Any = "none") -> str:
    """A token with ``alg`` (``none``, None...) and an empty signature."""
    header = b64(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    return f"{header}.{b64(json.dumps(claims_).encode())}."


@dataclass
class KeyServer:
    keys: list[RsaKey] = field(default_factory=list)
    hits: Counter[str] = field(default_factory=Counter)
    down: bool = False
    delay: float = 0.0
    """Seconds each answer waits (a slow identity provider)."""
    url: str = ""
    _server: ThreadingHTTPServer | None = None

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/jwks.json"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@contextmanager
def key_server(*keys: RsaKey, issuer_path: str = "") -> Iterator[KeyServer]:
    state = KeyServer(list(keys))

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            state.hits[self.path] += 1
            if state.delay:
                time.sleep(state.delay)
            if self.path == "/moved.json":  # a redirect off https/loopback: must not be followed
                self.send_response(302)
                self.send_header("Location", "http://203.0.113.9/jwks.json")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            issuer = state.url + issuer_path
            documents = {
                "/jwks.json": {"keys": [k.jwk() for k in state.keys]},
                f"/.well-known/oauth-authorization-server{issuer_path}": {"issuer": issuer, "jwks_uri": state.jwks_url},
            }
            document = documents.get(self.path)
            status = 503 if state.down else (200 if document is not None else 404)
            body = json.dumps(document if status == 200 else {"error": "unavailable"}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state._server = server
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stop()
        thread.join(timeout=5)
