"""Asking the client, one code path for both eras: ``ctx.request_input`` and the awaitable helpers.

``request_input`` checks what it asks against the client's declared capabilities (the
refusal is raised where the handler stands, never sent), then raises the
:class:`~fastapi_mcp_ctx.input_required.InputRequired` signal; the transport-side driver
(``fastapi_mcp_ctx._server.input_rounds``) turns it into the era's answer.

``await ctx.elicit(...)`` / ``ctx.sample(...)`` / ``ctx.list_roots()`` read their answer from
this round first (by key: given, or ``elicit-1``, ``elicit-2``… in call order). Without one:

- 2025 era: a live server→client request on the call's stream (``ctx.send_request``);
- inside a task (both eras): a live request on the task's channel (``_tasks.channel``): the
  task goes ``input_required`` with it in ``inputRequests`` until ``tasks/update`` answers;
- 2026-07-28: the signal, so the call ends with ``input_required``; the client's retry runs the
  handler again and the same helper returns the answer. The answers a helper returned travel
  in the sealed request state, so a handler asking three questions in sequence completes in
  three rounds. Code before an awaited question therefore runs again on every 2026 round:
  keep side effects after the last question (or make them idempotent).

Capability refusals (DESIGN.md decision 11): 2026-07-28
:class:`~fastapi_mcp_ctx.errors.MissingCapabilityError` (-32021, ``data.requiredCapabilities``);
2025 :class:`~fastapi_mcp_ctx.errors.ClientCapabilityMissingError` (-32600,
``reason: "client_capability_missing"``, ``recovery.hint`` naming the capability, then the
handler's ``fallback_hint``); a 2025 request without a session (no capability view, no
back channel) gets the same refusal at once, its hint naming a stateful session.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, NoReturn, Protocol, TypeVar

import anyio
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from ..errors import (
    ClientCapabilityMissingError,
    InputRoundsExceededError,
    InternalError,
    MissingCapabilityError,
    ServerRequestError,
)
from ..input_required import ElicitAnswer, InputRequired, required_capabilities
from ..input_required import elicit as build_elicit
from ..input_required import list_roots as build_list_roots
from ..input_required import sample as build_sample
from ..inputs import InputRound, admit, answers_method
from .client_view import capability_object

if TYPE_CHECKING:
    import mcp_types as types

    from .call_state import CallState

__all__ = ["Messenger", "ask_elicit", "ask_list_roots", "ask_sample", "current_round", "refusal", "request_input", "with_elicitation_id"]


class Messenger(Protocol):
    """What the helpers need of the asking ``Context`` (``CallMessages``, ``call_messages.py``): its progress
    token, progress and requests. A Protocol, so the helpers do not import the view that calls them."""

    @property
    def progress_token(self) -> str | int | None: ...

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> bool: ...

    async def send_request(self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float | None = None) -> dict[str, Any]: ...


M = TypeVar("M", bound=BaseModel)
Can = Callable[[str], bool]

NO_SESSION_HINT: Final = (
    "Initialize a stateful session (MCP_SESSION_MODE=stateful or auto) and send its Mcp-Session-Id with the call, "
    "or use the 2026-07-28 protocol."
)


@functools.cache
def _input_required_methods() -> frozenset[str]:
    """``mcp_types.methods.INPUT_REQUIRED_METHODS``, imported at the first ask: that module
    loads every revision's schemas (about 6.6 MB), which a server that never asks does not need."""
    from mcp_types.methods import INPUT_REQUIRED_METHODS  # noqa: PLC0415 - deferred on purpose

    return INPUT_REQUIRED_METHODS


def refusal(call: CallState, can: Can, requests: Mapping[str, Mapping[str, Any]], fallback_hint: str | None) -> Exception | None:
    """The error asking ``requests`` of this client would be, or None when it may ask them all."""
    capabilities = call.envelope.client_capabilities
    modern = call.envelope.era == "modern"
    for entry in requests.values():
        method = entry["method"]
        params: Mapping[str, Any] = entry.get("params") or {}
        needed = required_capabilities(method, params)
        if not modern and capabilities is None:
            hint = NO_SESSION_HINT + (f" {fallback_hint}" if fallback_hint else "")
            message = (
                f"Cannot ask the client ({method}): this 2025 request has no session, so the server has no view of "
                "the client's capabilities and no stream for its answer (MCP_SESSION_MODE=stateless, or auto without "
                "Mcp-Session-Id)"
            )
            return ClientCapabilityMissingError(method, capability_object(needed), message, recovery_hint=hint)
        missing = [name for name in needed if not can(name)]
        if not missing:
            continue
        required = capability_object(missing)
        if modern:
            return MissingCapabilityError(required, f"{method} needs the client capability {', '.join(missing)}, which this request did not declare")
        names = ", ".join(f"`{name}`" for name in missing)
        hint = f"Reconnect with a client that declares the {names} capability." + (f" {fallback_hint}" if fallback_hint else "")
        message = f"The client did not declare the {', '.join(missing)} capability needed for {method}"
        return ClientCapabilityMissingError(method, required, message, recovery_hint=hint)
    return None


def current_round(call: CallState) -> InputRound:
    """This attempt's :class:`InputRound` (an empty one when no driver made it: e.g. unit tests)."""
    if call.input_round is None:
        call.input_round = InputRound()
    return call.input_round


