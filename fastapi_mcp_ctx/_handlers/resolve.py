"""Run one tool: validate arguments, resolve dependencies with FastAPI's solver, call, shape.

Errors follow spec 2025-11-25 ``server/tools`` §Error Handling (SEP-1303): invalid arguments
and execution failures are ``isError`` results the model can read, each built by
``_handlers.results.error_result`` (the one envelope); a dependency raising ``HTTPException(401)`` /
``(403)`` is an authentication / authorization error of the request; a crash is logged with its
traceback and the model sees a generic message.

Tool-result codes: invalid arguments ``-32602`` (``invalid_arguments``), a failed
``Header``/``Query`` dependency ``-32600`` (``invalid_request``), a dependency's other 4xx
``-32600`` (``rejected``, ``data.status``), ``ctx.state`` misuse the error's own code, a crash or a
dependency's 5xx ``-32603`` (``internal_error``), a :class:`ToolError` its own code (default 1).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Protocol, TypeVar

import anyio.to_thread
from fastapi import HTTPException
from fastapi.background import BackgroundTasks
from fastapi.dependencies.models import Dependant
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import to_json
from starlette.requests import Request

from .._fastapi_compat import UNSENT_RESPONSE, close_solve, open_solve
from .._wire.number_range import OUT_OF_RANGE, may_overflow
from ..context import SCOPE_KEY, Context, bind_context, mcp_context, unbind_context
from ..errors import (
    AuthenticationError,
    InvalidCursorError,
    McpError,
    PermissionDeniedError,
    SerializationError,
    ServerRequestError,
    ToolError,
    ValidationError,
)
from ..input_required import InputRequired
from .argument_fields import strict_json
from .argument_overrides import overrides_provider
from .arguments import ARGUMENTS_KEY, ArgumentGraph, CallArguments
from .results import error_result, shape_result
from .tool_def import ToolDef

__all__ = ["Invocable", "call_handler", "dependency_problems", "describe_errors", "from_http_exception", "run_tool"]

logger = logging.getLogger("fastapi_mcp_ctx")
R = TypeVar("R")


MAX_PROBLEMS: Final = 10
"""Argument problems listed in one error message; the rest are counted (``…and N more``)."""
MAX_PROBLEM_CHARS: Final = 200
"""Characters kept of one problem (its location and message); longer ones end in ``…``."""


def _problems(items: Iterable[str], count: int | None = None) -> str:
    """The one formatter of argument problems: at most :data:`MAX_PROBLEMS` of ``items``, each
    cut to :data:`MAX_PROBLEM_CHARS`, joined by ``"; "``, then ``"; …and N more"`` when
    ``count`` (default: ``len(items)``) is larger: a request with 500 000 bad list items gets a
    bounded answer, in ``content`` and in the error envelope alike."""
    listed: list[str] = []
    seen = 0
    for item in items:
        seen += 1
        if len(listed) < MAX_PROBLEMS:
            listed.append(item if len(item) <= MAX_PROBLEM_CHARS else item[: MAX_PROBLEM_CHARS - 1] + "…")
        elif count is not None:
            break
    more = (count if count is not None else seen) - len(listed)
    return "; ".join(listed) + (f"; …and {more} more" if more > 0 else "")


def describe_errors(exc: PydanticValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    return _problems((f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in errors), len(errors))


class Invocable(Protocol):
    """What :func:`call_handler` needs of a registered handler (a tool, resource, prompt or
    completer definition; see :class:`~.tool_def.ToolDef` for the fields)."""

    @property
    def handler(self) -> Callable[..., Any]: ...
    @property
    def is_async(self) -> bool: ...
    @property
    def dependant(self) -> Dependant | None: ...
    @property
    def lean_dependant(self) -> Dependant | None: ...
    @property
    def context_params(self) -> tuple[str, ...]: ...
    @property
    def argument_names(self) -> tuple[str, ...]: ...
    @property
    def arguments(self) -> ArgumentGraph | None: ...
    @property
    def response_free(self) -> bool: ...


async def _invoke(tool: Invocable, kwargs: dict[str, Any]) -> Any:
    if tool.is_async:
        return await tool.handler(**kwargs)
    # A thread cannot be interrupted: a cancelled sync tool runs to its end (its yield
    # dependencies stay open for it, as in FastAPI) and the transports drop its late result.
    return await anyio.to_thread.run_sync(functools.partial(tool.handler, **kwargs))


def from_http_exception(exc: HTTPException) -> McpError | ToolError:
    """401 → AuthenticationError, 403 → PermissionDeniedError (headers kept); another status →
    the :class:`ToolError` of an ``isError`` result (a 5xx keeps its detail out of it)."""
    headers = dict(exc.headers or {})
    detail = str(exc.detail)
    if exc.status_code == 401:
        headers.setdefault("WWW-Authenticate", "Bearer")
        return AuthenticationError(detail, headers=headers)
    if exc.status_code == 403:
        return PermissionDeniedError(detail, headers=headers)
    if exc.status_code >= 500:
        return ToolError("Internal error", code=-32603, reason="internal_error", data={"status": exc.status_code})
    return ToolError(detail, code=-32600, reason="rejected", data={"status": exc.status_code})


def _children(value: Any) -> Iterable[tuple[Any, Any]]:
    if isinstance(value, BaseModel):
        return ((name, getattr(value, name, None)) for name in type(value).model_fields)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return ((f.name, getattr(value, f.name, None)) for f in dataclasses.fields(value))
    if isinstance(value, Mapping):
        mapping: Mapping[Any, Any] = value  # pyright: ignore[reportUnknownVariableType]
        return mapping.items()
    if isinstance(value, (list, tuple, set, frozenset)):
        sequence: list[Any] = list(value)  # pyright: ignore[reportUnknownArgumentType]
        return enumerate(sequence)
    return ()


def _non_finite(kwargs: Mapping[str, Any]) -> list[str]:
    """Paths of validated values that are ``inf``/``nan`` floats: a JSON integer too large for a
    double becomes ``inf`` in a ``float`` field of the tool's own models (bounded to 64 levels)."""
    found: list[str] = []
    stack: list[tuple[str, Any, int]] = [(name, value, 0) for name, value in kwargs.items()]
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, float):
            if not math.isfinite(value):
                found.append(path)
        elif depth < 64:
            stack.extend((f"{path}.{key}", child, depth + 1) for key, child in _children(value))
    return sorted(found)


