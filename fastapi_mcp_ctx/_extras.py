"""The package extras (``pip install "fastapi-mcp-ctx[sql]"``) and the error for a missing one.

A feature whose extra is not installed fails where it is configured (``McpRouter(...)``,
``backend_from_url``, a CLI command) with a :class:`~fastapi_mcp_ctx.errors.ConfigurationError`
naming the ``pip install`` to run, never with a bare ``ModuleNotFoundError`` at first use.
"""

from __future__ import annotations

from .errors import ConfigurationError

__all__ = ["EXTRAS", "missing_extra"]

EXTRAS: dict[str, frozenset[str]] = {
    "cli": frozenset({"click", "httpx"}),
    "server": frozenset({"uvicorn", "click"}),
    "redis": frozenset({"redis"}),
    "sql": frozenset({"sqlalchemy", "greenlet", "alembic", "aiosqlite", "asyncpg"}),
    "jwt": frozenset({"jwt", "cryptography"}),
}
"""The top-level modules each extra of ``pyproject.toml`` brings (a test holds them in step).
A module in two extras (``click``) is reported with the first."""


def missing_extra(exc: ModuleNotFoundError, needed_by: str) -> ConfigurationError:
    """The :class:`ConfigurationError` for an extra's module that is not installed.

    Args:
        exc: the import failure (``exc.name`` is the missing module).
        needed_by: what needed it, for the message (``"the storage URL redis://"``).

    Returns:
        ``ConfigurationError('… pip install "fastapi-mcp-ctx[redis]"')``; raise it ``from exc``.

    Raises:
        ModuleNotFoundError: ``exc`` itself when the module belongs to no extra (a real bug).
    """
    top = (exc.name or "").split(".", 1)[0]
    extra = next((name for name, modules in EXTRAS.items() if top in modules), None)
    if extra is None:
        raise exc
    return ConfigurationError(
        f"{needed_by} needs the {extra!r} extra of fastapi-mcp-ctx (module {top!r} is not installed): "
        f'pip install "fastapi-mcp-ctx[{extra}]"'
    )
