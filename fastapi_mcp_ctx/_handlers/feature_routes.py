"""The registration methods of resources, prompts and completions on ``McpRouter``.

A mixin of :class:`~fastapi_mcp_ctx.router.McpRouter` (which keeps its own module to the
HTTP mount and tools): each method builds a definition (``_handlers.resources``,
``_handlers.prompts``, ``_handlers.completions``) and adds it to the router's :class:`~.features.Features`. The router's
``dependencies=`` run before every resource, prompt and completer, as before every tool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, TypeVar, cast, overload

from fastapi import params

from ..contracts import ErrorContract
from .cache_hints import CacheHints, CacheScope
from .completions import build_completer
from .decorating import check_handler, check_name, is_bare
from .feature_handler import FeatureHandler
from .features import Features
from .prompts import build_prompt
from .resources import build_resource

__all__ = ["FeatureRoutes"]

F = TypeVar("F", bound=Callable[..., Any])


class FeatureRoutes:
    """``resource``, ``prompt``, ``completion`` and ``cache_hints`` of ``McpRouter``."""

    features: Features
    mcp_path: str
    tool_dependencies: list[params.Depends]

    def _completers(self, owner: str, complete: Mapping[str, Callable[..., Any]] | None) -> dict[str, FeatureHandler]:
        path, deps = self.mcp_path, self.tool_dependencies
        return {arg: build_completer(fn, name=f"{owner}:{arg}", dependencies=deps, path=path) for arg, fn in (complete or {}).items()}

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: Mapping[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        ttl_ms: int | None = None,
        cache_scope: CacheScope | None = None,
        dependencies: Sequence[params.Depends] | None = None,
        complete: Mapping[str, Callable[..., Any]] | None = None,
        scopes: Sequence[str] | None = None,
        errors: Sequence[ErrorContract] | None = None,
    ) -> Callable[[F], F]:
        """Decorator registering a FastAPI-style function as the resource at ``uri``: a static
        URI (``"config://app"``) or an RFC 6570 template (``"users://{user_id}/profile"``,
        ``"file:///{+path}"``, ``"repo://{owner}{/parts*}"``, ``"search://items{?q,limit}"``).

        The template's variables fill the parameters of the same name (decoded once; a query
        variable absent from the URI leaves the parameter's default); ``Depends`` /
        ``Security`` / ``Request`` parameters are resolved by FastAPI; ``ctx.uri`` is the URI
        read. The return value becomes ``contents``: ``str`` text, ``bytes`` a base64 ``blob``,
        ``TextResourceContents`` / ``BlobResourceContents`` (or a list), ``None`` "not found",
        anything else its JSON. The function is returned unchanged.

        Args:
            uri: the URI or template (listed by ``resources/list`` or ``resources/templates/list``).
            name: default the function name. title / description (default: the docstring's
                first paragraph) / mime_type / size (bytes, static only) / annotations /
                icons / meta: as listed (spec 2025-11-25 ``server/resources``).
            ttl_ms / cache_scope: the 2026 cache hints of its ``resources/read`` results
                (milliseconds; ``"public"`` or ``"private"``); default ``MCP_CACHE_TTL_MS`` /
                ``MCP_CACHE_SCOPE``.
            dependencies: ``[Depends(...)]`` run before the function, after the router's.
            complete: template variable → completer (see :meth:`completion`).
            scopes: OAuth scopes a caller needs to read it (and to subscribe to it or complete
                its variables): 403 ``insufficient_scope`` otherwise, hidden from the lists
                with ``MCP_HIDE_UNAUTHORIZED_TOOLS`` (docs/auth.md).
            errors: ``[ErrorContract(...)]``, the reasons ``ctx.fail`` takes: the JSON-RPC
                error with the contract's code and ``data.recovery.hint`` (``fastapi_mcp_ctx.contracts``).
        Raises:
            ValueError: a URI without a scheme, an unsupported template, a variable the
                function does not take, a required parameter that is no path variable, a
                duplicate URI, an invalid scope, invalid ``errors``.
            TypeError: ``@mcp_router.resource`` without its URI (no parentheses), a URI that is
                not a string; a decorated class, non-callable, ``staticmethod`` /
                ``classmethod`` object or generator function (``_handlers.decorating``).
        """
        if is_bare(uri):
            raise TypeError(
                f"@mcp_router.resource needs the resource's URI: write @mcp_router.resource(\"config://app\") above "
                f"def {getattr(uri, '__name__', 'handler')}(...) (or a template: \"users://{{user_id}}/profile\")"
            )
        check_name(uri, "@mcp_router.resource", "uri")

        def register(func: F) -> F:
            check_handler(func, "@mcp_router.resource")
            resource = build_resource(
                func,
                uri,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                size=size,
                annotations=annotations,
                icons=icons,
                meta=meta,
                cache=CacheHints(ttl_ms, cache_scope),
                dependencies=[*self.tool_dependencies, *(dependencies or [])],
                path=self.mcp_path,
                scopes=scopes,
                errors=errors,
            )
            self.features.add_resource(resource, self._completers(uri, complete))
            return func

        return register

    @overload
    def prompt(self, name: F, /) -> F: ...
    @overload
    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        dependencies: Sequence[params.Depends] | None = None,
        complete: Mapping[str, Callable[..., Any]] | None = None,
        scopes: Sequence[str] | None = None,
        errors: Sequence[ErrorContract] | None = None,
    ) -> Callable[[F], F]: ...

    def prompt(
        self,
        name: str | F | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        dependencies: Sequence[params.Depends] | None = None,
        complete: Mapping[str, Callable[..., Any]] | None = None,
        scopes: Sequence[str] | None = None,
        errors: Sequence[ErrorContract] | None = None,
    ) -> Callable[[F], F] | F:
        """Decorator registering a FastAPI-style function as a prompt.

        Plain parameters are the prompt's arguments (``required`` when they have no default;
        ``Annotated[str, Field(description=...)]`` gives the description); the docstring is
        the description. It returns a ``str`` (one user message), content blocks,
        ``PromptMessage`` objects, a list of these, or a ``GetPromptResult``. A missing
        required argument or a non-string value is ``-32602``. ``@mcp_router.prompt`` without
        parentheses works too, as in FastMCP; so does ``@mcp_router.prompt("name")``.

        Args:
            name: default the function name. complete: argument → completer.
            dependencies: ``[Depends(...)]`` run before the function, after the router's.
            scopes: OAuth scopes a caller needs to get it (and to complete its arguments): 403
                ``insufficient_scope`` otherwise, hidden from ``prompts/list`` with
                ``MCP_HIDE_UNAUTHORIZED_TOOLS`` (docs/auth.md).
            errors: ``[ErrorContract(...)]``, the reasons ``ctx.fail`` takes (as for :meth:`resource`).
        Raises:
            ValueError: invalid or duplicate name, ``complete`` naming no argument, an invalid
                scope, invalid ``errors``.
            TypeError: as :meth:`resource` (a name that is not a string, a decorated class...).
        """
        bare = is_bare(name)  # @mcp_router.prompt, no parentheses: name is the function
        if not bare:
            check_name(name, "@mcp_router.prompt")
        prompt_name = None if bare else cast(str | None, name)

        def register(func: F) -> F:
            check_handler(func, "@mcp_router.prompt")
            prompt = build_prompt(
                func,
                name=prompt_name,
                title=title,
                description=description,
                icons=icons,
                meta=meta,
                dependencies=[*self.tool_dependencies, *(dependencies or [])],
                path=self.mcp_path,
                scopes=scopes,
                errors=errors,
            )
            self.features.add_prompt(prompt, self._completers(prompt.name, complete))
            return func

        return register(cast(F, name)) if bare else register

    @overload
    def completion(self, func: Callable[..., Any], /) -> NoReturn: ...
    @overload
    def completion(
        self,
        /,
        *,
        argument: str,
        prompt: str | None = None,
        resource: str | None = None,
        dependencies: Sequence[params.Depends] | None = None,
    ) -> Callable[[F], F]: ...

    def completion(
        self,
        func: Callable[..., Any] | None = None,
        /,
        *,
        argument: str | None = None,
        prompt: str | None = None,
        resource: str | None = None,
        dependencies: Sequence[params.Depends] | None = None,
    ) -> Callable[[F], F]:
        """Decorator registering the completer of one prompt argument or template variable
        (``completion/complete``; spec 2025-11-25 ``server/utilities/completion``).

        The function takes any of ``value`` (the text typed so far), ``argument`` (its name)
        and ``arguments`` (``context.arguments``: the values already chosen) plus dependencies
        and ``Context``; it returns a list of strings or a ``Completion``. At most 100 values
        are sent, with ``hasMore`` and ``total`` when there were more.

        Args:
            argument: the argument or variable name. prompt: the prompt's name, or
            resource: the template text exactly as registered (one of the two).
        Raises:
            ValueError: neither or both of ``prompt`` / ``resource``, a completer already
                registered, a parameter that is neither an input nor a dependency.
            TypeError: used bare (``@mcp_router.completion``) or without ``argument=``; a
                decorated class, non-callable... as :meth:`resource`.
        """
        if func is not None or not isinstance(argument, str):
            used = "@mcp_router.completion without parentheses" if func is not None else "@mcp_router.completion() without argument="
            raise TypeError(
                f"{used}: a completer completes one argument of one prompt or resource template: write "
                "@mcp_router.completion(argument=\"language\", prompt=\"review\") or "
                "@mcp_router.completion(argument=\"user_id\", resource=\"users://{user_id}/profile\")"
            )
        if (prompt is None) == (resource is None):
            raise ValueError("completion() takes prompt=... or resource=..., exactly one")
        ref, target = ("ref/prompt", prompt) if prompt is not None else ("ref/resource", resource)
        assert target is not None

        def register(func: F) -> F:
            check_handler(func, "@mcp_router.completion")
            completer = build_completer(
                func, name=f"{target}:{argument}", dependencies=[*self.tool_dependencies, *(dependencies or [])], path=self.mcp_path
            )
            self.features.add_completer(ref, target, argument, completer)
            return func

        return register

    def cache_hints(self, method: str, *, ttl_ms: int | None = None, cache_scope: CacheScope | None = None) -> None:
        """Declare the 2026-07-28 cache hints (``ttlMs``, ``cacheScope``) of every page of one
        list method: ``"tools/list"``, ``"prompts/list"``, ``"resources/list"``,
        ``"resources/templates/list"`` (``None`` keeps ``MCP_CACHE_TTL_MS`` / ``MCP_CACHE_SCOPE``).

        Raises:
            ValueError: another method, a negative or non-integer ``ttl_ms``, another scope.
        """
        self.features.set_list_cache(method, CacheHints(ttl_ms, cache_scope))
