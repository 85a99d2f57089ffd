"""The input rounds of one call: the :class:`~fastapi_mcp_ctx.input_required.InputRequired`
signal becomes the era's answer, and the answers re-enter the handler.

A transport's runner (``_server.call_prep``, for ``tools/call``, ``resources/read`` and
``prompts/get``) runs the first attempt itself, after :func:`first_round` when the request
carries answers or a state, and calls :func:`later_rounds` only when the attempt raised the
signal (most calls ask nothing): the wire result to send, the handler's or the
``input_required`` one (no cache hints: spec 2026-07-28 ``server/utilities/caching``). A failed
server→client request or too many rounds, in any attempt, goes through :func:`failed_round`.

2026-07-28 (spec ``basic/patterns/mrtr``): before the handler runs, the request's
``requestState`` is opened (sealer; anything forged, tampered, expired or minted for another
caller, operation or arguments is ``-32602 invalid_request_state``) and its
``inputResponses`` admitted (``fastapi_mcp_ctx.inputs.admit``: a non-object is ``-32602``);
a signal becomes ``{"resultType": "input_required", "inputRequests": {...},
"requestState": "<sealed>"}``. The sealed plain string carries the handler's own state, the
answers the awaitable helpers consumed, and what this round asks
(``inputs.encode_round_state``).

2025 era: each entry of a signal is sent as a real server→client request on the call's stream
(``ctx.send_request``: answers routed back by the session, across replicas), then the handler
runs again with the answers, at most ``MCP_INPUT_MAX_ROUNDS`` rounds
(:class:`~fastapi_mcp_ctx.errors.InputRoundsExceededError` after). A tool gets a refusal or a
failed request as an ``isError`` result; resources and prompts as a JSON-RPC error.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .._auth.sealing import RequestStateSealer, StateBinding
from .._context.asking import refusal, with_elicitation_id
from .._context.call_state import CallState
from .._handlers.results import error_result
from .._handlers.tool_def import ToolDef
from ..auth import Principal
from ..context import Context
from ..errors import InputRoundsExceededError, InvalidParamsError, InvalidRequestStateError, ServerRequestError
from ..input_required import InputRequired
from ..inputs import InputRound, admit, decode_round_state, encode_round_state

__all__ = ["CallTarget", "failed_round", "first_round", "later_rounds", "refuse_oversized"]

SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"


@dataclass(frozen=True, slots=True)
class CallTarget:
    """What a round's sealed state is bound to, besides the caller: the name the call addresses
    (tool or prompt name, resource URI) and its arguments as received."""

    name: str
    arguments: Mapping[str, Any] | None

    @classmethod
    def of(cls, method: str, params: Mapping[str, Any]) -> CallTarget:
        """The target of a ``tools/call`` / ``prompts/get`` (``name``, ``arguments``) or a
        ``resources/read`` (``uri``; its arguments digest as ``{}``) request's ``params``."""
        if method == "resources/read":
            return cls(str(params.get("uri", "")), None)
        arguments = params.get("arguments")
        return cls(str(params.get("name", "")), arguments if isinstance(arguments, Mapping) else None)  # pyright: ignore[reportUnknownArgumentType]


# -- the two sealing points ------------------------------------------------------------------
def _binding(call: CallState, target: CallTarget) -> StateBinding:
    principal: Principal | None = call.auth if isinstance(call.auth, Principal) else None
    return StateBinding.for_call(principal, call.method, target.name, target.arguments)


def _seal(sealer: RequestStateSealer | None, call: CallState, target: CallTarget, plain: str) -> str:
    """What goes out: the round's plain state sealed for this caller, operation and arguments
    (no sealer: only in unit tests that build a call by hand)."""
    return plain if sealer is None else sealer.seal(plain, _binding(call, target))


def _open(sealer: RequestStateSealer | None, call: CallState, target: CallTarget, token: str) -> str:
    """What comes back: the plain state, or InvalidRequestStateError (-32602)."""
    return token if sealer is None else sealer.open(token, _binding(call, target))


# -- one round -------------------------------------------------------------------------------
def first_round(context: Context, call: CallState, params: Mapping[str, Any], sealer: RequestStateSealer | None) -> InputRound:
    """The input of the first attempt: the request's ``inputResponses`` (both eras) and, in
    2026-07-28, its opened ``requestState`` (bound to the target of ``params``).

    Raises:
        InvalidParamsError: ``inputResponses`` not an object.
        InvalidRequestStateError: a ``requestState`` that is not a string or does not open
            (-32602, ``reason: "invalid_request_state"``).
    """
    responses = params.get("inputResponses")
    token = params.get("requestState")
    if responses is None and token is None:  # most calls: no answer to admit, no state to open
        return InputRound()
    if responses is not None and not isinstance(responses, dict):
        raise InvalidParamsError("inputResponses must be an object of answers keyed as the input requests were")
    handler_state: str | None = None
    carried: dict[str, Any] = {}
    asked: dict[str, str] = {}
    if call.envelope.era == "modern" and token is not None:
        if not isinstance(token, str):
            raise InvalidRequestStateError()
        try:
            handler_state, carried, asked = decode_round_state(_open(sealer, call, CallTarget.of(call.method, params), token))
        except ValueError:  # opened, so this server sealed it: only a state made without a sealer gets here
            raise InvalidRequestStateError() from None
    can = context.client.can if call.envelope.client_capabilities is not None else None
    answers = admit(responses, can, asked)  # pyright: ignore[reportUnknownArgumentType]
    if answers and call.envelope.era == "modern":
        refuse_oversized(answers, call.settings.request_state_max_bytes)
    answers.update(admit(carried, can))  # what the server recorded wins over a client's re-answer
    return InputRound(answers=answers, state=handler_state)


