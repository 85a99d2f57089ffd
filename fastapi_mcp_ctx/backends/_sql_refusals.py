"""Which SQL failures a retry cannot fix, and the database's own error text for the log.

A statement the database refuses (SQLSTATE classes 0A, 22, 23, 28, 3D, 3F, 42, or SQLAlchemy's
``DataError`` / ``IntegrityError`` / ``ProgrammingError`` / ``NotSupportedError``) fails the same
way on every retry: the backend raises it as a configuration error, anything else as a
retryable outage (``backends.sql``).
"""

from __future__ import annotations

from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, NotSupportedError, ProgrammingError

__all__ = ["refused_kind", "server_text"]


# SQLSTATE classes a retry cannot fix (asyncpg errors reach SQLAlchemy as a bare DBAPIError,
# so the class of the code decides): 0A not supported, 22 data, 23 integrity, 28 invalid
# authorization, 3D no such database, 3F no such schema, 42 syntax or access rule.
_REFUSED_SQLSTATE = {
    "0A": "NotSupportedError",
    "22": "DataError",
    "23": "IntegrityError",
    "28": "InvalidAuthorization",
    "3D": "InvalidCatalogName",
    "3F": "InvalidSchemaName",
    "42": "ProgrammingError",
}
_REFUSED_TYPES = (DataError, IntegrityError, ProgrammingError, NotSupportedError)


def refused_kind(exc: BaseException) -> str | None:
    """The kind of a refusal a retry cannot fix (``"DataError, SQLSTATE 22001"``), or None."""
    sqlstate = getattr(exc.orig, "sqlstate", None) if isinstance(exc, DBAPIError) else None
    if isinstance(sqlstate, str) and sqlstate[:2] in _REFUSED_SQLSTATE:
        return f"{_REFUSED_SQLSTATE[sqlstate[:2]]}, SQLSTATE {sqlstate}"
    if isinstance(exc, _REFUSED_TYPES):
        return type(exc).__name__
    return None


def server_text(exc: BaseException) -> str:
    """The database's own error text (the driver's exception, without SQL or bound values)."""
    orig = exc.orig if isinstance(exc, DBAPIError) else None
    return " ".join(str(orig if orig is not None else exc).split())[:500]
