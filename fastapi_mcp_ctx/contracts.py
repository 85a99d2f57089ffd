"""Typed error contracts: the failures a tool (resource, prompt) declares it can answer.

    from typing import Literal

    NOT_FOUND = ErrorContract("not_found", hint="List notes first.", code=-32004, message="No such note.")

    @mcp_router.tool(errors=[NOT_FOUND])
    async def get_note(note_id: int, ctx: Context[Literal["not_found"]] = Depends(mcp_context)) -> Note:
        ...
        ctx.fail("not_found", f"No note {note_id}", noteId=note_id)   # raises

A contract names a ``reason`` (``data.reason``), the ``code`` of the error envelope and the
``hint`` every failure with that reason carries (``data.recovery.hint``): ``ctx.fail`` builds
the failure from the contract, and a :class:`~fastapi_mcp_ctx.errors.ToolError` raised with a
declared reason gets the same envelope (the contract's hint and code fill what the raise left
out). An undeclared reason given to ``ctx.fail`` is a programming error
(:class:`~fastapi_mcp_ctx.errors.DeclarationError`). ``Context[Literal[...]]`` types the
reasons for the type checker; registration checks that each of them is declared.

Contracts are listed in the definition's ``_meta["fastapi-mcp-ctx/errors"]`` as
``[{"reason", "code", "hint", "message"?}]`` (``_meta`` is free-form in both revisions).

The hook for other handler kinds (resources, prompts), four calls: at registration
``contracts = build_contracts(errors, "resource 'notes://{id}'")``, ``meta =
meta_with_contracts(meta, contracts)`` for the listing, and :func:`check_context_annotation`
for each ``Context`` parameter; per call ``CallState(..., contracts=contracts)``, and every
failure through ``contracts.apply(error)`` before ``error.to_error(request_id)``. ``ctx.fail``
then raises a :class:`ToolError` whose ``to_error()`` is the JSON-RPC error of the envelope.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Final, Literal, get_args, get_origin

from .errors import DeclarationError, McpError, ToolError

__all__ = [
    "CONTRACTS_META_KEY",
    "ErrorContract",
    "ErrorContracts",
    "build_contracts",
    "check_context_annotation",
    "declared_reasons_of",
    "meta_with_contracts",
]

CONTRACTS_META_KEY: Final = "fastapi-mcp-ctx/errors"
"""The ``_meta`` key of a definition listing its declared error contracts."""
_REASON: Final = re.compile(r"^[a-z][a-z0-9_]{0,63}\Z")
MAX_HINT_CHARS: Final = 1000
"""Characters of one contract's ``hint`` (it rides on every failure with that reason)."""


@dataclass(frozen=True, slots=True)
class ErrorContract:
    """One declared failure of a tool, resource or prompt.

    ``ErrorContract("not_found", hint="List notes first.", code=-32004)``.

    Args:
        reason: ``data.reason`` of the failure, snake_case (``^[a-z][a-z0-9_]{0,63}$``).
        code: the envelope's ``code``; default ``1`` (application-defined, as :class:`ToolError`).
            A tool failure is an ``isError`` result whatever the code; a resource or prompt
            failure is the JSON-RPC error with it.
        hint: ``data.recovery.hint`` of every failure with this reason (1-1000 characters).
        message: default message of ``ctx.fail(reason)`` when the call gives none.
    Raises:
        ValueError: a reason outside the grammar, an empty or oversized hint, a non-integer code.
    """

    reason: str
    _: KW_ONLY
    hint: str
    code: int = 1
    message: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not _REASON.fullmatch(self.reason):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"ErrorContract reason {self.reason!r} must be snake_case: ^[a-z][a-z0-9_]{{0,63}}$")
        if isinstance(self.code, bool) or not isinstance(self.code, int):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"ErrorContract {self.reason!r}: code must be an integer, not {self.code!r}")
        if not isinstance(self.hint, str) or not self.hint.strip() or len(self.hint) > MAX_HINT_CHARS:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(
                f"ErrorContract {self.reason!r}: hint must be 1-{MAX_HINT_CHARS} characters saying how to recover"
            )
        if self.message is not None and (not isinstance(self.message, str) or not self.message):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"ErrorContract {self.reason!r}: message must be a non-empty string or None")

    def listing(self) -> dict[str, Any]:
        """``{"reason", "code", "hint", "message"?}`` as listed in the definition's ``_meta``."""
        entry: dict[str, Any] = {"reason": self.reason, "code": self.code, "hint": self.hint}
        if self.message is not None:
            entry["message"] = self.message
        return entry


