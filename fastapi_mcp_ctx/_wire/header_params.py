"""The 2026-07-28 ``Mcp-Param-*`` headers of a ``tools/call``: each argument a tool marks with
``x-mcp-header`` is mirrored in a header, which must equal it (pure functions, no I/O). Spec:
2026-07-28 ``basic/transports/streamable-http`` §Server Validation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from ..errors import HeaderMismatchError
from .envelope import decode_header_value

__all__ = ["check_header_params"]


def check_header_params(header_params: Mapping[str, str], arguments: Mapping[str, Any], headers: Mapping[str, str]) -> None:
    """2026-07-28 ``Mcp-Param-*`` headers must mirror the arguments a tool marks with
    ``x-mcp-header`` (``header_params``: argument name -> header token).

    Raises:
        HeaderMismatchError: a header missing, present without its argument, or different from
            it (-32020); numbers compare exactly (42 == 42.0, never 1e1 or 1_0).
    """
    for prop, token in header_params.items():
        raw = headers.get(f"mcp-param-{token}")
        value = arguments.get(prop)
        if value is None:
            if raw is not None:
                raise HeaderMismatchError(f"Mcp-Param-{token} header present but argument {prop!r} is absent")
            continue
        if raw is None:
            raise HeaderMismatchError(f"Missing Mcp-Param-{token} header for argument {prop!r}")
        decoded = decode_header_value(raw)
        if isinstance(value, bool):
            matches = decoded == ("true" if value else "false")
        elif isinstance(value, (int, float)):
            matches = _numbers_equal(decoded, value)  # exact: 42 == 42.0, never 1e1 or 1_0
        else:
            matches = decoded == value
        if not matches:
            raise HeaderMismatchError(f"Mcp-Param-{token} header does not match argument {prop!r}")


_DECIMAL: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")


def _numbers_equal(header: str, value: int | float) -> bool:
    if not _DECIMAL.fullmatch(header):
        return False
    try:
        return Decimal(header) == Decimal(value)
    except InvalidOperation:
        return False