def _invalid_arguments(tool: ToolDef, problems: str) -> ToolError:
    return ToolError(
        f"Invalid arguments for tool {tool.name!r}: {problems}",
        code=-32602,
        reason="invalid_arguments",
        recovery_hint="Call the tool again with arguments that match its inputSchema.",
    )


def _out_of_range(paths: Iterable[str]) -> str:
    return _problems(f"{path}: {OUT_OF_RANGE}" for path in paths)


def _shaped(tool: ToolDef, value: Any) -> tuple[dict[str, Any], bool]:
    """``(result, True)``; an output breaking the tool's outputSchema raises its
    :class:`ToolError` inside the dependency scope, so a yield dependency sees the failure (and
    rolls back) as it sees FastAPI's ``ResponseValidationError`` on a path operation."""
    return shape_result(tool, value), True


def _invalid_request(tool: ToolDef, problems: str, context: Context) -> dict[str, Any]:
    """The ``isError`` result of a tool whose ``Header``/``Query``/... dependencies failed."""
    failure = ToolError(f"Invalid request for tool {tool.name!r}: {problems}", code=-32600, reason="invalid_request")
    return error_result(failure, context.request_id, tool)


def _ends(tool: ToolDef) -> tuple[Any, Any]:
    """``tool``'s ``finish`` and ``invalid`` for :func:`call_handler`, made at its first call and
    kept on it (no closure made per call)."""
    ends = tool.ends = (functools.partial(_shaped, tool), functools.partial(_invalid_request, tool))
    return ends