class ErrorContracts:
    """The contracts of one definition, by reason (built once at registration)."""

    __slots__ = ("_by_reason", "owner")

    def __init__(self, contracts: Iterable[ErrorContract], owner: str) -> None:
        self.owner = owner
        self._by_reason: dict[str, ErrorContract] = {}
        for contract in contracts:
            if not isinstance(contract, ErrorContract):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ValueError(f"{owner}: errors= takes ErrorContract objects, not {type(contract).__name__}")
            if contract.reason in self._by_reason:
                raise ValueError(f"{owner}: error reason {contract.reason!r} is declared twice")
            self._by_reason[contract.reason] = contract

    @property
    def reasons(self) -> tuple[str, ...]:
        """The declared reasons, in declaration order."""
        return tuple(self._by_reason)

    def get(self, reason: str) -> ErrorContract | None:
        """The contract of ``reason``, or None."""
        return self._by_reason.get(reason)

    def listing(self) -> list[dict[str, Any]]:
        """Every contract as listed in ``_meta["fastapi-mcp-ctx/errors"]``."""
        return [contract.listing() for contract in self._by_reason.values()]

    def failure(self, reason: str, message: str | None, data: Mapping[str, Any]) -> ToolError:
        """The :class:`ToolError` of ``ctx.fail(reason, message, **data)``.

        Raises:
            DeclarationError: ``reason`` is not declared.
            ValueError / TypeError: ``data`` sets a reserved key or is not JSON-able (``errors.py``).
        """
        contract = self._by_reason.get(reason)
        if contract is None:
            raise undeclared_reason(reason, self.owner, self.reasons)
        text = message if message is not None else contract.message or reason.replace("_", " ").capitalize()
        return ToolError(text, reason=reason, recovery_hint=contract.hint, data=data, code=contract.code)

    def apply(self, error: ToolError | McpError) -> ToolError | McpError:
        """Give a failure with a declared reason the contract's hint (when it has none) and, for a
        :class:`ToolError` raised without ``code=``, the contract's code. Returns ``error``."""
        contract = self._by_reason.get(error.reason) if error.reason is not None else None
        if contract is None:
            return error
        if not error.recovery_hint:
            error.recovery_hint = contract.hint
        if isinstance(error, ToolError) and "code" not in vars(error):
            error.code = contract.code
        return error


def undeclared_reason(reason: object, owner: str, declared: Sequence[str]) -> TypeError:
    """The :class:`DeclarationError` of a reason ``owner`` did not declare."""
    listed = ", ".join(repr(r) for r in declared) if declared else "none (add errors=[ErrorContract(...)])"
    return DeclarationError(f"ctx.fail({reason!r}): {owner} declares no such error reason; declared: {listed}")


def build_contracts(errors: Sequence[ErrorContract] | None, owner: str) -> ErrorContracts | None:
    """The :class:`ErrorContracts` of ``errors=`` (None when nothing is declared).

    Args:
        errors: the registration's ``errors=`` list.
        owner: names the definition in messages (``"tool 'get_note'"``).
    Raises:
        ValueError: not a list of :class:`ErrorContract`, or a reason declared twice.
    """
    if errors is None:
        return None
    if isinstance(errors, (str, bytes, ErrorContract)) or not isinstance(errors, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError(f"{owner}: errors= must be a list of ErrorContract")
    return ErrorContracts(errors, owner) if errors else None


def meta_with_contracts(meta: Mapping[str, Any] | None, contracts: ErrorContracts | None) -> dict[str, Any] | None:
    """The definition's ``_meta`` with ``"fastapi-mcp-ctx/errors"`` listing ``contracts``
    (``meta`` itself, copied, when there are none).

    Raises:
        ValueError: ``meta`` already sets that key.
    """
    if contracts is None:
        return dict(meta) if meta else None
    if meta and CONTRACTS_META_KEY in meta:
        raise ValueError(f"{contracts.owner}: meta= must not set {CONTRACTS_META_KEY!r}: errors= fills it")
    return {**(meta or {}), CONTRACTS_META_KEY: contracts.listing()}


def declared_reasons_of(annotation: Any) -> tuple[str, ...] | None:
    """The reasons ``Context[Literal["a", "b"]]`` names (``("a", "b")``), None for a bare ``Context``."""
    if get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    args = get_args(annotation)
    if not args or get_origin(annotation) is None:
        return None
    reason_type = args[0]
    if get_origin(reason_type) is Literal:
        return tuple(str(value) for value in get_args(reason_type))
    if get_origin(reason_type) is typing.Union:
        found: list[str] = []
        for member in get_args(reason_type):
            if get_origin(member) is Literal:
                found.extend(str(value) for value in get_args(member))
        return tuple(found) if found else None
    return None


def check_context_annotation(annotation: Any, contracts: ErrorContracts | None, owner: str) -> None:
    """Registration check: every reason of a ``Context[Literal[...]]`` parameter is declared.

    Raises:
        ValueError: a reason the annotation names is missing from ``errors=``.
    """
    named = declared_reasons_of(annotation)
    if not named:
        return
    declared: set[str] = set(contracts.reasons) if contracts is not None else set()
    missing = [reason for reason in named if reason not in declared]
    if missing:
        raise ValueError(
            f"{owner}: its Context annotation names error reason(s) {', '.join(map(repr, missing))} "
            "that errors=[ErrorContract(...)] does not declare"
        )
