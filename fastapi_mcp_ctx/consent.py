"""Single-use consent records: ``await ctx.consent.require(...)`` before a destructive action.

A handler about to delete, send or pay calls::

    await ctx.consent.require(
        operation="delete_file", target=path, content_hash=digest_of_what_is_deleted,
        message=f"Delete {path}?",
    )
    ...act...  # reached only when the user confirmed this very operation

Each round the gate first **redeems** the consent id that this round's ``requestState`` carries
(the state is sealed, so the client cannot invent or alter an id) with the backend's atomic
``take``: of any number of concurrent retries carrying one id, across replicas, exactly one
gets the record. The record must name the same operation, target, content hash, call (method
and tool) and caller (``Principal.client_id`` and ``subject``; the tenant is the namespace), and
the same round must carry the user's accepting answer; then ``require`` returns. A record that is
unknown, already used, expired or mismatched is a fresh prompt, never a proceed.

Otherwise the gate **stores** a fresh record under a random id, in a namespace of the caller's
tenant that handlers cannot address and ``ctx.state.list`` never shows
(:func:`fastapi_mcp_ctx.state.reserved_space`), valid ``ttl`` seconds, and asks for confirmation
(a form elicitation with one boolean ``confirm``) with ``consent/<id>`` as the request state:
2026-07-28 ends the call with ``input_required``; the 2025 era asks live and re-enters the
handler. A decline, a cancel, or an accept with ``confirm`` false ends the call with
:class:`~fastapi_mcp_ctx.errors.ConsentDeclinedError`.

A round's request state is the consent id: use one gate per call, after every other question
(answers of ``await ctx.elicit`` travel on beside it; a handler's own ``request_state`` does not).
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final, NoReturn, Protocol

from ._bridge import bridged
from .backends.base import StateBackend
from .errors import ConsentDeclinedError
from .input_required import elicit
from .state import ContextState, reserved_space

__all__ = ["CONFIRM_SCHEMA", "CONSENT_INPUT_KEY", "ConsentGate", "ConsentRecord", "ConsentRecords"]

logger = logging.getLogger("fastapi_mcp_ctx")

CONSENT_INPUT_KEY: Final = "consent"
"""The ``inputRequests`` key of the confirmation."""
CONFIRM_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Confirm", "description": "Allow this operation", "default": False}},
    "required": ["confirm"],
}
"""The confirmation form: accept with ``{"confirm": true}`` to allow."""

_STATE_PREFIX: Final = "consent/"
_ID_RE = re.compile(r"[A-Za-z0-9_-]{22,64}")
_NAMESPACE: Final = "consent"


@dataclass(frozen=True, slots=True)
class ConsentRecord:
    """What one confirmation allows; a redeemed record must equal the record expected now.

    Attributes:
        operation / target / content_hash: as given to :meth:`ConsentGate.require`.
        call: the MCP call that asked (method and name, e.g. ``"tools/call delete_file"``).
        client_id / subject: the caller's ``Principal`` fields (None when anonymous).
    """

    operation: str
    target: str
    content_hash: str | None
    call: str
    client_id: str | None
    subject: str | None

    def to_json(self) -> str:
        """Compact JSON of the record (what is stored)."""
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ConsentRecord | None:
        """The record in ``text``, or None when it is not one this module stored."""
        try:
            fields = json.loads(text)
            return cls(**fields)
        except (ValueError, TypeError):
            return None


class ConsentRecords:
    """The store of consent records of one tenant (a reserved namespace of its state).

    Args:
        backend: the state backend every replica shares.
        prefix: the tenant's reserved key prefix (``reserved_space(state, "consent")``).

    Every method raises:
        StateUnavailableError: the backend cannot be reached (nothing redeemed, nothing asked).
    """

    __slots__ = ("_backend", "_prefix")

    def __init__(self, backend: StateBackend, prefix: str) -> None:
        self._backend = backend
        self._prefix = prefix

    @classmethod
    def of(cls, state: ContextState) -> ConsentRecords:
        """The records of ``state``'s tenant. Raises TenantRequiredError without a tenant."""
        return cls(*reserved_space(state, _NAMESPACE))

    async def issue(self, record: ConsentRecord, ttl: float) -> str:
        """Store ``record`` for ``ttl`` seconds under a fresh random id (128 bits); return the id."""
        record_id = secrets.token_urlsafe(16)
        await self._backend.set(self._prefix + record_id, record.to_json(), ttl)
        return record_id

    async def redeem(self, record_id: str, expected: ConsentRecord) -> bool:
        """Take the record ``record_id`` (at most once, ever) and tell whether it is ``expected``.

        False for an id outside the grammar, an unknown, used or expired id, and a record naming
        anything else (the record is gone either way: a mismatch burns it).
        """
        if _ID_RE.fullmatch(record_id) is None:
            logger.warning("consent for %s refused: malformed record id", expected.call)
            return False
        text = await self._backend.take(self._prefix + record_id)
        if text is None:
            logger.info("consent for %s: record unknown, used or expired; asking again", expected.call)
            return False
        record = ConsentRecord.from_json(text)
        if record != expected:
            differs = sorted(k for k, v in asdict(expected).items() if record is None or getattr(record, k) != v)
            logger.warning("consent for %s refused: the record differs in %s; asking again", expected.call, ", ".join(differs))
            return False
        return True


