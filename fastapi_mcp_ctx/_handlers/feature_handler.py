"""Resource, prompt and completer handlers: built and run with the tools' own machinery.

A handler's plain parameters are its arguments (template variables, prompt arguments,
completion inputs), validated by a pydantic model in lax mode (they arrive as strings: a
``{id}`` declared ``id: int`` gets ``123``); ``Depends`` / ``Security`` / ``Request`` ...
parameters are resolved by FastAPI's solver exactly as for tools (``_handlers.registry.split_signature``,
``_handlers.resolve.call_handler``: overrides, yield teardown after the result is shaped, background tasks,
the call's ``Context``). Failures are JSON-RPC errors in the one envelope (DESIGN decision 11):
invalid arguments ``-32602``, a :class:`~fastapi_mcp_ctx.errors.ToolError` its own code, reason
and data, an ``HTTPException`` 401/403 the request's authentication error (another 4xx
``-32600`` ``rejected``), any other exception ``-32603`` with a generic message (the traceback
goes to the server log only). A failure whose reason the handler declares
(``errors=[ErrorContract(...)]``, ``contracts.py``; ``ctx.fail``) gets the contract's hint and,
for a ``ToolError`` raised without ``code=``, its code.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from fastapi import HTTPException, params
from fastapi.background import BackgroundTasks
from fastapi.dependencies.models import Dependant
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError
from starlette.requests import Request

from .._fastapi_compat import dependency_of, takes_response
from ..context import Context, mcp_context
from ..contracts import ErrorContract, ErrorContracts, build_contracts, check_context_annotation
from ..errors import InternalError, InvalidParamsError, McpError, ToolError
from ..input_required import InputRequired
from .argument_fields import lax_python
from .arguments import ArgumentGraph, CallArguments, build_arguments
from .registry import SignatureParts, build_dependants, split_signature
from .resolve import call_handler, describe_errors, from_http_exception

__all__ = ["FeatureHandler", "build_handler", "protocol_error", "run_handler"]

logger = logging.getLogger("fastapi_mcp_ctx")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class FeatureHandler:
    """One registered resource, prompt or completer function (fields as on ``ToolDef``).

    Attributes:
        kind / name: ``"resource"`` / ``"prompt"`` / ``"completer"`` and its name, for messages.
        arguments: the arguments of the whole graph (``_handlers.arguments``): its flattened
            model (``arguments_model``, lax: strings become the declared types), every argument
            in order (``inputs``: template variables, prompt arguments) and those some declarer
            requires (``required``), each read from it.
        argument_names: the handler's own parameters filled from the arguments.
        contracts: the declared error contracts (``errors=`` of the decorator): ``ctx.fail``'s
            reasons, applied to a raised failure (:func:`protocol_error`); None: none declared.
        response_free: no dependency takes a ``Response`` (as :class:`~.tool_def.ToolDef`'s).
    """

    kind: str
    name: str
    handler: Callable[..., Any]
    is_async: bool
    arguments: ArgumentGraph
    argument_names: tuple[str, ...]
    dependant: Dependant | None
    context_params: tuple[str, ...]
    lean_dependant: Dependant | None
    signature: SignatureParts
    contracts: ErrorContracts | None = None
    response_free: bool = False

    @property
    def arguments_model(self) -> type[BaseModel]:
        """The graph's flattened model (``arguments.model``)."""
        return self.arguments.model

    @property
    def required(self) -> tuple[str, ...]:
        """The arguments some declarer requires (``arguments.required``)."""
        return self.arguments.required

    @property
    def inputs(self) -> tuple[str, ...]:
        """Every argument of the graph, in order (``arguments.names``)."""
        return self.arguments.names


def build_handler(
    func: Callable[..., Any],
    *,
    kind: str,
    name: str,
    dependencies: Sequence[params.Depends],
    path: str,
    errors: Sequence[ErrorContract] | None = None,
) -> FeatureHandler:
    """Split ``func``'s signature, check its ``errors=`` and build its dependency graphs once,
    at registration.

    Raises:
        ValueError: a ``*args`` / ``**kwargs`` parameter; ``errors=`` that is no list of
            ``ErrorContract`` or repeats a reason; a ``Context[Literal[...]]`` parameter naming
            an undeclared reason (``contracts.build_contracts`` / ``check_context_annotation``).
    """
    owner = f"{kind} {name!r}"
    parts = split_signature(func, owner, allow_path=kind == "resource")
    contracts = build_contracts(errors, owner)
    for parameter in parts.dependency_parameters:
        if dependency_of(parameter) is mcp_context:
            check_context_annotation(parameter.annotation, contracts, owner)
    graph = build_arguments(
        owner, f"{name}_{kind}_arguments", parts.arguments, parts.dependency_parameters, dependencies, context_type=Context, validate=lax_python, allow_path=kind == "resource"
    )
    dependant, context_params, lean = build_dependants(f"{kind}:{name}", graph.dependency_parameters, graph.dependencies, path)
    return FeatureHandler(
        kind=kind,
        name=name,
        handler=func,
        is_async=inspect.iscoroutinefunction(func),
        arguments=graph,
        argument_names=tuple(parts.plain),
        dependant=dependant,
        context_params=context_params,
        lean_dependant=lean,
        signature=parts,
        contracts=contracts,
        response_free=not takes_response(dependant),
    )


def protocol_error(exc: ToolError, target: FeatureHandler) -> McpError:
    """A :class:`ToolError` raised by a resource, prompt or completer as a JSON-RPC error: its
    code, message, reason, hint and data unchanged (the one envelope), a declared reason
    completed by ``target``'s contract first (``ErrorContracts.apply``)."""
    if target.contracts is not None:
        target.contracts.apply(exc)
    error = McpError(exc.message, reason=exc.reason, recovery_hint=exc.recovery_hint, data=exc.data)
    error.code = exc.code
    error.http_status = 400 if exc.code in (-32600, -32602) else 500
    return error


async def run_handler(
    target: FeatureHandler,
    arguments: Mapping[str, Any],
    context: Context,
    request: Request,
    background_tasks: BackgroundTasks,
    finish: Callable[[Any], R],
    *,
    error_data: Mapping[str, Any] | None = None,
) -> R:
    """Validate ``arguments``, run ``target`` with its dependencies and return ``finish(value)``
    (called inside the dependency scope). ``error_data`` joins every error's ``data`` (e.g.
    ``{"uri": ...}`` for a resource).

    Raises:
        InvalidParamsError: arguments that do not validate, failed ``Header``/``Query``
            dependencies.
        McpError: the handler's or a dependency's protocol error (``ToolError`` and
            ``HTTPException`` translated), ``InternalError`` for a crash.
    """
    kwargs: dict[str, Any] = {}
    graph = target.arguments
    bound: CallArguments | None = None
    if target.inputs:  # a handler without arguments (a static resource) skips the model
        raw = dict(arguments)
        try:
            parsed: Any = target.arguments_model.__pydantic_validator__.validate_python(raw)
            if graph.flat:
                kwargs = {name: getattr(parsed, name) for name in target.argument_names}
            else:
                kwargs, bound = graph.bind(parsed, raw)
        except PydanticValidationError as exc:
            raise InvalidParamsError(
                f"Invalid arguments for {target.kind} {target.name!r}: {describe_errors(exc)}", reason="invalid_arguments", data=error_data
            ) from exc

    def invalid(problems: str, _context: Context) -> R:
        raise InvalidParamsError(f"Invalid request for {target.kind} {target.name!r}: {problems}", reason="invalid_request", data=error_data)

    try:
        return await call_handler(target, kwargs, context, request, background_tasks, lambda value: (finish(value), True), invalid, bound, arguments)
    except ToolError as exc:
        raise protocol_error(exc, target) from exc
    except HTTPException as exc:
        translated = from_http_exception(exc)
        raise (translated if isinstance(translated, McpError) else protocol_error(translated, target)) from exc
    except (McpError, InputRequired) as exc:
        # The one place a raised signal of a resource read / prompt get / completion passes:
        # protocol errors (a declared reason gets its contract's hint) and the multi-round-trip
        # signal go up.
        if isinstance(exc, McpError) and target.contracts is not None:
            target.contracts.apply(exc)
        raise
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:
        logger.exception("%s %r crashed (request id %r)", target.kind, target.name, context.request_id)
        raise InternalError(f"{target.kind.capitalize()} {target.name!r} failed with an internal error") from exc
