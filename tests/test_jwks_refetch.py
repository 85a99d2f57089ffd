"""Issue 24 item 11: a flood of invented ``kid``s cannot spend the refetch a rotated key needs.

Unit tests of :class:`JwksCache` with a clock the test controls and an in-memory provider (the
fetch is replaced; the wire tests in test_jwt_auth.py use a real loopback JWKS server): each kid
shape refetches at most once per interval, the provider's own shape keeps a slot of its own,
and the other shapes share a bounded number of slots.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from jwt_support import RsaKey

from fastapi_mcp_ctx._auth import jwks
from fastapi_mcp_ctx._auth.jwks import OTHER_SHAPE_SLOTS, JwksCache, kid_shape

INTERVAL = 30.0


class Provider:
    """The identity provider's JWKS, as a test publishes it; counts fetches."""

    def __init__(self, *keys: RsaKey) -> None:
        self.keys = list(keys)
        self.fetches = 0

    async def fetch(self, url: str) -> Any:
        self.fetches += 1
        return {"keys": [key.jwk() for key in self.keys]}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def keys() -> dict[str, RsaKey]:
    return {"current": RsaKey.generate("key-2026-11"), "rotated": RsaKey.generate("key-2026-12")}


def cache_for(provider: Provider, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> JwksCache:
    monkeypatch.setattr(jwks, "fetch_json", provider.fetch)
    return JwksCache("https://idp.example.test/jwks.json", ttl=300.0, refetch_interval=INTERVAL, clock=clock)


async def test_a_flood_of_invented_kids_does_not_starve_a_key_rotated_in_just_after(
    keys: dict[str, RsaKey], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, clock = Provider(keys["current"]), Clock()
    cache = cache_for(provider, clock, monkeypatch)
    assert await cache.key("key-2026-11") is not None
    assert provider.fetches == 1
    for _ in range(200):  # random ids: one shape, one refetch
        assert await cache.key(str(uuid.uuid4())) is None
    assert provider.fetches == 2
    clock.now += 1.0
    provider.keys.append(keys["rotated"])  # the provider rotates a key in and signs with it at once
    assert await cache.key("key-2026-12") is not None  # before: refused until the 30 s slot came back
    assert provider.fetches == 3


async def test_each_shape_refetches_once_per_interval(keys: dict[str, RsaKey], monkeypatch: pytest.MonkeyPatch) -> None:
    provider, clock = Provider(keys["current"]), Clock()
    cache = cache_for(provider, clock, monkeypatch)
    await cache.key("key-2026-11")
    for _ in range(5):
        assert await cache.key("key-2099-99") is None  # the provider's shape, a key it never published
    assert provider.fetches == 2
    clock.now += INTERVAL - 0.5
    assert await cache.key("key-2099-98") is None
    assert provider.fetches == 2
    clock.now += 1.0
    provider.keys.append(keys["rotated"])
    assert await cache.key("key-2026-12") is not None
    assert provider.fetches == 3


async def test_invented_shapes_share_a_bounded_number_of_slots(keys: dict[str, RsaKey], monkeypatch: pytest.MonkeyPatch) -> None:
    provider, clock = Provider(keys["current"]), Clock()
    cache = cache_for(provider, clock, monkeypatch)
    await cache.key("key-2026-11")
    for length in range(1, 100):  # 99 distinct shapes
        assert await cache.key("x" * length) is None
    assert provider.fetches == 1 + OTHER_SHAPE_SLOTS
    provider.keys.append(keys["rotated"])
    assert await cache.key("key-2026-12") is not None  # the provider's own shape keeps its slot
    clock.now += INTERVAL
    assert await cache.key("x" * 200) is None  # the shared slots come back after the interval
    assert provider.fetches == 3 + OTHER_SHAPE_SLOTS


def test_kid_shapes() -> None:
    assert kid_shape("key-2026-11") == kid_shape("key-2026-12") == "11:-9a"
    assert kid_shape(str(uuid.uuid4())) == kid_shape(str(uuid.uuid4())) == "36:-9a"
    assert kid_shape("Ab_9") == "4:9A_a" and kid_shape("é") == "1:?" and kid_shape(None) == "none"


def test_a_document_nested_past_the_stack_is_a_valueerror_the_callers_turn_into_503() -> None:
    """``fetch_json`` promises OSError/ValueError (the JWKS cache and discovery catch those and
    answer 503); a body of 200 000 ``[`` made ``json.loads`` raise RecursionError, which escaped as a 500."""
    import http.server  # noqa: PLC0415
    import threading  # noqa: PLC0415

    class Deep(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook name
            body = b"[" * 200_000
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the http.server signature
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Deep)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(ValueError, match="nested too deeply"):
            jwks._fetch_sync(f"http://127.0.0.1:{server.server_address[1]}/jwks.json")  # pyright: ignore[reportPrivateUsage]
    finally:
        server.shutdown()
        server.server_close()
