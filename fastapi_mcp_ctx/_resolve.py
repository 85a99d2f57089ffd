"""Run one tool: validate arguments, resolve dependencies with FastAPI's solver, call, shape.

Errors follow spec 2025-11-25 ``server/tools`` §Error Handling (SEP-1303): invalid arguments
and execution failures are ``isError`` results the model can read; a dependency raising
``HTTPException(401)`` / ``(403)`` is an authentication / authorization error of the request;
a crash is logged with its traceback and the model sees a generic message.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import anyio.to_thread
from fastapi import HTTPException
from fastapi.background import BackgroundTasks
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import to_json
from starlette.requests import Request

from ._fastapi_compat import solve
from ._registry import ToolDef
from ._results import error_result, shape_result, text_result
from .context import SCOPE_KEY, Context, bind_context, mcp_context, unbind_context
from .errors import (
    AuthenticationError,
    InvalidCursorError,
    McpError,
    PermissionDeniedError,
    SerializationError,
    ToolError,
    ValidationError,
)

__all__ = ["from_http_exception", "run_tool"]

logger = logging.getLogger("fastapi_mcp_ctx")


def _describe_errors(exc: PydanticValidationError) -> str:
    parts: list[str] = []
    for error in exc.errors(include_url=False, include_input=False):
        location = ".".join(str(p) for p in error["loc"]) or "arguments"
        parts.append(f"{location}: {error['msg']}")
    return "; ".join(parts)


async def _invoke(tool: ToolDef, kwargs: dict[str, Any]) -> Any:
    if tool.is_async:
        return await tool.handler(**kwargs)
    return await anyio.to_thread.run_sync(functools.partial(tool.handler, **kwargs))


def from_http_exception(exc: HTTPException) -> McpError | dict[str, Any]:
    """401 → AuthenticationError, 403 → PermissionDeniedError (headers kept), else an isError result."""
    headers = dict(exc.headers or {})
    detail = str(exc.detail)
    if exc.status_code == 401:
        headers.setdefault("WWW-Authenticate", "Bearer")
        return AuthenticationError(detail, headers=headers)
    if exc.status_code == 403:
        return PermissionDeniedError(detail, headers=headers)
    if exc.status_code >= 500:
        return text_result("Internal error", is_error=True)
    return text_result(detail, is_error=True)


async def run_tool(
    tool: ToolDef,
    arguments: dict[str, Any],
    context: Context,
    request: Request,
    background_tasks: BackgroundTasks,
) -> dict[str, Any]:
    """Run ``tool`` for one ``tools/call`` and return the ``CallToolResult`` dict.

    ``request`` must be private to this call (its scope carries the call's exit stacks and
    the :class:`Context` under ``SCOPE_KEY``).

    Raises:
        AuthenticationError / PermissionDeniedError: a dependency raised HTTPException 401/403.
        McpError: a handler or dependency raised a protocol error (e.g. -32021).
    """
    try:
        # JSON-mode strict validation: the arguments are JSON, judged by JSON Schema's rules
        # ("5" is not an integer, true is not a number) while ISO dates, UUIDs and enum values
        # still parse from their JSON spelling.
        # (the model's validator itself: model_validate_json's wrapper costs ~3k instructions a call)
        parsed: Any = tool.arguments_model.__pydantic_validator__.validate_json(to_json(arguments), strict=True)
    except PydanticValidationError as exc:
        return text_result(f"Invalid arguments for tool {tool.name!r}: {_describe_errors(exc)}", is_error=True)
    kwargs = {name: getattr(parsed, name) for name in tool.argument_names}
    app = request.scope.get("app")
    dependant = tool.dependant
    if tool.context_params and mcp_context not in getattr(app, "dependency_overrides", ()):
        # ``Depends(mcp_context)`` would only read the Context back from the scope: hand it over
        # directly. An override of mcp_context (read per call) gets the whole graph solved.
        dependant = tool.lean_dependant
        for name in tool.context_params:
            kwargs[name] = context
    request.scope[SCOPE_KEY] = context
    token = bind_context(context)
    try:
        if dependant is None:
            return shape_result(tool, await _invoke(tool, kwargs))
        async with solve(dependant, request, app, background_tasks) as solved:
            if solved.errors:
                problems = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg', '')}" for e in solved.errors)
                return text_result(f"Invalid request for tool {tool.name!r}: {problems}", is_error=True)
            result = shape_result(tool, await _invoke(tool, {**kwargs, **solved.values}))
        return result
    except ToolError as exc:
        return error_result(exc)
    except HTTPException as exc:
        translated = from_http_exception(exc)
        if isinstance(translated, McpError):
            raise translated from exc
        return translated
    except (ValidationError, SerializationError, InvalidCursorError) as exc:
        # the handler misused ctx.state (bad key, unserializable value, stale cursor): a tool
        # execution error the model can read, not a fault of the client's request
        return text_result(exc.message, is_error=True)
    except McpError:
        raise
    except anyio.get_cancelled_exc_class():
        raise
    except Exception:
        logger.exception("tool %r crashed (request id %r)", tool.name, context.request_id)
        return text_result(f"Tool {tool.name!r} failed with an internal error (request id {context.request_id!r})", is_error=True)
    finally:
        unbind_context(token)
        request.scope.pop(SCOPE_KEY, None)  # scope → context → call → request → scope: no cycle left for the GC
