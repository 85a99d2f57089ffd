"""What one registered tool is: :class:`ToolDef`, built by ``_handlers/registry.py`` and read by
the modules that run a call (``resolve``, ``results``, ``_server/tool_calls.py``, ``_server/input_rounds.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi.dependencies.models import Dependant
from pydantic import BaseModel, TypeAdapter

from ..contracts import ErrorContracts
from ..enrichment import EnrichmentSpec
from .arguments import ArgumentGraph

__all__ = ["ToolDef"]


@dataclass(slots=True)
class ToolDef:
    """One registered tool.

    Attributes:
        name / title / description: as listed in ``tools/list``.
        handler: the user's function (sync functions run in a worker thread).
        arguments_model: the flattened model validating ``arguments`` (the handler's and its
            dependencies' arguments; it gave ``inputSchema``): ``arguments.model``, dropped after
            registration and built again at the tool's first call (:class:`DeferredModel`).
        validator: what validates a call's ``arguments``: the model's ``SchemaValidator`` once
            the model is built, before that a stand-in that builds it (``validate_json`` and
            ``validate_python`` only).
        argument_names: the handler parameters filled from ``arguments``.
        arguments: the arguments of the whole graph (``_handlers.arguments``).
        dependant: FastAPI dependency graph, or None when the tool has no dependency.
        context_params: parameters declared ``Depends(mcp_context)`` at the top level.
        lean_dependant: the graph without ``context_params`` (None: nothing left to solve),
            solved when ``mcp_context`` is not overridden; the call's Context fills them.
        response_free: no dependency of ``dependant`` takes a ``Response``
            (``_fastapi_compat.takes_response``): without overrides its solve gets the shared
            ``UNSENT_RESPONSE``.
        output_adapter: serializer of the return value, None without an output schema.
        output_passthrough: validating the output may pass instances through unchecked
            (models, dataclasses, custom types): serialize it with ``warnings="error"``.
        wrap_output: True when structured output is wrapped as ``{"result": value}``.
        header_params: ``inputSchema`` property → ``Mcp-Param-<token>`` (lowercase) for
            properties annotated ``"x-mcp-header"`` (2026-07-28 Value Encoding).
        listing: the ``Tool`` object as sent in ``tools/list``.
        scopes: the OAuth scopes a caller needs (``tool(scopes=[...])``).
        enrichment: declared ``enrichment=`` fields (``enrichment.py``), or None.
        contracts: declared ``errors=`` contracts (``contracts.py``), or None.
        task: ``tool(task=...)``: ``"optional"`` / ``"required"`` (a task tool, ``_tasks``), or None.
        task_start: ``"call"`` (the task starts with the call) or ``"handler"`` (at ``ctx.start_task()``).
        plain_arguments: only the handler declares arguments and ``arguments_model`` validates the
            parsed ``arguments`` as it validates their JSON text
            (``_handlers.argument_fields.validates_alike``): ``run_tool`` skips encoding them.
        plain_output: ``int``, ``str`` or ``bool`` when ``output_adapter`` is exactly that type
            (``_handlers.results.plain_output``): ``shape_result`` shapes such a value itself.
        model_arguments: only the handler declares arguments and the model's fields are exactly
            ``argument_names``: a validated instance's ``__dict__`` is the handler's keyword
            arguments (``run_tool`` copies it instead of reading each field).
        ends: ``(finish, invalid)`` of ``_handlers.resolve.call_handler`` for this tool, made at
            its first call (None before).
    """

    name: str
    handler: Callable[..., Any]
    is_async: bool
    arguments: ArgumentGraph
    argument_names: tuple[str, ...]
    dependant: Dependant | None
    context_params: tuple[str, ...]
    lean_dependant: Dependant | None
    output_adapter: TypeAdapter[Any] | None
    output_passthrough: bool
    wrap_output: bool
    header_params: dict[str, str]
    listing: dict[str, Any] = field(default_factory=lambda: {})
    scopes: frozenset[str] = frozenset()
    """``scopes=`` of the registration: all are needed to call it (``_auth.scopes.require_scopes``)."""
    enrichment: EnrichmentSpec | None = None
    contracts: ErrorContracts | None = None
    task: Literal["optional", "required"] | None = None
    task_start: Literal["call", "handler"] = "call"
    plain_arguments: bool = False
    plain_output: type | None = None
    validator: Any = None
    response_free: bool = False
    model_arguments: bool = False
    ends: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.validator is None:
            self.validator = _FirstCall(self)

    @property
    def arguments_model(self) -> type[BaseModel]:
        """The flattened model (``arguments.model``), built again if it was dropped."""
        model = self.arguments.model
        self.validator = model.__pydantic_validator__
        return model


class _FirstCall:
    """A tool's :attr:`ToolDef.validator` until its first call: builds the dropped model, puts its
    validator in its place, and validates with it."""

    __slots__ = ("tool",)

    def __init__(self, tool: ToolDef) -> None:
        self.tool = tool

    def validate_json(self, raw: Any, *, strict: bool) -> Any:
        """``SchemaValidator.validate_json`` of the model, built now."""
        return self.tool.arguments_model.__pydantic_validator__.validate_json(raw, strict=strict)

    def validate_python(self, value: Any, *, strict: bool) -> Any:
        """``SchemaValidator.validate_python`` of the model, built now (``ToolDef.plain_arguments``)."""
        return self.tool.arguments_model.__pydantic_validator__.validate_python(value, strict=strict)
