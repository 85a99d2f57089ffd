"""A call's anyio cancel scope, made without anyio's per-call backend lookup.

``anyio.CancelScope()`` asks sniffio which event loop runs and looks its backend up on every
call (about 12k of the ~38k instructions a scope costs on asyncio). A call's handler scope is
made once per request, so on asyncio the backend's own class (learnt from the first scope
anyio makes) is instantiated directly; anything else (trio, a library that set sniffio's
context) goes through ``anyio.CancelScope()``. The scope is anyio's either way: shielding,
``to_thread``, task groups and nested scopes behave exactly as with ``anyio.CancelScope()``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

try:  # sniffio decides what anyio sees; it is optional in recent anyio releases
    from sniffio import current_async_library_cvar as _library_cvar
    from sniffio import thread_local as _library_thread
except ImportError:  # pragma: no cover - without sniffio anyio assumes asyncio too
    _library_cvar = None
    _library_thread = None

__all__ = ["new_cancel_scope"]

_asyncio_scope_class: type[Any] | None = None


def _plain_asyncio() -> bool:
    """True when sniffio would answer ``"asyncio"`` (no override, an asyncio task runs)."""
    if _library_cvar is not None and (_library_cvar.get() is not None or _library_thread.name is not None):  # pyright: ignore[reportOptionalMemberAccess]
        return False
    try:
        return asyncio.current_task() is not None
    except RuntimeError:
        return False


def new_cancel_scope() -> anyio.CancelScope:
    """A fresh ``anyio.CancelScope()`` (no deadline, not shielded)."""
    global _asyncio_scope_class
    if not _plain_asyncio():
        return anyio.CancelScope()
    if _asyncio_scope_class is None:
        scope = anyio.CancelScope()
        _asyncio_scope_class = type(scope)
        return scope
    scope_class = _asyncio_scope_class
    return scope_class()