class _Inputs(Protocol):
    def view(self, name: str) -> Any: ...

    def state(self) -> str | None: ...


class _AskingContext(Protocol):
    """What the gate needs of a :class:`~fastapi_mcp_ctx.context.Context`."""

    @property
    def auth(self) -> Any: ...

    @property
    def method(self) -> str: ...

    @property
    def operation(self) -> str | None: ...

    @property
    def state(self) -> ContextState: ...

    @property
    def inputs(self) -> _Inputs: ...

    def request_input(
        self,
        input_requests: Mapping[str, Mapping[str, Any]] | None = None,
        request_state: str | None = None,
        fallback_hint: str | None = None,
    ) -> NoReturn: ...


class ConsentGate:
    """``ctx.consent``: see the module docstring."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: _AskingContext) -> None:
        self._ctx = ctx

    def _expected(self, operation: str, target: str, content_hash: str | None) -> ConsentRecord:
        ctx = self._ctx
        auth = ctx.auth
        return ConsentRecord(
            operation=operation,
            target=target,
            content_hash=content_hash,
            call=ctx.operation or ctx.method,
            client_id=getattr(auth, "client_id", None),
            subject=getattr(auth, "subject", None),
        )

    @bridged("ctx.consent.require", lambda gate: getattr(gate._ctx, "_call", None))  # pyright: ignore[reportPrivateUsage, reportUnknownArgumentType, reportUnknownLambdaType, reportUnknownMemberType]
    async def require(
        self,
        *,
        operation: str,
        target: str,
        message: str,
        content_hash: str | None = None,
        ttl: float = 600.0,
        fallback_hint: str | None = None,
    ) -> None:
        """Return only once the user confirmed this operation on this target (module docstring).

        Args:
            operation: what will be done (``"delete_file"``).
            target: what it is done to (a path, an id).
            message: the question the user reads.
            content_hash: a digest of the content acted on (so a target that changed between the
                question and the answer is asked about again); None when it does not apply.
            ttl: seconds the question stays answerable (a finite number > 0).
            fallback_hint: appended to the refusal's hint when the client cannot elicit.

        Raises:
            InputRequired: the signal asking for confirmation (do not catch it).
            ConsentDeclinedError: the user declined or cancelled (``data.action``).
            MissingCapabilityError / ClientCapabilityMissingError: the client cannot elicit forms.
            TenantRequiredError: an authenticated caller without a tenant.
            StateUnavailableError: the state backend cannot be reached.
            ValueError: a bad ``ttl``, an empty ``operation`` / ``target`` / ``message``.
        """
        if not (isinstance(ttl, (int, float)) and not isinstance(ttl, bool) and 0 < ttl < float("inf")):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"ttl must be a finite number of seconds > 0, not {ttl!r}")
        if not operation or not target or not message:
            raise ValueError("operation, target and message must be non-empty strings")
        ctx = self._ctx
        expected = self._expected(operation, target, content_hash)
        records = ConsentRecords.of(ctx.state)
        state = ctx.inputs.state()
        if state is not None and state.startswith(_STATE_PREFIX) and await records.redeem(state[len(_STATE_PREFIX) :], expected):
            answer = ctx.inputs.view(CONSENT_INPUT_KEY)
            if answer.kind == "elicit" and answer.action is not None:
                content: Mapping[str, Any] | None = answer.content
                if answer.action == "accept" and content is not None and content.get("confirm") is True:
                    return
                action = "decline" if answer.action == "accept" else str(answer.action)
                raise ConsentDeclinedError(
                    f"The user did not allow {operation} on {target}; nothing was done",
                    recovery_hint="Ask the user before trying again.",
                    data={"action": action, "operation": operation, "target": target},
                )
            logger.info("consent for %s: the record came back without an answer; asking again", expected.call)
        record_id = await records.issue(expected, float(ttl))
        ctx.request_input(
            {CONSENT_INPUT_KEY: elicit(message, CONFIRM_SCHEMA)},
            request_state=_STATE_PREFIX + record_id,
            fallback_hint=fallback_hint,
        )
