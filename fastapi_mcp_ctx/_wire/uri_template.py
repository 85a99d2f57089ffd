"""RFC 6570 URI templates for resources: the one matcher, and the expansion it inverts.

Served expressions (RFC 6570 §3.2):

- ``{var}`` / ``{a,b}`` simple string expansion: everything but unreserved characters is
  percent-encoded;
- ``{+var}`` reserved expansion: reserved characters stay as they are (``?`` and ``#`` are
  encoded, so a value never leaks into the query); ``%`` is always encoded: values are raw
  text, never pre-encoded. Its value may hold ``/`` and ``..`` segments: a handler that maps it
  to a file or a key must confine it itself (``docs/resources.md``, ``examples/files.py``);
- ``{/var}`` / ``{/var*}`` path segments: the exploded form takes a list of segments;
- ``{?a,b}`` / ``{&c}`` form-style query: every variable is optional, in any order; a
  parameter the template does not name is ignored.

Every value that decodes into one path segment (``{var}``, ``{a,b}``, ``{/var}`` and each item
of ``{/var*}``) is refused when matching if it would decode to contain ``/`` (``%2F``) or is a
dot segment (``.``, ``..``, also as ``%2E``): a path-traversal guard (issue 24 item 10), so such
a value does not round-trip. Query values are not segments and are not guarded.

Matching (:meth:`UriTemplate.match`) is the inverse of :meth:`UriTemplate.expand`: the URI is
split at its first ``?``; the part before it must match the template's literals (escaped,
compared exactly) and expressions; each value is percent-decoded exactly once, after matching
(UTF-8, strict). ``None`` means "no match"; a match binding no variable is ``{}``. A malformed
escape (``%G1``, a lone ``%``, bytes that are not UTF-8), a ``/`` or a dot segment smuggled into a
segment variable, or a repeated query parameter raise :class:`UriMatchError` (``-32602``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote_to_bytes

from ..errors import UriMatchError

__all__ = ["UriTemplate", "UriValue"]

UriValue = str | list[str]
"""A variable's value: a string, or a list of segments for an exploded ``{/var*}``."""

_EXPRESSION: Final = re.compile(r"\{([^{}]*)\}")
_VARSPEC: Final = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\*?)\Z")
_BAD_ESCAPE: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
_RESERVED_SAFE: Final = ":/[]@!$&'()*+,;="  # RFC 3986 reserved minus '?' and '#'
_OPERATORS: Final = frozenset({"", "+", "/", "?", "&"})


@dataclass(frozen=True, slots=True)
class _Var:
    name: str
    explode: bool


@dataclass(frozen=True, slots=True)
class _Expr:
    op: str
    variables: tuple[_Var, ...]


def _decode(raw: str, uri: str) -> str:
    if _BAD_ESCAPE.search(raw):
        raise UriMatchError(f"Malformed percent-escape in resource URI {uri[:256]!r}", data={"uri": uri})
    try:
        return unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UriMatchError(f"Percent-escapes in resource URI {uri[:256]!r} are not UTF-8", data={"uri": uri}) from exc


def _segment(decoded: str, name: str, template: str, uri: str) -> str:
    """``decoded`` when it is one safe path segment, else :class:`UriMatchError`."""
    if "/" in decoded:
        raise UriMatchError(f"A '/' is not allowed in {{{name}}} of {template!r}", data={"uri": uri})
    if decoded in (".", ".."):
        raise UriMatchError(f"A dot segment ({decoded!r}) is not allowed in {{{name}}} of {template!r}", data={"uri": uri})
    return decoded


def _encode(value: str, op: str) -> str:
    return quote(value, safe=_RESERVED_SAFE if op == "+" else "")