def request_input(
    call: CallState,
    can: Can,
    input_requests: Mapping[str, Mapping[str, Any]] | None,
    request_state: str | None,
    fallback_hint: str | None,
) -> NoReturn:
    """``ctx.request_input``: raise the refusal, or the :class:`InputRequired` signal."""
    signal = InputRequired(input_requests, request_state, fallback_hint)  # TypeError when both are missing
    if call.method not in _input_required_methods():
        raise InternalError(
            f"ctx.request_input is served on tools/call, resources/read and prompts/get only, not on {call.method}"
        )
    refused = refusal(call, can, signal.input_requests, fallback_hint)
    if refused is not None:
        raise refused
    raise signal


def with_elicitation_id(params: dict[str, Any]) -> dict[str, Any]:
    """2025-11-25 URL-mode elicitations carry an ``elicitationId`` (removed in 2026-07-28)."""
    if params.get("mode") == "url" and "elicitationId" not in params:
        return {**params, "elicitationId": str(uuid.uuid4())}
    return params


async def _ask(
    ctx: Messenger,
    call: CallState,
    can: Can,
    key: str,
    entry: dict[str, Any],
    timeout: float | None,
    usable: Callable[[dict[str, Any]], bool],
    progress_interval: float | None = None,
) -> dict[str, Any]:
    """The admitted answer for ``key``: from this round, else asked (2025 live; 2026 the signal)."""
    round_ = current_round(call)
    method = entry["method"]
    answer = round_.answers.get(key)
    if answer is not None and answers_method(answer, method) and usable(answer):  # another kind's answer: asked again
        round_.consumed[key] = answer
        return answer
    refused = refusal(call, can, {key: entry}, None)
    if refused is not None:
        raise refused
    if call.envelope.era == "modern" and call.task is None:  # in a task: asked live, as the task's inputRequests
        if call.method not in _input_required_methods():
            raise InternalError(f"2026-07-28: {method} can only be asked on tools/call, resources/read and prompts/get, not on {call.method}")
        raise InputRequired({key: entry})
    for _ in range(call.settings.input_max_rounds):
        raw = await _live(ctx, call, method, with_elicitation_id(entry["params"]), timeout, progress_interval)
        admitted = admit({key: raw}, can, {key: method}).get(key)
        if admitted is None:
            raise ServerRequestError(method, f"The client's answer to {method} is not one this request can accept")
        if usable(admitted):
            round_.consumed[key] = admitted
            return admitted
    raise InputRoundsExceededError(call.settings.input_max_rounds)


async def _live(ctx: Messenger, call: CallState, method: str, params: dict[str, Any], timeout: float | None, interval: float | None) -> dict[str, Any]:
    if interval is None or ctx.progress_token is None:
        return await ctx.send_request(method, params, timeout=timeout)
    result: dict[str, Any] = {}

    async def keepalive() -> None:  # notifications/progress while the client's model works
        while True:
            await anyio.sleep(interval)
            beat = (call.last_progress or 0) + 1  # progress must increase, after the handler's own reports too
            await ctx.report_progress(beat, None, f"Waiting for the client's answer to {method}")

    async with anyio.create_task_group() as group:
        group.start_soon(keepalive)
        result = await ctx.send_request(method, params, timeout=timeout)
        group.cancel_scope.cancel()
    return result


def _validated(model: type[M], answer: Mapping[str, Any]) -> M | None:
    content = answer.get("content")
    if not isinstance(content, Mapping):
        return None
    try:
        return model.model_validate(dict(content))  # pyright: ignore[reportUnknownArgumentType]
    except PydanticValidationError:
        return None


async def ask_elicit(
    ctx: Messenger, call: CallState, can: Can, message: str, schema: type[M], key: str | None, timeout: float | None
) -> ElicitAnswer[M]:
    """``await ctx.elicit(message, Model)``: an accepted answer whose content does not validate
    as ``Model`` counts as no answer (asked again: 2026 a new round, 2025 a new request)."""
    entry = build_elicit(message, schema)
    name = key if key is not None else current_round(call).next_key("elicit")

    def usable(answer: dict[str, Any]) -> bool:
        return answer.get("action") != "accept" or _validated(schema, answer) is not None

    answer = await _ask(ctx, call, can, name, entry, timeout, usable)
    if answer["action"] != "accept":
        return ElicitAnswer(answer["action"])
    return ElicitAnswer("accept", _validated(schema, answer), dict(answer["content"]))


async def ask_sample(
    ctx: Messenger,
    call: CallState,
    can: Can,
    prompt_or_params: str | Mapping[str, Any],
    key: str | None,
    timeout: float | None,
    progress_interval: float | None,
    options: Mapping[str, Any],
) -> types.CreateMessageResult | types.CreateMessageResultWithTools:
    """``await ctx.sample(...)``: a prompt string (``options``: the :func:`input_required.sample`
    keywords) or full ``sampling/createMessage`` params."""
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    if isinstance(prompt_or_params, str):
        entry = build_sample(prompt_or_params, **options)
    elif options:
        raise TypeError(f"ctx.sample(params, ...) takes no sampling keywords ({', '.join(sorted(options))}): put them in the params")
    else:
        entry = {"method": "sampling/createMessage", "params": dict(prompt_or_params)}
    name = key if key is not None else current_round(call).next_key("sample")
    answer = await _ask(ctx, call, can, name, entry, timeout, lambda _: True, progress_interval)
    if isinstance(answer.get("content"), list):
        return types.CreateMessageResultWithTools.model_validate(answer)
    return types.CreateMessageResult.model_validate(answer)


async def ask_list_roots(ctx: Messenger, call: CallState, can: Can, key: str | None, timeout: float | None) -> list[types.Root]:
    """``await ctx.list_roots()``: the client's roots."""
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    name = key if key is not None else current_round(call).next_key("roots")
    answer = await _ask(ctx, call, can, name, build_list_roots(), timeout, lambda _: True)
    return types.ListRootsResult.model_validate(answer).roots
