"""The members of :class:`~fastapi_mcp_ctx.context.Context` that ask the client for input:
``request_input``, ``inputs``, ``elicit``, ``sample``, ``list_roots``.

:class:`CallInput` (a base of ``Context``) keeps their documentation and delegates to
:mod:`fastapi_mcp_ctx._context.asking` (both eras, the capability refusals) and
:mod:`fastapi_mcp_ctx.inputs` (this round's answers); the 2025 era's live questions go through
:meth:`~fastapi_mcp_ctx._context.call_messages.CallMessages.send_request`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from .._bridge import bridged
from ..input_required import ElicitAnswer
from ..inputs import Inputs
from . import asking as _asking
from .call_messages import CallMessages
from .call_state import TaskView

if TYPE_CHECKING:
    import mcp_types as types
    from pydantic import BaseModel
    from typing_extensions import TypeVar

    M = TypeVar("M", bound=BaseModel)

__all__ = ["CallInput"]


class CallInput(CallMessages):
    """Multi-round-trip input members of ``Context`` (a mixin: no slots of its own)."""

    __slots__ = ()

    # -- multi-round-trip input (fastapi_mcp_ctx._context.asking, fastapi_mcp_ctx.inputs) ----------
    def request_input(
        self,
        input_requests: Mapping[str, Mapping[str, Any]] | None = None,
        request_state: str | None = None,
        fallback_hint: str | None = None,
    ) -> NoReturn:
        """Ask the client for input and end this attempt of the handler; never returns.

        2026-07-28: the call's result is ``input_required`` (``inputRequests``, the sealed
        ``requestState``); the client's retry runs the handler again with the answers on
        :attr:`inputs`. 2025 era: the server sends the requests on this call's stream and
        runs the handler again with the answers (at most ``MCP_INPUT_MAX_ROUNDS`` times).
        Served on ``tools/call``, ``resources/read`` and ``prompts/get`` (spec 2026-07-28
        ``basic/patterns/mrtr``). Build the entries with ``fastapi_mcp_ctx.input_required``.

        Args:
            input_requests: ``{key: entry}`` (``input_required.elicit(...)``...).
            request_state: a plain string the next round reads with ``ctx.inputs.state()``
                (sealed on the wire; keep it a handle, e.g. a ``ctx.state`` key).
            fallback_hint: a sentence appended to the refusal's hint when the client cannot
                answer (``"Or call again with format supplied."``).
        Raises:
            InputRequired: the signal (do not catch it).
            TypeError: neither ``input_requests`` nor ``request_state``; a malformed entry.
            MissingCapabilityError: 2026, a kind the request did not declare (-32021).
            ClientCapabilityMissingError: 2025, a kind the client did not declare, or a
                request without a session (-32600, ``client_capability_missing``).
            InternalError: called while serving another method.
        """
        _asking.request_input(self._call, self.client.can, input_requests, request_state, fallback_hint)

    @property
    def inputs(self) -> Inputs:
        """The answers of this round: ``view(name)``, ``accepted(name, Model)``, ``state()``
        (see ``fastapi_mcp_ctx.inputs``); only kinds the client declared reach it."""
        return Inputs(self._call.input_round)

    @bridged("ctx.elicit")
    async def elicit(self, message: str, schema: type[M], *, key: str | None = None, timeout: float | None = None) -> ElicitAnswer[M]:
        """Ask the user to fill a form (``schema``: a pydantic model); both eras.

        2025: a live ``elicitation/create`` on this call's stream. 2026-07-28: the first call
        ends the handler with ``input_required``; the retry runs the handler again and this
        call returns the answer (earlier answers travel in the sealed request state). Code
        before an awaited question runs again on each 2026 round.

        Args:
            key: the ``inputRequests`` key (default ``elicit-1``, ``elicit-2``… in call order).
            timeout: seconds to wait for the answer (2025; default ``MCP_SERVER_REQUEST_TIMEOUT_SECONDS``).
        Returns:
            ``ElicitAnswer(action, data, content)``: ``data`` is the validated model when accepted.
        Raises:
            MissingCapabilityError / ClientCapabilityMissingError: not declared (see request_input).
            ServerRequestError: 2025, the request failed (timeout, client error, no stream).
        """
        return await _asking.ask_elicit(self, self._call, self.client.can, message, schema, key, timeout)

    @bridged("ctx.sample")
    async def sample(
        self,
        prompt_or_params: str | Mapping[str, Any],
        *,
        key: str | None = None,
        timeout: float | None = None,
        progress_interval: float | None = 5.0,
        **options: Any,
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools:
        """Ask the client's model (``sampling/createMessage``); both eras, like :meth:`elicit`.

        ``prompt_or_params``: a prompt (one user message; ``options`` are the keywords of
        ``input_required.sample``: ``max_tokens`` (default 1000), ``system_prompt``...) or the
        full request params. While a 2025 request waits, ``notifications/progress`` is sent
        every ``progress_interval`` seconds when the call has a progress token (None: never).
        """
        return await _asking.ask_sample(self, self._call, self.client.can, prompt_or_params, key, timeout, progress_interval, options)

    @bridged("ctx.list_roots")
    async def list_roots(self, *, key: str | None = None, timeout: float | None = None) -> list[types.Root]:
        """The client's roots (``roots/list``); both eras, like :meth:`elicit`."""
        return await _asking.ask_list_roots(self, self._call, self.client.can, key, timeout)

    # -- tasks (fastapi_mcp_ctx._tasks) --------------------------------------------------------
    @property
    def task(self) -> TaskView | None:
        """The task this call runs as (``ctx.task.task_id``; ``await ctx.task.status("…")``
        publishes its ``statusMessage``), or None: a plain call, or a ``task_start="handler"``
        tool before :meth:`start_task` (docs/tasks.md)."""
        return self._call.task

    @bridged("ctx.start_task")
    async def start_task(self) -> TaskView | None:
        """Turn this call into a task now (a tool declared ``task_start="handler"``): the client
        is answered with the task, the handler goes on as it. Questions asked before were
        ``input_required`` rounds (2026) or live requests on the call's stream (2025); after,
        they are the task's ``inputRequests``. Already a task: returns it.

        Returns:
            The task (``ctx.task``); None for a ``task="optional"`` tool whose client did not
            opt into tasks: nothing happens and the handler goes on as a plain call (its result
            is the call's answer). A ``task="required"`` tool never gets here without the opt-in
            (the call was refused).
        Raises:
            RuntimeError: the tool is not a task tool.
            TaskQuotaExceededError / ServerShuttingDownError: no task can be created now.
        """
        if self._call.task is not None:
            return self._call.task
        starter = self._call.task_starter
        if starter is None:
            raise RuntimeError(
                "ctx.start_task() needs a task tool: declare it @mcp_router.tool(task=\"optional\", task_start=\"handler\")"
            )
        return await starter()