class UriTemplate:
    """A parsed RFC 6570 template (the subset in the module docstring).

    Args:
        template: e.g. ``"test://template/{id}/data"``, ``"file:///{+path}"``,
            ``"repo://{owner}{/segments*}{?ref,depth}"``.
    Raises:
        ValueError: an unsupported operator (``#``, ``.``, ``;``), a prefix modifier
            (``{var:3}``), a variable name that is not a Python identifier, a name used
            twice, an exploded variable outside ``{/...}``, two adjacent expressions that
            would make matching ambiguous, or anything but query expressions after ``{?...}``.
    """

    __slots__ = ("_names", "_parts", "_query", "_regex", "template")

    def __init__(self, template: str) -> None:
        self.template = template
        parts: list[str | _Expr] = []
        position = 0
        for found in _EXPRESSION.finditer(template):
            if found.start() > position:
                parts.append(template[position : found.start()])
            parts.append(self._parse_expression(found.group(1)))
            position = found.end()
        tail = template[position:]
        if "{" in tail or "}" in tail or any(isinstance(p, str) and ("{" in p or "}" in p) for p in parts):
            raise ValueError(f"URI template {template!r}: unbalanced braces")
        if tail:
            parts.append(tail)
        names: list[str] = [v.name for p in parts if isinstance(p, _Expr) for v in p.variables]
        if len(set(names)) != len(names):
            raise ValueError(f"URI template {template!r}: a variable is named twice")
        first_query = next((i for i, p in enumerate(parts) if isinstance(p, _Expr) and p.op in ("?", "&")), len(parts))
        query = parts[first_query:]
        if any(not isinstance(p, _Expr) or p.op not in ("?", "&") for p in query):
            raise ValueError(f"URI template {template!r}: only query expressions ({{?a}}, {{&b}}) may follow {{?...}}")
        path = parts[:first_query]
        if any(isinstance(p, str) and ("?" in p or "#" in p) for p in path):
            raise ValueError(f"URI template {template!r}: put the query in a {{?...}} expression, not a literal '?'")
        for before, after in itertools.pairwise(path):
            if isinstance(before, _Expr) and isinstance(after, _Expr) and after.op != "/":
                raise ValueError(f"URI template {template!r}: two adjacent expressions cannot be told apart; put a literal between them")
        self._parts: tuple[str | _Expr, ...] = tuple(path)
        self._query: tuple[_Var, ...] = tuple(v for p in query if isinstance(p, _Expr) for v in p.variables)
        self._names: tuple[str, ...] = tuple(names)
        self._regex = re.compile("".join(self._pattern(p) for p in path), re.DOTALL)

    def _parse_expression(self, body: str) -> _Expr:
        op = body[:1] if body[:1] in ("+", "/", "?", "&", "#", ".", ";", "=", ",", "!", "@", "|") else ""
        if op not in _OPERATORS:
            raise ValueError(f"URI template {self.template!r}: operator {op!r} is not supported (use {{v}}, {{+v}}, {{/v*}}, {{?a,b}})")
        variables: list[_Var] = []
        for spec in body[len(op) :].split(","):
            found = _VARSPEC.fullmatch(spec)
            if found is None:
                raise ValueError(f"URI template {self.template!r}: {spec!r} is not a variable name (a Python identifier, optionally with '*')")
            explode = found.group(2) == "*"
            if explode and op != "/":
                raise ValueError(f"URI template {self.template!r}: the explode modifier is served in {{/var*}} only")
            variables.append(_Var(found.group(1), explode))
        return _Expr(op, tuple(variables))

    @staticmethod
    def _pattern(part: str | _Expr) -> str:
        if isinstance(part, str):
            return re.escape(part)
        if part.op == "/":
            return "".join(f"(?P<{v.name}>(?:/[^/]*)*)" if v.explode else f"(?:/(?P<{v.name}>[^/]*))?" for v in part.variables)
        if part.op == "+":
            return ",".join(f"(?P<{v.name}>.*)" if len(part.variables) == 1 else f"(?P<{v.name}>[^,]*)" for v in part.variables)
        char = "[^/]" if len(part.variables) == 1 else "[^/,]"
        return ",".join(f"(?P<{v.name}>{char}*)" for v in part.variables)

    @property
    def variables(self) -> tuple[str, ...]:
        """The variable names, in template order."""
        return self._names

    @property
    def query_variables(self) -> tuple[str, ...]:
        """The names of the (optional) query variables."""
        return tuple(v.name for v in self._query)

    @property
    def exploded(self) -> frozenset[str]:
        """The names of ``{/var*}`` variables (their values are lists)."""
        return frozenset(v.name for p in self._parts if isinstance(p, _Expr) for v in p.variables if v.explode)

    @property
    def is_static(self) -> bool:
        """True when the template has no expression (a plain URI)."""
        return not self._names

    def expand(self, values: Mapping[str, UriValue]) -> str:
        """The URI for ``values`` (RFC 6570 expansion; a missing optional variable is omitted).

        Raises:
            KeyError: a simple or reserved variable without a value.
            TypeError: a list for a non-exploded variable, or a str for an exploded one.
        """
        out: list[str] = []
        for part in self._parts:
            if isinstance(part, str):
                out.append(part)
                continue
            pieces: list[str] = []
            for var in part.variables:
                value = values.get(var.name)
                if var.explode:
                    if value is None:
                        continue
                    if isinstance(value, str):
                        raise TypeError(f"{var.name!r} is exploded: give a list of segments")
                    pieces.extend("/" + _encode(segment, "") for segment in value)
                    continue
                if value is None and part.op == "/":
                    continue
                if value is None:
                    raise KeyError(var.name)
                if not isinstance(value, str):
                    raise TypeError(f"{var.name!r} takes a str")
                pieces.append(("/" if part.op == "/" else "") + _encode(value, part.op))
            out.append("".join(pieces) if part.op == "/" else ",".join(pieces))
        query = [f"{v.name}={_encode(value, '')}" for v in self._query if isinstance(value := values.get(v.name), str)]
        if query:
            out.append("?" + "&".join(query))
        return "".join(out)

    def match(self, uri: str) -> dict[str, UriValue] | None:
        """The variables of ``uri``, decoded once; ``None`` when the template does not match.

        Query variables absent from ``uri`` are absent from the result (the handler's
        defaults apply). Raises :class:`UriMatchError` as the module docstring says.
        """
        path, mark, query = uri.partition("?")
        if mark and not self._query:
            return None
        found = self._regex.fullmatch(path)
        if found is None:
            return None
        values: dict[str, UriValue] = {}
        for part in self._parts:
            if isinstance(part, str):
                continue
            for var in part.variables:
                raw = found.group(var.name)
                if var.explode:
                    segments = raw.split("/")[1:] if raw else []
                    values[var.name] = [_segment(_decode(segment, uri), var.name, self.template, uri) for segment in segments]
                elif raw is not None:
                    decoded = _decode(raw, uri)
                    values[var.name] = decoded if part.op == "+" else _segment(decoded, var.name, self.template, uri)
        if mark:
            wanted = {v.name for v in self._query}
            for pair in query.split("&") if query else ():
                key, _, raw = pair.partition("=")
                name = _decode(key, uri)
                if name not in wanted:
                    continue  # a parameter the template does not name is ignored
                if name in values:
                    raise UriMatchError(f"Query parameter {name!r} repeated in the resource URI", data={"uri": uri})
                values[name] = _decode(raw, uri)
        return values

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"

