"""Bearer JWT verification for ``MCP_AUTH_MODE=jwt`` and ``oauth`` (OAuth 2.1 resource server).

:class:`JwtVerifier` is built once from :class:`McpSettings` (a misconfiguration is a
:class:`ConfigurationError` naming the setting, at start-up) and verifies one
``Authorization: Bearer <jwt>`` per HTTP request:

0. a token longer than ``MCP_JWT_MAX_TOKEN_BYTES`` (16 KiB) is refused before any of it is
   decoded; otherwise it is decoded and parsed once (:func:`~fastapi_mcp_ctx._auth.jws.read_compact`),
   and every later step works on what was read;
1. the header ``alg`` must be in the allow-list (``none`` never is; HMAC algorithms only with
   ``MCP_JWT_SECRET``, never beside a JWKS, so an RSA public key can never serve as an HMAC
   secret);
2. the key is the JWKS entry named by ``kid`` (:class:`~fastapi_mcp_ctx._auth.jwks.JwksCache`: an
   unknown ``kid`` refetches once, rate-limited per ``kid`` shape); a JWK whose algorithm differs
   is refused;
3. pyjwt's algorithm object checks the signature over the signing input read in step 0; then
   ``exp`` (required), ``nbf``, ``iat`` (not in the future), ``iss`` (exact), ``aud`` (one of
   ``MCP_JWT_AUDIENCE``, default ``MCP_RESOURCE_URL`` with and without a trailing slash: RFC 8707,
   a token issued for another service never passes) with ``MCP_JWT_LEEWAY`` seconds of clock skew
   (:func:`~fastapi_mcp_ctx._auth.jws.check_claims`);
4. the claims become a :class:`Principal`: ``sub``, the tenant claim (``tid``), ``client_id``
   (or ``azp``), the scopes (``scope``, space-separated, or ``scp``), every claim read-only.

A token that verified is remembered (at most 4096 tokens, the oldest dropped first) until its
``exp`` (+ leeway) or for ``MCP_JWT_CACHE_SECONDS`` (default 60, 0: never), whichever comes first,
so a client sending the same token on every request pays the signature check once; a refused
token is never remembered. A key withdrawn from the JWKS is still trusted until the key set is
fetched again (``MCP_JWT_JWKS_CACHE_SECONDS``, 300 s, then one background refresh), and a token
already seen until its remembered verdict expires (``MCP_JWT_CACHE_SECONDS`` after that).

Every refusal is :class:`InvalidTokenError` (401, ``WWW-Authenticate: Bearer
error="invalid_token", resource_metadata="…"``) with a generic message; the cause is logged at
debug level. Two causes are named on the wire, because they are the token's shape and no secret:
a token over the size bound, and an ``exp``, ``nbf`` or ``iat`` that is not a finite JSON number (a numeric string, a boolean,
``Infinity``) breaks RFC 7519 §2 NumericDate (pyjwt would read ``"1999999999"`` as a number), so
it is refused before the signature check with ``error_description`` naming the claim. The token itself is never logged, stored or forwarded.
Spec 2025-11-25 ``basic/authorization`` §Token Handling, §Access Token Privilege Restriction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import Any, Final

from .._extras import missing_extra
from ..auth import Principal
from ..errors import AuthenticationError, ConfigurationError, InvalidTokenError
from ..settings import McpSettings
from .jwks import JwksCache, check_fetch_url, discover_jwks_uri
from .jws import CompactJws, TokenRefusal, check_claims, read_compact
from .resource_metadata import challenge

__all__ = ["JwtVerifier", "bearer_token"]

logger = logging.getLogger("fastapi_mcp_ctx")
ASYMMETRIC: Final = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
HMAC: Final = ("HS256", "HS384", "HS512")
MIN_SECRET_BYTES: Final = 32
_CACHE_ENTRIES: Final = 4096
_CACHEABLE_BYTES: Final = 8192  # longer tokens are verified every time (the cache stays small)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value (scheme case-insensitive), else None."""
    if authorization is None:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def _algorithms(settings: McpSettings, asymmetric: bool) -> tuple[str, ...]:
    allowed = tuple(settings.jwt_algorithms or (ASYMMETRIC if asymmetric else ("HS256",)))
    for alg in allowed:
        if alg.lower() == "none":
            raise ConfigurationError("MCP_JWT_ALGORITHMS must not contain 'none' (unsigned tokens are never accepted)")
        if alg not in ASYMMETRIC + HMAC:
            raise ConfigurationError(f"MCP_JWT_ALGORITHMS: unknown algorithm {alg!r}; use some of {', '.join(ASYMMETRIC + HMAC)}")
        if asymmetric and alg in HMAC:
            raise ConfigurationError(
                f"MCP_JWT_ALGORITHMS holds {alg} beside MCP_JWT_JWKS_URL / MCP_OAUTH_ISSUER: HMAC algorithms are refused "
                "where asymmetric keys are configured (a public key must never serve as an HMAC secret)"
            )
        if not asymmetric and alg not in HMAC:
            raise ConfigurationError(f"MCP_JWT_ALGORITHMS holds {alg}, which needs MCP_JWT_JWKS_URL; MCP_JWT_SECRET signs HS* only")
    return allowed


