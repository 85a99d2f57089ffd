"""The replica bus: moves notifications to whichever process holds the stream they belong to.

DESIGN.md decision 9: several replicas serve one endpoint without sticky sessions, so a
notification published on one replica may have to reach a stream held by another. The
:class:`MessageBus` Protocol is that channel (pub/sub, at-most-once, no replay);
:class:`MemoryBus` is its in-process twin (one replica, or several routers in one process
sharing it, as the tests do). A network bus (Redis pub/sub) implements the same four methods.

Channels used by :mod:`fastapi_mcp_ctx._transport.notifications`:

- ``events``: every replica listens; list changes and 2026 resource updates, each
  published once and delivered by each replica to the streams it holds.
- ``session.<tenant key>.<session id>``: the replica holding that 2025 session's GET stream
  listens; the publisher learns from the receiver count whether any replica holds it.

A message is a JSON object; a bus carries its JSON form, so every handler receives a fresh,
JSON-decoded copy (the memory twin round-trips it too, so a value a network bus could not
carry fails in tests as well).
"""

from __future__ import annotations

import base64
import logging
import os
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol, runtime_checkable

from pydantic_core import PydanticSerializationError, from_json, to_json

__all__ = [
    "EVENTS_CHANNEL",
    "Handler",
    "MemoryBus",
    "MessageBus",
    "Unsubscribe",
    "add_handler",
    "encode_message",
    "replica_id",
    "session_channel",
    "session_prefix",
]

logger = logging.getLogger("fastapi_mcp_ctx")

EVENTS_CHANNEL: Final = "events"
"""Channel every replica subscribes to: list changes and 2026 resource updates."""

Handler = Callable[[dict[str, Any]], None]
"""Receives one message (its own decoded copy). Runs on the bus's delivery path: it must not
block; it queues the message for a stream (or drops it) and returns."""

Unsubscribe = Callable[[], None]
"""Stops delivery to one handler at once (a network bus releases the channel in the background)."""


@runtime_checkable
class MessageBus(Protocol):
    """Publish/subscribe between replicas. At-most-once: a message published while nobody
    listens on its channel is gone (streams are not resumable through the bus)."""

    async def publish(self, channel: str, message: Mapping[str, Any]) -> int:
        """Deliver ``message`` to every current subscriber of ``channel``, on every replica.

        Returns:
            How many subscribers received it (0: nobody holds that channel now).
        Raises:
            TypeError: ``message`` is not JSON-serializable.
            StateUnavailableError: a network bus cannot be reached (never a silent 0).
        """
        ...

    async def subscribe(self, channel: str, handler: Handler) -> Unsubscribe:
        """Call ``handler`` for every message later published on ``channel``.

        Returns once the subscription is live (a message published after the return is
        delivered). The returned callable unsubscribes; calling it twice is harmless.
        """
        ...

    async def channels(self, prefix: str) -> list[str]:
        """Channels starting with ``prefix`` that have at least one subscriber on any replica."""
        ...

    async def aclose(self) -> None:
        """Drop every subscription and release connections."""
        ...


def encode_message(message: Mapping[str, Any]) -> bytes:
    """The JSON bytes a bus carries for ``message``.

    Raises:
        TypeError: a value is not JSON-serializable (named in the message).
    """
    try:
        return to_json(dict(message))
    except PydanticSerializationError as exc:
        raise TypeError(f"A bus message must be JSON-serializable: {exc}") from exc


def add_handler(
    table: dict[str, list[Handler]], channel: str, handler: Handler, on_empty: Callable[[str], None] | None = None
) -> Unsubscribe:
    """Add ``handler`` to ``table[channel]``; the returned callable removes it once (a second
    call is harmless) and calls ``on_empty(channel)`` when it was the channel's last handler."""
    table.setdefault(channel, []).append(handler)
    done = False

    def unsubscribe() -> None:
        nonlocal done
        if done:
            return
        done = True
        handlers = table.get(channel)
        if handlers is not None and handler in handlers:
            handlers.remove(handler)
            if not handlers:
                del table[channel]
                if on_empty is not None:
                    on_empty(channel)

    return unsubscribe


class MemoryBus:
    """In-process :class:`MessageBus`: handlers run synchronously inside :meth:`publish`."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = {}

    async def publish(self, channel: str, message: Mapping[str, Any]) -> int:
        encoded = encode_message(message)
        handlers = tuple(self._handlers.get(channel, ()))
        for handler in handlers:
            try:
                handler(from_json(encoded))
            except Exception:  # noqa: BLE001 - one broken handler must not starve the others
                logger.exception("bus handler on channel %r failed", channel)
        return len(handlers)

    async def subscribe(self, channel: str, handler: Handler) -> Unsubscribe:
        return add_handler(self._handlers, channel, handler)

    async def channels(self, prefix: str) -> list[str]:
        return sorted(name for name in self._handlers if name.startswith(prefix))

    async def aclose(self) -> None:
        self._handlers.clear()


def _tenant_key(tenant_id: str | None) -> str:
    """A channel-safe form of a tenant id: base64url without padding; ``~`` for no tenant."""
    if tenant_id is None:
        return "~"
    return base64.urlsafe_b64encode(tenant_id.encode()).decode("ascii").rstrip("=") or "-"


def session_prefix(tenant_id: str | None) -> str:
    """``session.<tenant key>.``: the prefix of every session channel of one tenant."""
    return f"session.{_tenant_key(tenant_id)}."


def session_channel(tenant_id: str | None, session_id: str) -> str:
    """The channel of one 2025 session's GET stream (the tenant is part of the name, so a
    session of another tenant is never reached by a caller that names only its id)."""
    return session_prefix(tenant_id) + session_id


_replica: str | None = None


def _forget_replica() -> None:
    global _replica
    _replica = None


os.register_at_fork(after_in_child=_forget_replica)  # a forked child makes its own at first use


def replica_id() -> str:
    """This process's random replica identity (16 hex characters).

    Made at first use, never at import, and made again in a forked child (forgotten at the
    fork), so pre-fork servers (gunicorn workers) never share one; no ``getpid`` system call a
    request. Names this replica's own channel for messages addressed to it (answers to
    server→client requests it waits for).
    """
    global _replica
    if _replica is None:
        _replica = secrets.token_hex(8)
    return _replica
