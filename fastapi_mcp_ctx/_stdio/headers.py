"""The HTTP headers of the stdio transport's synthetic requests: ``--header`` and the environment.

A desktop client launches the stdio server with a command line and an environment, never with
HTTP headers; an app's dependencies (``X-API-Key: str = Header()``) and its ``authenticate=``
read headers all the same. The headers come from two places, the command line last (it wins):

* the environment: ``MCP_STDIO_HEADER_<NAME>=value`` for each header, the name upper-cased with
  ``-`` written ``_`` (``MCP_STDIO_HEADER_X_API_KEY`` is ``X-API-Key``, sent as ``x-api-key``:
  HTTP header names are case-insensitive). One variable per header, so a desktop client's JSON
  config (``"env": {...}``) sets it without quoting JSON inside JSON;
* ``--header NAME=VALUE`` (repeatable) on ``fastapi-mcp-ctx stdio``.

Values are secrets (API keys, tokens): no message, log line or error of this module names one.
A malformed name or value is refused at start-up (:class:`~fastapi_mcp_ctx.errors.AppLoadError`:
exit 2) naming the header, never its value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

from ..errors import AppLoadError

__all__ = ["ENV_PREFIX", "stdio_headers"]

ENV_PREFIX: Final = "MCP_STDIO_HEADER_"
"""The prefix of the environment variables that each give one header (``MCP_STDIO_HEADER_X_API_KEY``)."""

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 §5.6.2 token: a header name
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # RFC 9110 §5.5: no CR, LF, NUL or other controls (tab allowed)
_HOP_BY_HOP: Final = frozenset({"host", "content-length", "content-type", "transfer-encoding", "connection"})


def _checked(name: str, value: str, source: str) -> tuple[bytes, bytes]:
    if not _TOKEN.fullmatch(name):
        raise AppLoadError(f"{source}: {name!r} is not an HTTP header name (letters, digits and - only)")
    if name.lower() in _HOP_BY_HOP:
        raise AppLoadError(f"{source}: the {name} header is the transport's own; it cannot be set")
    if _BAD_VALUE.search(value):
        raise AppLoadError(f"{source}: the value of the {name} header has a control character (a newline?); value not shown")
    try:
        encoded = value.strip().encode("latin-1")
    except UnicodeEncodeError:
        raise AppLoadError(f"{source}: the value of the {name} header is not latin-1 text (HTTP header values); value not shown") from None
    return name.lower().encode("latin-1"), encoded


def stdio_headers(options: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> list[tuple[bytes, bytes]]:
    """The synthetic request's headers, as ASGI ``scope["headers"]`` pairs (lower-case names).

    Args:
        options: ``--header`` values, each ``NAME=VALUE`` (``NAME: VALUE`` is accepted too).
        environ: the environment (``os.environ``); its ``MCP_STDIO_HEADER_<NAME>`` variables.
    Returns:
        one pair per header name, the command line's value replacing the environment's.
    Raises:
        AppLoadError: a value without ``=``, a name that is not an HTTP token or is the
            transport's own (``Host``, ``Content-Type``…), a value with a control character;
            the message names the header, never the value.
    """
    chosen: dict[bytes, bytes] = {}
    for variable, value in sorted((environ or {}).items()):
        if variable.upper().startswith(ENV_PREFIX) and len(variable) > len(ENV_PREFIX):
            name, encoded = _checked(variable[len(ENV_PREFIX) :].replace("_", "-").lower(), value, f"environment variable {variable}")
            chosen[name] = encoded
    for option in options:
        cut = min((i for i in (option.find("="), option.find(":")) if i > 0), default=-1)
        if cut < 0:
            shown = option.split("=", 1)[0].split(":", 1)[0] if ("=" in option or ":" in option) else "(no name)"
            raise AppLoadError(f"--header {shown}: expected NAME=VALUE (for example --header X-API-Key=...)")
        name, encoded = _checked(option[:cut].strip(), option[cut + 1 :], "--header")
        chosen[name] = encoded
    return list(chosen.items())