def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    raw = claims.get("scope", claims.get("scp"))
    if isinstance(raw, str):
        return frozenset(raw.split())
    if isinstance(raw, list):
        items: list[Any] = raw  # pyright: ignore[reportUnknownVariableType]
        return frozenset(s for s in items if isinstance(s, str))
    return frozenset()


class JwtVerifier:
    """Verifies bearer JWTs per :class:`McpSettings` (module docstring).

    Args:
        settings: ``auth_mode`` ``jwt`` or ``oauth`` with its ``jwt_*`` / ``oauth_issuer`` /
            ``resource_url`` settings.
        scopes_supported: the scopes named in the 401 challenge (registered scopes).
    Raises:
        ConfigurationError: a required setting is missing or contradicts another (start-up).
    """

    def __init__(self, settings: McpSettings, scopes_supported: Callable[[], Iterable[str]] = tuple) -> None:
        self.settings = settings
        self._scopes_supported = scopes_supported
        mode = settings.auth_mode
        if not settings.resource_url:
            raise ConfigurationError(
                f"MCP_AUTH_MODE={mode} needs MCP_RESOURCE_URL, the canonical URL of this MCP endpoint "
                "(e.g. https://mcp.example.com/mcp): it is the token audience and the protected resource metadata's resource"
            )
        issuer = settings.jwt_issuer or (settings.oauth_issuer if mode == "oauth" else None)
        if not issuer:
            raise ConfigurationError(f"MCP_AUTH_MODE={mode} needs MCP_JWT_ISSUER (the exact iss of accepted tokens)")
        self.issuer: str = issuer
        resource = settings.resource_url.rstrip("/")
        self.audiences: list[str] = list(settings.jwt_audience or dict.fromkeys([settings.resource_url, resource, resource + "/"]))
        self._secret: bytes | None = None
        if mode == "oauth":
            if not settings.oauth_issuer:
                raise ConfigurationError("MCP_AUTH_MODE=oauth needs MCP_OAUTH_ISSUER (the authorization server's issuer URL)")
            oauth_issuer = check_fetch_url(settings.oauth_issuer, "MCP_OAUTH_ISSUER")
            url = check_fetch_url(settings.jwt_jwks_url, "MCP_JWT_JWKS_URL") if settings.jwt_jwks_url else None
            self.jwks: JwksCache | None = JwksCache(
                url,
                ttl=settings.jwt_jwks_cache_seconds,
                refetch_interval=settings.jwt_jwks_refetch_seconds,
                locate=lambda: discover_jwks_uri(oauth_issuer),
            )
        elif settings.jwt_jwks_url:
            if settings.jwt_secret:
                raise ConfigurationError("set MCP_JWT_JWKS_URL or MCP_JWT_SECRET, not both (HMAC is refused beside asymmetric keys)")
            self.jwks = JwksCache(
                check_fetch_url(settings.jwt_jwks_url, "MCP_JWT_JWKS_URL"),
                ttl=settings.jwt_jwks_cache_seconds,
                refetch_interval=settings.jwt_jwks_refetch_seconds,
            )
        elif settings.jwt_secret:
            secret = settings.jwt_secret.encode()
            if len(secret) < MIN_SECRET_BYTES:
                raise ConfigurationError(f"MCP_JWT_SECRET must have at least {MIN_SECRET_BYTES} bytes (development use only)")
            self.jwks = None
            self._secret = secret
            logger.warning("MCP_JWT_SECRET: HS256 tokens with a shared secret are meant for development only; use MCP_JWT_JWKS_URL")
        else:
            raise ConfigurationError("MCP_AUTH_MODE=jwt needs MCP_JWT_JWKS_URL (or, for development, MCP_JWT_SECRET)")
        self.algorithms = _algorithms(settings, asymmetric=self.jwks is not None)
        try:
            import jwt  # the optional extra: loaded only by an application that verifies JWTs
            import jwt.algorithms

            if not jwt.algorithms.has_crypto:
                raise ModuleNotFoundError("cryptography is not installed", name="cryptography")
        except ModuleNotFoundError as exc:
            raise missing_extra(exc, f"MCP_AUTH_MODE={mode}") from exc
        self._jwt = jwt
        self._max_token = settings.jwt_max_token_bytes
        self._hmac: dict[str, tuple[Any, Any]] = {}  # alg -> (algorithm, prepared secret), built once
        self._algorithm_objects: dict[str, Any] = {alg: jwt.algorithms.get_default_algorithms()[alg] for alg in self.algorithms}
        if self._secret is not None:
            for alg, algorithm in self._algorithm_objects.items():
                self._hmac[alg] = (algorithm, algorithm.prepare_key(self._secret))
        self._cache_seconds = settings.jwt_cache_seconds
        self._verified: dict[str, tuple[Principal, float]] = {}

    def _refuse(self, cause: str, description: str | None = None) -> InvalidTokenError:
        """The 401; ``description`` (sent as ``error_description`` and the message) only for a
        fault of the token's shape, never of a key or a secret."""
        logger.debug("bearer token refused: %s", cause)
        value = challenge(self.settings, error="invalid_token", description=description)
        return InvalidTokenError(f"Invalid token: {description}" if description else None, headers={"WWW-Authenticate": value})

    def missing(self) -> AuthenticationError:
        """The 401 for a request without a bearer token (the challenge, no ``error``)."""
        value = challenge(self.settings, scope=self._scopes_supported())
        return AuthenticationError("Unauthorized: send Authorization: Bearer <token>", headers={"WWW-Authenticate": value})

    async def verify(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization`` header value.

        Raises:
            AuthenticationError: no bearer token (401 with the challenge).
            InvalidTokenError: the token does not verify (401, ``error="invalid_token"``).
            IdentityProviderUnavailableError: no signing key can be fetched (503).
        """
        if authorization is not None and len(authorization) > self._max_token + 64:  # before strip/partition copy it
            raise self._refuse(
                f"an Authorization header of {len(authorization)} bytes", f"the token is longer than {self._max_token} bytes"
            )
        token = bearer_token(authorization)
        if token is None:
            raise self.missing()
        cached = self._verified.get(token)
        if cached is not None:
            if time.time() < cached[1]:
                return cached[0]
            self._verified.pop(token, None)
        principal, until = await self._verify(token)
        if self._cache_seconds > 0 and len(token) <= _CACHEABLE_BYTES:
            if len(self._verified) >= _CACHE_ENTRIES:
                self._verified.pop(next(iter(self._verified)), None)  # the oldest entry
            self._verified[token] = (principal, min(until, time.time() + self._cache_seconds))
        return principal

    async def _verify(self, token: str) -> tuple[Principal, float]:
        """Full verification: the principal and the time (epoch seconds) it stops being valid.
        The token is decoded once (:func:`read_compact`); nothing below decodes it again."""
        try:
            jws = read_compact(token, self._max_token)
        except TokenRefusal as refusal:
            raise self._refuse(refusal.cause, refusal.description) from None
        alg = jws.header.get("alg")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise self._refuse(f"algorithm {alg!r} is not allowed")
        algorithm, key = await self._key(jws, alg)
        try:
            verified = algorithm.verify(jws.signing_input, key, jws.signature)
        except (self._jwt.PyJWTError, ValueError, TypeError) as exc:
            raise self._refuse(f"signature unreadable: {type(exc).__name__}") from exc
        if not verified:
            raise self._refuse("the signature does not verify")
        claims = jws.claims
        try:
            check_claims(claims, now=time.time(), leeway=self.settings.jwt_leeway, issuer=self.issuer, audiences=self.audiences)
        except TokenRefusal as refusal:
            raise self._refuse(refusal.cause) from None
        return self._principal(claims), float(claims["exp"]) + self.settings.jwt_leeway

    async def _key(self, jws: CompactJws, alg: str) -> tuple[Any, Any]:
        """``(pyjwt algorithm object, prepared key)`` for the token's ``alg`` and ``kid``."""
        if self.jwks is None:
            return self._hmac[alg]
        kid = jws.header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise self._refuse("kid is not a string")
        jwk = await self.jwks.key(kid)
        if jwk is None:
            raise self._refuse(f"unknown key id {kid!r}")
        jwk_alg = jwk._jwk_data.get("alg")  # pyright: ignore[reportPrivateUsage]
        if jwk_alg is not None and jwk_alg != alg:
            raise self._refuse(f"key {kid!r} is for {jwk_alg}, the token says {alg}")
        algorithm = self._algorithm_objects[alg]
        try:  # a key of another type (an EC key for RS256) is refused here
            return algorithm, algorithm.prepare_key(jwk.key)
        except (self._jwt.PyJWTError, ValueError, TypeError) as exc:
            raise self._refuse(f"key {kid!r} does not fit {alg}: {type(exc).__name__}") from exc

    def _principal(self, claims: dict[str, Any]) -> Principal:
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise self._refuse("sub is not a non-empty string")
        tenant = claims.get(self.settings.jwt_tenant_claim)
        if isinstance(tenant, int) and not isinstance(tenant, bool):
            tenant = str(tenant)
        client = claims.get("client_id", claims.get("azp"))
        return Principal(
            subject=subject,
            tenant_id=tenant if isinstance(tenant, str) and tenant else None,
            client_id=client if isinstance(client, str) else None,
            scopes=_scopes(claims),
            claims=MappingProxyType(claims),
        )
