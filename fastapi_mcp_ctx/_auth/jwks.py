"""Signing keys of an identity provider: a JWKS fetched off the event loop and cached.

:class:`JwksCache` holds the keys by ``kid``. They are fetched at first use and again once
``ttl`` seconds passed: stale-while-revalidate, the request that finds the set expired is served
with the keys known while one refresh runs in the background (no request waits on the provider
once a key set was fetched; with none yet, the first requests wait for it). A withdrawn key is
therefore accepted until the set is fetched again (``ttl``, ``MCP_JWT_JWKS_CACHE_SECONDS``).

A token naming an unknown ``kid`` triggers one refetch, rate-limited per *kid shape* (its length
and the character classes it uses, :func:`kid_shape`): each shape refetches at most once every
``refetch_interval`` seconds. A shape that a known key has (the provider's own: providers name
keys alike) has a slot of its own; any other shape takes one of :data:`OTHER_SHAPE_SLOTS` shared
slots. So a flood of made-up key ids costs the provider at most ``OTHER_SHAPE_SLOTS`` + (known
shapes) fetches per interval, and cannot spend the refetch that a key the provider really
publishes next needs (issue 24 item 11: one global slot let a flood of invented ids refuse a
freshly rotated key for up to 30 s). An attacker who copies the provider's shape can still delay
a key published and used at the same moment by one interval; a provider that publishes keys
before signing with them (the usual practice) is never affected. A refetch waits for the
background refresh instead when one is under way; concurrent callers share one fetch. When the
provider cannot be reached the keys already known are kept (logged once per failure) and the
next attempt waits ``refetch_interval``; with no key known at all, verification answers 503
(:class:`~fastapi_mcp_ctx.errors.IdentityProviderUnavailableError`).

:func:`discover_jwks_uri` reads an authorization server's metadata: RFC 8414
(``/.well-known/oauth-authorization-server``, inserted before the issuer's path) first, then
OpenID Connect Discovery (``{issuer}/.well-known/openid-configuration``); the document's
``issuer`` must equal the configured one (RFC 8414 §3.3).

The fetch uses the standard library (``urllib``) in a worker thread, bounded in time (5 s)
and size (1 MiB); only ``https`` URLs are fetched, and ``http`` on a loopback host.
pyjwt is imported here, so only an application that verifies JWTs loads it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any, Final

import anyio
import anyio.to_thread

from ..errors import ConfigurationError, IdentityProviderUnavailableError
from .host_rules import is_loopback_host

__all__ = ["OTHER_SHAPE_SLOTS", "JwksCache", "check_fetch_url", "discover_jwks_uri", "fetch_json", "kid_shape"]

logger = logging.getLogger("fastapi_mcp_ctx")
_TIMEOUT: Final = 5.0
_MAX_BYTES: Final = 1024 * 1024
OTHER_SHAPE_SLOTS: Final = 8
"""Refetch slots per interval shared by ``kid`` shapes no known key has."""
_PUNCTUATION: Final = frozenset("-_.:=+/")


def kid_shape(kid: str | None) -> str:
    """The shape of a key id: its length and the classes of its characters (``a`` lower case,
    ``A`` upper case, ``9`` digits, ``-_.:=+/`` as themselves, ``?`` anything else), e.g.
    ``"43:-9A_a"`` for a base64url SHA-256 thumbprint; ``"none"`` without a ``kid``."""
    if kid is None:
        return "none"
    classes: set[str] = set()
    for char in kid:
        if char.islower() and char.isascii():
            classes.add("a")
        elif char.isupper() and char.isascii():
            classes.add("A")
        elif char.isdigit() and char.isascii():
            classes.add("9")
        else:
            classes.add(char if char in _PUNCTUATION else "?")
    return f"{len(kid)}:{''.join(sorted(classes))}"


def check_fetch_url(url: str, setting: str) -> str:
    """``url`` when it may be fetched (https, or http to a loopback host).

    Raises:
        ConfigurationError: another scheme, or no host; the message names ``setting``.
    """
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname or parts.scheme not in ("https", "http"):
        raise ConfigurationError(f"{setting}={url!r} must be an absolute https:// URL")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise ConfigurationError(f"{setting}={url!r} must use https:// (http is accepted for loopback hosts only)")
    return url


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to a URL :func:`check_fetch_url` admits (no https → http)."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        try:
            check_fetch_url(newurl, "a redirect")
        except ConfigurationError as exc:
            raise ValueError(str(exc)) from exc
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER: Final = urllib.request.build_opener(_CheckedRedirects)


def _fetch_sync(url: str) -> Any:
    request = urllib.request.Request(url, headers={"Accept": "application/json", "User-Agent": "fastapi-mcp-ctx"})
    with _OPENER.open(request, timeout=_TIMEOUT) as response:
        body = response.read(_MAX_BYTES + 1)
    if len(body) > _MAX_BYTES:
        raise ValueError(f"document larger than {_MAX_BYTES} bytes")
    try:
        return json.loads(body)
    except RecursionError as exc:  # nested past the stack: a broken document, not a server fault
        raise ValueError("document nested too deeply to be a JWKS or metadata document") from exc


async def fetch_json(url: str) -> Any:
    """GET ``url`` in a worker thread and parse its JSON body.

    Raises:
        OSError / ValueError: unreachable, HTTP error status, timeout, oversized or not JSON.
    """
    return await anyio.to_thread.run_sync(_fetch_sync, url)


def _discovery_urls(issuer: str) -> list[str]:
    parts = urllib.parse.urlsplit(issuer)
    path = parts.path.rstrip("/")
    base = f"{parts.scheme}://{parts.netloc}"
    return [
        f"{base}/.well-known/oauth-authorization-server{path}",  # RFC 8414 §3.1
        f"{issuer.rstrip('/')}/.well-known/openid-configuration",  # OpenID Connect Discovery §4
    ]


async def discover_jwks_uri(issuer: str) -> str:
    """The ``jwks_uri`` of the authorization server ``issuer``.

    Raises:
        IdentityProviderUnavailableError: no metadata document could be fetched (503).
        ConfigurationError: a document names another issuer, or has no usable ``jwks_uri``.
    """
    failures: list[str] = []
    for url in _discovery_urls(issuer):
        try:
            document = await fetch_json(url)
        except (OSError, ValueError) as exc:
            failures.append(f"{url}: {exc}")
            continue
        if not isinstance(document, dict):
            failures.append(f"{url}: not a JSON object")
            continue
        meta: dict[str, Any] = document  # pyright: ignore[reportUnknownVariableType]
        if meta.get("issuer") != issuer:
            raise ConfigurationError(
                f"the metadata at {url} names issuer {meta.get('issuer')!r}, not MCP_OAUTH_ISSUER={issuer!r}: "
                "set MCP_OAUTH_ISSUER to the authorization server's exact issuer identifier"
            )
        jwks_uri = meta.get("jwks_uri")
        if not isinstance(jwks_uri, str):
            raise ConfigurationError(f"the metadata at {url} has no jwks_uri: set MCP_JWT_JWKS_URL instead")
        return check_fetch_url(jwks_uri, "jwks_uri")
    logger.warning("authorization server metadata unavailable: %s", "; ".join(failures))
    raise IdentityProviderUnavailableError(retry_after=5)


class JwksCache:
    """Keys of one JWKS, by ``kid`` (pyjwt ``PyJWK`` objects).

    Args:
        url: the JWKS URL, or None when ``locate`` finds it (OAuth discovery).
        locate: coroutine giving the JWKS URL at first use (called again after a failure).
        ttl: seconds a fetched key set is used before it is fetched again.
        refetch_interval: seconds between two fetches caused by unknown key ids of one shape, or
            by failures.
        clock: monotonic seconds (a test passes its own).
    """

    def __init__(
        self, url: str | None, *, ttl: float, refetch_interval: float, locate: Any = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self._url = url
        self._locate = locate
        self._ttl = ttl
        self._interval = refetch_interval
        self._keys: dict[str | None, Any] = {}
        self._fetched_at: float = float("-inf")  # last successful fetch (monotonic)
        self._attempted_at: float = float("-inf")  # last attempt, successful or not
        self._lock = anyio.Lock()
        self._background: asyncio.Task[None] | None = None  # the refresh of an expired set, while it runs
        self._known_shapes: frozenset[str] = frozenset()  # shapes of the kids of the keys held
        self._shape_refetched: dict[str, float] = {}  # kid shape -> when it last caused a refetch
        self.fetches = 0
        """Fetches attempted so far (a test and an operator can watch it)."""

    async def key(self, kid: str | None) -> Any | None:
        """The ``PyJWK`` for ``kid`` (None: the only key of a one-key set), or None if unknown.

        Raises:
            IdentityProviderUnavailableError: no key known and the JWKS cannot be fetched.
        """
        now = self._clock()
        due = now - self._fetched_at >= self._ttl and now - self._attempted_at >= self._interval
        if due and self._keys:
            await self._revalidate()  # the known keys serve now; one refresh runs meanwhile
        elif due:
            await self._refresh(stale_ok=True)
        found = self._lookup(kid)
        if found is None:
            background = self._background
            if background is not None:  # a refresh is under way: its keys are this kid's refetch
                await asyncio.wait({background})  # its failure is logged by _refresh; a waiter's cancel spares it
                found = self._lookup(kid)
            elif not due and self._may_refetch(kid_shape(kid)):
                await self._refresh(stale_ok=True)  # a key published since: one refetch per shape and interval
                found = self._lookup(kid)
        if not self._keys and found is None:
            raise IdentityProviderUnavailableError(retry_after=max(1, int(self._interval) or 1))
        return found

    def _may_refetch(self, shape: str) -> bool:
        """Take the refetch slot of ``shape`` for this interval (module docstring); False when
        it is spent, or when every shared slot is."""
        now = self._clock()
        slots = self._shape_refetched
        for stale in [s for s, at in slots.items() if now - at >= self._interval]:
            del slots[stale]
        if shape in slots:
            return False
        if shape not in self._known_shapes and sum(1 for s in slots if s not in self._known_shapes) >= OTHER_SHAPE_SLOTS:
            return False
        slots[shape] = now
        return True

    async def _revalidate(self) -> None:
        """Start the one background refresh of an expired set (none while one runs); without an
        asyncio loop (trio) the refresh runs inline instead."""
        if self._background is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            await self._refresh(stale_ok=True)
            return
        task = loop.create_task(self._refresh(stale_ok=True))
        self._background = task
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[None]) -> None:
        self._background = None
        if not task.cancelled() and task.exception() is not None:
            logger.warning("JWKS %s background refresh failed: %r", self._url, task.exception())

    def _lookup(self, kid: str | None) -> Any | None:
        if kid is None:
            values = list(self._keys.values())
            return values[0] if len(values) == 1 else None
        return self._keys.get(kid)

    async def _refresh(self, *, stale_ok: bool) -> None:
        attempted = self._attempted_at
        async with self._lock:
            if self._attempted_at != attempted:  # another caller fetched while this one waited
                return
            self._attempted_at = self._clock()
            self.fetches += 1
            try:
                if self._url is None:
                    self._url = await self._locate()
                document = await fetch_json(self._url)
                self._keys = _parse(document)
                self._known_shapes = frozenset(kid_shape(kid) for kid in self._keys)
                self._fetched_at = self._clock()
            except (OSError, ValueError) as exc:
                logger.warning("JWKS %s unavailable (%s); %d known key(s) kept", self._url, exc, len(self._keys))
                if not stale_ok:
                    raise IdentityProviderUnavailableError(retry_after=5) from exc


def _parse(document: Any) -> dict[str | None, Any]:
    """``{kid: PyJWK}`` of a JWKS document, skipping keys not meant for signatures.

    Raises:
        ValueError: not a JWKS (no ``keys`` list) or no usable key.
    """
    import jwt  # the optional extra, loaded by applications that verify JWTs only

    raw_keys: Any = document.get("keys") if isinstance(document, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(raw_keys, list):
        raise ValueError("not a JWKS document (no 'keys' list)")
    keys: dict[str | None, Any] = {}
    for raw in raw_keys:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(raw, dict) or raw.get("use", "sig") != "sig":  # pyright: ignore[reportUnknownMemberType]
            continue
        try:
            key = jwt.PyJWK(raw)  # pyright: ignore[reportUnknownArgumentType]
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
            continue  # a key type this pyjwt cannot use: skipped, the others still serve
        kid: Any = raw.get("kid")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        keys[kid if isinstance(kid, str) else None] = key
    if not keys:
        raise ValueError("the JWKS holds no usable signing key")
    return keys