def refuse_oversized(answers: Mapping[str, Any], max_state_bytes: int) -> None:
    """2026: the answers a handler consumes travel on in the sealed ``requestState``, so answers
    larger than half of ``MCP_REQUEST_STATE_MAX_BYTES`` are the client's fault (-32602), never
    a server error when the next round's state is sealed. The same bound holds for a task's
    answers (2026 ``tasks/update``, 2025 ``tasks/result``): one rule for every answer."""
    size = len(json.dumps(answers, separators=(",", ":"), ensure_ascii=False).encode())
    limit = max_state_bytes // 2
    if size > limit:
        raise InvalidParamsError(
            f"inputResponses too large: {size} bytes of admitted answers, at most {limit}",
            reason="input_responses_too_large",
            recovery_hint="Answer with less content (the server keeps answers between rounds).",
        )


def _input_required(call: CallState, signal: InputRequired, round_: InputRound, target: CallTarget, sealer: RequestStateSealer | None) -> dict[str, Any]:
    carried = {key: value for key, value in round_.consumed.items() if key not in signal.input_requests}
    asked = {key: entry["method"] for key, entry in signal.input_requests.items()}
    plain = encode_round_state(signal.request_state, carried, asked)
    result: dict[str, Any] = {"resultType": "input_required"}
    if signal.input_requests:
        result["inputRequests"] = signal.input_requests
    result["requestState"] = _seal(sealer, call, target, plain)
    result["_meta"] = {SERVER_INFO_KEY: {"name": call.settings.server_name, "version": call.settings.server_version}}
    return result


async def _ask_live(context: Context, call: CallState, signal: InputRequired, round_: InputRound) -> InputRound:
    """2025: send each entry of ``signal`` and return the next attempt's input."""
    refused = refusal(call, context.client.can, signal.input_requests, signal.fallback_hint)
    if refused is not None:
        raise refused
    answers: dict[str, Any] = {}
    for key, entry in signal.input_requests.items():
        answers[key] = await context.send_request(entry["method"], with_elicitation_id(entry["params"]))
    asked = {key: entry["method"] for key, entry in signal.input_requests.items()}
    admitted = admit(answers, context.client.can, asked)
    admitted.update(round_.consumed)  # the awaitable helpers' answers replay, never re-asked
    return InputRound(answers=admitted, state=signal.request_state, number=round_.number + 1)


async def later_rounds(
    context: Context,
    call: CallState,
    params: Mapping[str, Any],
    attempt: Callable[[], Awaitable[dict[str, Any]]],
    signal: InputRequired,
    sealer: RequestStateSealer | None = None,
) -> dict[str, Any]:
    """The rounds after the first attempt (its input in ``call.input_round``, None: an empty
    round) raised ``signal``: the wire result, the ``input_required`` one (2026, outside a task:
    ``resultType`` set, no cache hints: check :func:`mcp_types.methods.is_input_required` before
    adding ``ttlMs``/``cacheScope``) or the handler's once ``attempt`` (one run of the handler)
    returns with the answers (2025 and tasks: asked live).

    ``context`` is the handler's :class:`Context` over ``call`` (the transport's ``CallState``);
    ``params`` the request's params (a sealed state is bound to their target).

    Raises:
        ClientCapabilityMissingError: 2025, the client cannot be asked (-32600).
        ServerRequestError: 2025, a server→client request failed (timeout, client error...).
        InputRoundsExceededError: 2025, more than ``MCP_INPUT_MAX_ROUNDS`` rounds.
        (the last two: :func:`failed_round`)
    """
    round_ = call.input_round if call.input_round is not None else InputRound()
    while True:
        if call.envelope.era == "modern" and call.task is None:  # a task asks live (_tasks.channel)
            return _input_required(call, signal, round_, CallTarget.of(call.method, params), sealer)
        if round_.number > call.settings.input_max_rounds:
            raise InputRoundsExceededError(call.settings.input_max_rounds) from None
        round_ = await _ask_live(context, call, signal, round_)
        call.input_round = round_
        try:
            return await attempt()
        except InputRequired as again:
            signal = again


def failed_round(exc: ServerRequestError | InputRoundsExceededError, request_id: str | int, tool: ToolDef | None) -> dict[str, Any]:
    """A call whose first attempt or a later round failed with ``exc`` (a server→client request
    that failed, or too many rounds; called in its ``except``): a tool's ``isError`` result the
    model can read; without ``tool`` (``resources/read``, ``prompts/get``) ``exc`` is raised
    again, the call's JSON-RPC error."""
    if tool is None:
        raise exc
    return error_result(exc, request_id, tool)
