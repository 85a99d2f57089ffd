"""``tools/call`` made ready: its params checked (a string ``name``, an object ``arguments``),
the tool found (``-32602`` ``UnknownToolError`` otherwise), its scopes (403) and, in the
2026-07-28 era over HTTP, its ``Mcp-Param-*`` headers checked, then the :class:`PreparedCall`
running it (``_handlers.resolve.run_tool``), or its task when the client opted in (tasks
extension, ``_server.task_calls``).

The dispatcher's ``serve`` routes ``tools/call`` here; resources, prompts and completions are
made ready by ``_handlers.features`` instead, and every call then goes through
:meth:`CallPreparation._prepare`.
"""

from __future__ import annotations

from functools import partial

from starlette.requests import Request

from .._auth.scopes import require_scopes
from .._context.call_state import no_task_start
from .._context.cancel_signal import CancelSignal
from .._handlers.invocation import Run
from .._handlers.registry import ToolRegistry
from .._handlers.resolve import run_tool
from .._tasks.engine import TaskEngine
from .._transport.requests import BackChannel
from .._transport.sessions import SessionRecord
from .._wire.envelope import RequestEnvelope
from .._wire.header_params import check_header_params
from .._wire.jsonrpc import JsonRpcRequest
from ..errors import InvalidParamsError, UnknownToolError
from .call_prep import PRINCIPAL_SCOPE_KEY, CallPreparation, echo
from .outcomes import PreparedCall
from .task_calls import as_task, call_owner, task_call

__all__ = ["ToolCalls"]


class ToolCalls(CallPreparation):
    """The ``tools/call`` half of the ``Dispatcher`` (a base class like :class:`CallPreparation`:
    the dispatcher's fields below are read, never set here)."""

    __slots__ = ()
    registry: ToolRegistry
    tasks: TaskEngine | None

    def _tools_call(
        self,
        message: JsonRpcRequest,
        envelope: RequestEnvelope,
        request: Request,
        session: SessionRecord | None,
        http_headers: bool,
        signal: CancelSignal,
        back_channel: BackChannel | None = None,
    ) -> PreparedCall:
        params = message.params
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParamsError("tools/call requires a string 'name'")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        elif not isinstance(arguments, dict):
            raise InvalidParamsError("tools/call 'arguments' must be an object")
        tool = self.registry.get(name)
        if tool is None:
            raise UnknownToolError(f"Unknown tool: {echo(name)}", data={"name": echo(name)})
        if tool.scopes:
            require_scopes(tool.scopes, request.scope.get(PRINCIPAL_SCOPE_KEY), self.settings)
        if envelope.era == "modern" and tool.header_params and http_headers:
            check_header_params(tool.header_params, arguments, request.headers)  # pyright: ignore[reportUnknownArgumentType]

        # a partial, not a closure: the runner calls run_tool itself, no coroutine in between
        run: Run = partial(run_tool, tool, arguments, out_of_range=message.out_of_range) if message.out_of_range else partial(run_tool, tool, arguments)
        # the client's opt-in (as_task: a task tool, or a 2025 params.task refused)
        ttl = as_task(tool, envelope, params, self.settings) if self.tasks is not None and (tool.task is not None or "task" in params) else False
        prepared = self._prepare(
            message, envelope, request, session, signal, back_channel,
            run=run, operation=f"tools/call:{name}", logger_name=name, private_scope=tool.dependant is not None, tool=tool,
        )  # fmt: skip
        if ttl is False or self.tasks is None:
            if tool.task is not None and prepared.state is not None:  # optional, not opted into: ctx.start_task() does nothing
                prepared.state.task_starter = no_task_start
            return prepared
        owner = call_owner(request.scope.get(PRINCIPAL_SCOPE_KEY), session, envelope)
        return task_call(self.tasks, prepared, tool, owner, ttl, partial(self._finish, envelope=envelope))  # no closure: self, envelope no cells
