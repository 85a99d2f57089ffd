"""The tool registration methods of ``McpRouter``: ``tool`` and ``add_tool``.

A mixin of :class:`~fastapi_mcp_ctx.router.McpRouter` (as ``_handlers.feature_routes.FeatureRoutes``
holds resources, prompts and completions): each method builds a ``ToolDef``
(``_handlers.registry.build_tool``) with its ``scopes=`` and adds it to the router's
:class:`~.registry.ToolRegistry`. The router's ``dependencies=`` run before every tool.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast, overload

from fastapi import params

from .._auth.scopes import with_scopes
from ..contracts import ErrorContract
from .decorating import check_handler, check_name, is_bare
from .registry import ToolRegistry, build_tool

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["ToolRoutes"]

F = TypeVar("F", bound=Callable[..., Any])


class ToolRoutes:
    """``tool`` and ``add_tool`` of ``McpRouter``."""

    registry: ToolRegistry
    mcp_path: str
    tool_dependencies: list[params.Depends]

    @overload
    def tool(self, name: F, /) -> F: ...
    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: types.ToolAnnotations | dict[str, Any] | None = None,
        input_schema: dict[str, Any] | None = None,
        dependencies: Sequence[params.Depends] | None = None,
        meta: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        scopes: Sequence[str] | None = None,
        enrichment: Any = None,
        errors: Sequence[ErrorContract] | None = None,
        task: Literal["optional", "required"] | None = None,
        task_start: Literal["call", "handler"] = "call",
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        name: str | F | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: types.ToolAnnotations | dict[str, Any] | None = None,
        input_schema: dict[str, Any] | None = None,
        dependencies: Sequence[params.Depends] | None = None,
        meta: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        scopes: Sequence[str] | None = None,
        enrichment: Any = None,
        errors: Sequence[ErrorContract] | None = None,
        task: Literal["optional", "required"] | None = None,
        task_start: Literal["call", "handler"] = "call",
    ) -> Callable[[F], F] | F:
        """Decorator registering a FastAPI-style function as an MCP tool.

        Plain parameters are the tool's arguments (their model gives ``inputSchema``), and so
        are the plain parameters of its dependencies, their sub-dependencies and the router's
        ``dependencies=`` (the tool's arguments are the request's parameters, DESIGN decision 13);
        ``Depends``/``Security``/``Header``/``Query``/``Request``/``BackgroundTasks`` parameters are
        resolved by FastAPI. The docstring is the description; the return annotation gives
        ``outputSchema``. The function is returned unchanged. ``@mcp_router.tool`` without
        parentheses works too, as in FastMCP; so does ``@mcp_router.tool("name")``.

        Args:
            name: tool name (default: the function name), 1-128 of ``[A-Za-z0-9_.-/]``.
            title: display title. description: overrides the docstring.
            annotations: ``ToolAnnotations`` (``readOnlyHint``, ``destructiveHint``...).
            input_schema: advertise this JSON Schema instead of the generated one.
            dependencies: ``[Depends(...)]`` run before the handler, after the router's.
            meta: ``_meta`` of the ``Tool``. icons: ``Icon`` objects.
            scopes: OAuth scopes a caller needs (403 ``insufficient_scope`` otherwise; see docs/auth.md).
            enrichment: fields ``ctx.enrich`` sets, extending ``outputSchema`` (``fastapi_mcp_ctx.enrichment``).
            errors: ``[ErrorContract(...)]``, the reasons ``ctx.fail`` takes (``fastapi_mcp_ctx.contracts``).
            task: ``"optional"``: called by a client that asked for (2025 ``params.task``) or
                declared (2026 extension ``io.modelcontextprotocol/tasks``) tasks, the call becomes
                a task (``ctx.task``; docs/tasks.md), else it runs as a plain call; ``"required"``:
                without the client's opt-in the call is refused (2025 -32601, 2026 -32021).
            task_start: ``"call"`` (default): the task starts with the call; ``"handler"``: the
                handler runs as a plain call (2026 questions are ``input_required`` rounds) until
                it awaits ``ctx.start_task()``, where the client gets the task.
        Raises:
            ValueError: invalid or duplicate name, unsupported signature, a parameter (of the
                tool or of a dependency) that is neither an argument with a JSON Schema nor a
                dependency, a ``Context`` in a dependency without ``Depends(mcp_context)``, one
                argument declared with two types (each message names the fix).
            TypeError: a name that is not a string; a decorated class, non-callable,
                ``staticmethod`` / ``classmethod`` object or generator function
                (``_handlers.decorating``).
        """
        bare = is_bare(name)  # @mcp_router.tool, no parentheses: name is the function
        if not bare:
            check_name(name, "@mcp_router.tool")
        tool_name = None if bare else cast(str | None, name)

        def register(func: F) -> F:
            self.add_tool(
                func,
                name=tool_name,
                title=title,
                description=description,
                annotations=annotations,
                input_schema=input_schema,
                dependencies=dependencies,
                meta=meta,
                icons=icons,
                scopes=scopes,
                enrichment=enrichment,
                errors=errors,
                task=task,
                task_start=task_start,
            )
            return func

        return register(cast(F, name)) if bare else register

    def add_tool(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: types.ToolAnnotations | dict[str, Any] | None = None,
        input_schema: dict[str, Any] | None = None,
        dependencies: Sequence[params.Depends] | None = None,
        meta: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        scopes: Sequence[str] | None = None,
        enrichment: Any = None,
        errors: Sequence[ErrorContract] | None = None,
        task: Literal["optional", "required"] | None = None,
        task_start: Literal["call", "handler"] = "call",
    ) -> None:
        """Register ``func`` as a tool (the non-decorator form of :meth:`tool`).

        Raises:
            ValueError / TypeError: as :meth:`tool`; ``task`` / ``task_start`` outside their values.
        """
        check_handler(func, "@mcp_router.tool")
        if task not in (None, "optional", "required"):
            raise ValueError(f"tool(task=...) must be None, 'optional' or 'required', not {task!r}")
        if task_start not in ("call", "handler"):
            raise ValueError(f"tool(task_start=...) must be 'call' or 'handler', not {task_start!r}")
        definition = with_scopes(build_tool(
                func,
                name=name,
                title=title,
                description=description,
                annotations=annotations,
                input_schema=input_schema,
                dependencies=[*self.tool_dependencies, *(dependencies or [])],
                meta=meta,
                icons=icons,
                path=self.mcp_path,
                enrichment=enrichment,
                errors=errors,
            ), scopes)
        if task is not None:  # spec 2025-11-25 Tool.execution.taskSupport (2026 tools/list leaves it out)
            definition.task, definition.task_start = task, task_start
            definition.listing["execution"] = {"taskSupport": task}
        self.registry.add(definition)
