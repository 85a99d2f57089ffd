"""The HTTP headers of the stdio transport's synthetic requests: ``--header`` and the environment.

A desktop client launches the stdio server with a command line and an environment, never with
HTTP headers; an app's dependencies (``X-API-Key: str = Header()``) and its ``authenticate=``
read headers all the same. The headers come from two places, the command line last (it wins):

* the environment: ``MCP_STDIO_HEADER_<NAME>=value`` for each header, the name upper-cased with
  ``-`` written ``_`` (``MCP_STDIO_HEADER_X_API_KEY`` is ``X-API-Key``, sent as ``x-api-key``:
  HTTP header names are case-insensitive). One variable per header, so a desktop client's JSON
  config (``"env": {...}``) sets it without quoting JSON inside JSON;
* ``--header NAME=VALUE`` or ``--header 'Name: value'`` (repeatable) on ``fastapi-mcp-ctx stdio``;
  :func:`split_header` is the one parser of both forms, ``check -H`` uses it too.

Values are secrets (API keys, tokens): no message, log line or error of this module names one.
A malformed name or value is refused at start-up (:class:`~fastapi_mcp_ctx.errors.AppLoadError`:
exit 2) naming the header, never its value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

from ..errors import AppLoadError

__all__ = ["ENV_PREFIX", "split_header", "stdio_headers"]

ENV_PREFIX: Final = "MCP_STDIO_HEADER_"
"""The prefix of the environment variables that each give one header (``MCP_STDIO_HEADER_X_API_KEY``)."""

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 §5.6.2 token: a header name
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # RFC 9110 §5.5: no CR, LF, NUL or other controls (tab allowed)
_HOP_BY_HOP: Final = frozenset({"host", "content-length", "content-type", "transfer-encoding", "connection"})


def split_header(option: str, option_name: str) -> tuple[str, str]:
    """``(name, value)`` of one header option, ``NAME=VALUE`` or ``Name: value`` (whichever of
    ``=`` and ``:`` comes first cuts; a header name holds neither), both stripped.

    Raises:
        ValueError: neither separator after a name, or a name that is not an HTTP token
            (RFC 9110 §5.6.2); the message names ``option_name`` (``--header``, ``-H``), never the value.
    """
    cut = min((i for i in (option.find("="), option.find(":")) if i >= 0), default=-1)
    name = option[:cut].strip() if cut >= 0 else ""
    if not name:
        raise ValueError(
            f"{option_name}: expected NAME=VALUE or 'Name: value' (for example {option_name} X-API-Key=... "
            f"or {option_name} 'X-API-Key: ...'); value not shown"
        )
    if not _TOKEN.fullmatch(name):
        raise ValueError(f"{option_name}: {_shown_name(name)} is not an HTTP header name (letters, digits and - only)")
    return name, option[cut + 1 :].strip()


def _shown_name(name: str) -> str:
    """What a refusal may quote of a bad header name: up to its first space, since a space typed
    for ``=`` puts the value into the "name" (``X-API-Key sk-…=``), and a message names no value."""
    head = name.split(None, 1)[0] if name.split() else ""
    if head != name:
        return f"{head!r} followed by a space (value not shown; write NAME=VALUE)"
    return repr(name)


def _checked(name: str, value: str, source: str) -> tuple[bytes, bytes]:
    if not _TOKEN.fullmatch(name):
        raise AppLoadError(f"{source}: {_shown_name(name)} is not an HTTP header name (letters, digits and - only)")
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
        options: ``--header`` values, each ``NAME=VALUE`` or ``Name: value`` (:func:`split_header`).
        environ: the environment (``os.environ``); its ``MCP_STDIO_HEADER_<NAME>`` variables.
    Returns:
        one pair per header name, the command line's value replacing the environment's.
    Raises:
        AppLoadError: an option in neither form, a name that is not an HTTP token or is the
            transport's own (``Host``, ``Content-Type``…), a value with a control character;
            the message names the header, never the value.
    """
    chosen: dict[bytes, bytes] = {}
    for variable, value in sorted((environ or {}).items()):
        if variable.upper().startswith(ENV_PREFIX) and len(variable) > len(ENV_PREFIX):
            name, encoded = _checked(variable[len(ENV_PREFIX) :].replace("_", "-").lower(), value, f"environment variable {variable}")
            chosen[name] = encoded
    for option in options:
        try:
            raw_name, raw_value = split_header(option, "--header")
        except ValueError as exc:
            raise AppLoadError(str(exc)) from None
        name, encoded = _checked(raw_name, raw_value, "--header")
        chosen[name] = encoded
    return list(chosen.items())