async def run_tool(
    tool: ToolDef,
    arguments: dict[str, Any],
    context: Context,
    request: Request,
    background_tasks: BackgroundTasks,
    out_of_range: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Run ``tool`` for one ``tools/call`` and return the ``CallToolResult`` dict.

    ``request`` must be private to this call (its scope carries the call's exit stacks and
    the :class:`Context` under ``SCOPE_KEY``). ``out_of_range`` names arguments whose JSON
    number overflowed a double (``_wire.number_range``): the tool does not run, the result is an
    ``isError`` naming them. A tool with :attr:`~.tool_def.ToolDef.plain_arguments` validates
    the parsed ``arguments`` themselves (the same result, errors included, without encoding them
    for the JSON validator); any other encodes them and validates the JSON text strictly.

    Raises:
        AuthenticationError / PermissionDeniedError: a dependency raised HTTPException 401/403.
        McpError: a handler or dependency raised a protocol error (e.g. -32021).
    """
    if out_of_range:
        return error_result(_invalid_arguments(tool, _out_of_range(out_of_range)), context.request_id, tool)
    plain = tool.plain_arguments  # int, str and bool fields: the parsed values validate as their JSON text would
    raw: Any = arguments if plain else to_json(arguments)  # plain: encoded by call_handler only for an override that validates it
    try:
        # JSON-mode strict validation: the arguments are JSON, judged by JSON Schema's rules
        # ("5" is not an integer, true is not a number) while ISO dates, UUIDs and enum values
        # still parse from their JSON spelling; plain arguments (ToolDef.plain_arguments) the
        # same from the parsed values, without encoding them.
        # (the model's validator itself: model_validate_json's wrapper costs ~3k instructions a
        # call; until the tool's first call a stand-in that builds the model, see ToolDef.validator)
        validator = tool.validator
        parsed: Any = validator.validate_python(raw, strict=True) if plain else validator.validate_json(raw, strict=True)
    except PydanticValidationError as exc:
        return error_result(_invalid_arguments(tool, describe_errors(exc)), context.request_id, tool)
    bound: CallArguments | None = None
    if tool.model_arguments:  # the model's fields are the handler's arguments: its __dict__ holds them
        kwargs: dict[str, Any] = parsed.__dict__.copy()
    else:
        graph = tool.arguments
        if graph.flat:
            kwargs = {name: getattr(parsed, name) for name in tool.argument_names}
        else:  # dependencies declare arguments: each declarer's own values (its defaults, its types)
            try:
                kwargs, bound = graph.bind(parsed, raw)
            except PydanticValidationError as exc:
                return error_result(_invalid_arguments(tool, describe_errors(exc)), context.request_id, tool)
    if not plain and may_overflow(raw):  # only a huge literal can turn into inf (never an int, str or bool): most calls skip the walk
        overflowed = _non_finite(kwargs)
        if overflowed:
            return error_result(_invalid_arguments(tool, _out_of_range(overflowed)), context.request_id, tool)
    ends = tool.ends or _ends(tool)
    try:
        return await call_handler(tool, kwargs, context, request, background_tasks, ends[0], ends[1], bound, raw)
    except ToolError as exc:
        return error_result(exc, context.request_id, tool)
    except HTTPException as exc:
        translated = from_http_exception(exc)
        if isinstance(translated, McpError):
            raise translated from exc
        return error_result(translated, context.request_id, tool)
    except (ValidationError, SerializationError, InvalidCursorError) as exc:
        # the handler misused ctx.state (bad key, unserializable value, stale cursor): a tool
        # execution error the model can read, not a fault of the client's request
        return error_result(exc, context.request_id, tool)
    except ServerRequestError as exc:  # ctx.send_request failed and the handler let it go: the model reads why
        return error_result(exc, context.request_id, tool)
    except (McpError, InputRequired):  # InputRequired: a question, turned into the era's answer by _server.input_rounds
        raise
    except anyio.get_cancelled_exc_class():
        raise
    except Exception:
        logger.exception("tool %r crashed (request id %r)", tool.name, context.request_id)
        crash = ToolError(
            f"Tool {tool.name!r} failed with an internal error (request id {context.request_id!r})", code=-32603, reason="internal_error"
        )
        return error_result(crash, context.request_id, tool)


def dependency_problems(errors: Iterable[Any]) -> str:
    """The bounded text of FastAPI's dependency errors (``loc: msg; ...``)."""
    listed = list(errors)
    return _problems((f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg', '')}" for e in listed), len(listed))


async def call_handler(
    target: Invocable,
    kwargs: dict[str, Any],
    context: Context,
    request: Request,
    background_tasks: BackgroundTasks,
    finish: Callable[[Any], tuple[R, bool]],
    invalid: Callable[[str, Context], R],
    bound: CallArguments | None = None,
    raw: Any = None,
) -> R:
    """Run any handler kind with its FastAPI dependencies, the way tools run.

    ``kwargs`` are its validated arguments; a top-level ``Depends(mcp_context)`` gets
    ``context`` directly unless ``app.dependency_overrides`` replaces ``mcp_context``; the
    rest of the graph is solved by FastAPI (``Depends``, ``Security``, overrides). The
    handler's value goes to ``finish`` inside the dependency scope (yield dependencies are
    torn down after it), which returns ``(result, ok)``: background tasks run only when ``ok``
    (as FastAPI: an endpoint that raised runs none). Failed ``Header``/``Query``/... dependencies
    give ``invalid(problems, context)``. ``bound`` carries the arguments its dependencies declare
    (``_handlers.arguments``): the graph's wrappers read it from the request scope, and
    ``app.dependency_overrides`` are read through ``_handlers.argument_overrides`` (an override
    of a graph without ``bound`` validates ``raw``, the arguments as received, itself). Exceptions of
    the handler and its dependencies propagate.
    """
    scope = request.scope
    app = scope.get("app")
    overrides: Any = getattr(app, "dependency_overrides", None)
    dependant = target.dependant
    if target.context_params and not (overrides and mcp_context in overrides):
        # ``Depends(mcp_context)`` would only read the Context back from the scope: hand it over
        # directly. An override of mcp_context (read per call) gets the whole graph solved.
        dependant = target.lean_dependant
        for name in target.context_params:
            kwargs[name] = context
    provider = app
    if overrides and target.arguments is not None:  # an override may take arguments by name
        provider = overrides_provider(app, target.arguments)
        if bound is None:  # a tool's plain arguments come parsed (ToolDef.plain_arguments): their JSON for the override
            bound = CallArguments((), to_json(raw) if target.arguments.validate is strict_json and isinstance(raw, dict) else raw, target.arguments)
    scope[SCOPE_KEY] = context
    if bound is not None:
        scope[ARGUMENTS_KEY] = bound
    token = bind_context(context)
    ok = False
    try:
        if dependant is None:
            # _invoke's work inline (no coroutine of its own a call)
            value = await target.handler(**kwargs) if target.is_async else await _invoke(target, kwargs)
            result, ok = finish(value)
            return result
        shaped = False
        response = None if overrides or not target.response_free else UNSENT_RESPONSE  # None: a fresh one
        values, errors, stacks = await open_solve(dependant, request, provider, background_tasks, response)
        try:  # what ``async with solve(...)`` does, without its object
            if errors:
                result = invalid(dependency_problems(errors), context)
            else:
                kwargs.update(values)
                value = await target.handler(**kwargs) if target.is_async else await _invoke(target, kwargs)
                result, shaped = finish(value)
        except BaseException as exc:
            if not await close_solve(stacks, type(exc), exc, exc.__traceback__):
                raise
        else:
            await close_solve(stacks, None, None, None)
            if errors:
                return result
            if shaped:
                ok = True
                return result
        # the handler raised and a yield dependency swallowed the exception
        raise RuntimeError(
            "a dependency with yield caught the handler's exception and did not raise it again: re-raise it"
            " after rolling back (FastAPI's rule for dependencies with yield)"
        )
    finally:
        if not ok:
            background_tasks.tasks.clear()
        unbind_context(token)
        if bound is not None:
            del scope[ARGUMENTS_KEY]
        scope.pop(SCOPE_KEY, None)  # scope → context → call → request → scope: no cycle left for the GC
