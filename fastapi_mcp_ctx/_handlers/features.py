"""The resources, prompts and completions one router serves, and their methods.

:class:`Features` holds the registries and answers what the dispatcher asks: which methods
exist in an era (only what is served: a router without prompts answers ``prompts/list`` with
``-32601`` and does not advertise ``prompts``), the list methods and 2025
``resources/subscribe`` / ``resources/unsubscribe`` (:meth:`Features.simple`), and the three
calls that run a handler (``resources/read``, ``prompts/get``, ``completion/complete``:
:meth:`Features.prepare` checks the request and returns an :class:`Invocation` the
dispatcher runs the way it runs ``tools/call``, with the call's ``Context`` and dependencies).

Cache hints (2026-07-28 ``server/utilities/caching``): per list method
(:meth:`Features.set_list_cache`) and per resource (``ttl_ms`` / ``cache_scope`` of
``@resource``); what is not declared takes ``MCP_CACHE_TTL_MS`` / ``MCP_CACHE_SCOPE``.

Scopes (``resource(scopes=...)``, ``prompt(scopes=...)``; ``_auth.scopes``): ``resources/read``,
``prompts/get``, 2025 ``resources/subscribe`` and ``completion/complete`` of a scoped prompt or
template need every scope (403 ``insufficient_scope`` otherwise, as ``tools/call``); with
``MCP_HIDE_UNAUTHORIZED_TOOLS`` the lists omit what the caller may not use.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from fastapi.background import BackgroundTasks
from starlette.requests import Request

from .._auth.scopes import may_use, require_scopes
from .._transport.subscriptions import ResourceSubscriptions, SessionAddress
from .._wire.pages import paginate
from .._wire.uris import normalize_uri
from ..auth import Principal
from ..context import Context
from ..errors import InvalidParamsError, InvalidRequestError, McpError, ResourceNotFoundError, UnknownPromptError, UriMatchError
from ..settings import McpSettings
from .cache_hints import CacheHints
from .completions import build_completer, parse_request, shape_completion
from .feature_handler import FeatureHandler, run_handler
from .invocation import Invocation
from .prompts import PromptDef, PromptRegistry, check_arguments, shape_messages
from .resources import ResourceDef, ResourceRegistry, shape_contents

__all__ = ["CALL_METHODS", "LIST_METHODS", "Features"]

CALL_METHODS: Final = frozenset({"resources/read", "prompts/get", "completion/complete"})
"""The methods that run a handler (a ``PreparedCall`` like ``tools/call``)."""
LIST_METHODS: Final = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
_URI_LIMIT: Final = 8192
_URI: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:[^\x00-\x20\x7f]*\Z")

def _uri_param(params: Mapping[str, Any], method: str) -> str:
    uri = params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise InvalidParamsError(f"{method} requires a non-empty string 'uri'", reason="invalid_uri")
    if len(uri) > _URI_LIMIT:
        raise InvalidParamsError(f"{method}: the uri is longer than {_URI_LIMIT} characters", reason="invalid_uri")
    if not _URI.fullmatch(uri):  # RFC 3986 §3.1: a scheme, then no space or control character ("$" alone lets a final "\n" through)
        raise InvalidParamsError(f"{method}: {uri[:256]!r} is not a URI", reason="invalid_uri", data={"uri": uri})
    return uri


class Features:
    """Resources, prompts and completers of one router (module docstring)."""

    def __init__(self, subscriptions: ResourceSubscriptions, *, page_size: int) -> None:
        self.resources = ResourceRegistry()
        self.prompts = PromptRegistry()
        self.completers: dict[tuple[str, str, str], FeatureHandler] = {}
        self.list_cache: dict[str, CacheHints] = {}
        self.subscriptions = subscriptions
        self.page_size = page_size
        self._methods: dict[tuple[str, bool], frozenset[str]] = {}  # cleared by every registration

    # -- registration ---------------------------------------------------------------------
    def add_resource(self, resource: ResourceDef, complete: Mapping[str, FeatureHandler]) -> None:
        """Register a resource and its template variables' completers."""
        unknown = sorted(set(complete) - set(resource.template.variables if resource.template else ()))
        if unknown:
            raise ValueError(f"resource {resource.uri!r}: complete= names {unknown}, which are not template variables")
        self.resources.add(resource)
        self._methods.clear()
        for variable, completer in complete.items():
            self.completers[("ref/resource", resource.uri, variable)] = completer

    def add_prompt(self, prompt: PromptDef, complete: Mapping[str, FeatureHandler]) -> None:
        """Register a prompt and its arguments' completers."""
        unknown = sorted(set(complete) - set(prompt.call.inputs))
        if unknown:
            raise ValueError(f"prompt {prompt.name!r}: complete= names {unknown}, which are not its arguments")
        self.prompts.add(prompt)
        self._methods.clear()
        for argument, completer in complete.items():
            self.completers[("ref/prompt", prompt.name, argument)] = completer
        self._methods.clear()

    def add_completer(self, ref: str, target: str, argument: str, completer: FeatureHandler) -> None:
        """Register ``completer`` for ``argument`` of the prompt (``ref="ref/prompt"``) or the
        resource template (``"ref/resource"``) ``target``; ValueError when one is registered."""
        key = (ref, target, argument)
        if key in self.completers:
            raise ValueError(f"a completer for {argument!r} of {target!r} is already registered")
        self.completers[key] = completer
        self._methods.clear()

    def set_list_cache(self, method: str, hints: CacheHints) -> None:
        """Declare the cache hints of every page of one list method."""
        if method not in LIST_METHODS:
            raise ValueError(f"cache hints are set per list method: one of {', '.join(LIST_METHODS)}")
        self.list_cache[method] = hints

    def list_hints(self, method: str, result: dict[str, Any], era: str) -> dict[str, Any]:
        """``result`` with the declared hints of ``method`` (if any; 2026 era only)."""
        hints = self.list_cache.get(method)
        return hints.apply(result) if hints is not None and era == "modern" else result

    # -- what is served -------------------------------------------------------------------
    def scopes(self) -> set[str]:
        """Every scope some resource, template or prompt needs (the metadata's ``scopes_supported``)."""
        return self.resources.scopes() | self.prompts.scopes()

    def methods(self, era: str, subscribe: bool, base: frozenset[str] = frozenset()) -> frozenset[str]:
        """``base`` plus the methods served in ``era`` (``subscribe``: resource updates are
        announced); computed once per registration state."""
        cached = self._methods.get((era, subscribe))
        if cached is not None:
            return cached
        served: set[str] = set(base)
        if len(self.resources):
            served |= {"resources/list", "resources/read", "resources/templates/list"}
            if subscribe and era == "legacy":
                served |= {"resources/subscribe", "resources/unsubscribe"}
        if len(self.prompts):
            served |= {"prompts/list", "prompts/get"}
        if self.completers:
            served.add("completion/complete")
        table = self._methods[(era, subscribe)] = frozenset(served)
        return table

    # -- methods without a handler --------------------------------------------------------
    async def simple(
        self,
        method: str,
        params: Mapping[str, Any],
        era: str,
        subscriber: SessionAddress | None,
        *,
        principal: Principal | None,
        settings: McpSettings,
    ) -> dict[str, Any]:
        """Answer a list method or a 2025 (un)subscription for ``principal`` (the lists omit
        what it may not use when ``settings.hide_unauthorized_tools``).

        Raises:
            InvalidCursorError / InvalidParamsError / ResourceNotFoundError (subscribe to a URI
            nothing serves) / InvalidRequestError (subscribe without a session) /
            InsufficientScopeError (subscribe to a resource whose scopes it lacks).
        """
        cursor = params.get("cursor")

        def visible(scopes: frozenset[str]) -> bool:
            return may_use(scopes, principal)

        allowed = visible if settings.hide_unauthorized_tools else None
        if method in ("resources/list", "resources/templates/list"):
            listings = self.resources.listings(allowed) if method == "resources/list" else self.resources.template_listings(allowed)
            page = paginate(method, "resources" if method == "resources/list" else "resourceTemplates", listings, cursor, self.page_size)
            return per_caller(self.list_hints(method, page, era), era, allowed is not None and bool(self.resources.scopes()))
        if method == "prompts/list":
            page = paginate(method, "prompts", self.prompts.listings(allowed), cursor, self.page_size)
            return per_caller(self.list_hints(method, page, era), era, allowed is not None and bool(self.prompts.scopes()))
        uri = _uri_param(params, method)
        if subscriber is None:
            raise InvalidRequestError(f"{method} needs a session (initialize first, MCP_SESSION_MODE=stateful)")
        if method == "resources/subscribe":
            self.authorize_watch(uri, era, principal, settings)
            try:
                await self.subscriptions.subscribe(subscriber, normalize_uri(uri))
            except OverflowError as exc:
                raise InvalidParamsError(str(exc), reason="too_many_subscriptions") from exc
        else:
            await self.subscriptions.unsubscribe(subscriber, normalize_uri(uri))
        return {}

    def authorize_watch(self, uri: str, era: str, principal: Principal | None, settings: McpSettings, *, unknown_ok: bool = False) -> None:
        """Check ``principal`` may hear updates of ``uri``: only what it may read can be watched,
        with the scopes of the resource serving ``uri`` (2025 ``resources/subscribe``; 2026
        ``subscriptions/listen``, each URI of ``resourceSubscriptions``).

        Args:
            unknown_ok: a URI no resource serves (or a template fits but refuses) is allowed (listen:
                the application may publish updates of URIs it serves otherwise); else refused.

        Raises:
            InsufficientScopeError: the resource needs scopes ``principal`` lacks (403).
            ResourceNotFoundError / UriMatchError: nothing serves ``uri`` (unless ``unknown_ok``).
        """
        try:
            resource, _ = self.resources.find(uri, era)
        except (ResourceNotFoundError, UriMatchError):
            if unknown_ok:
                return
            raise
        if resource.scopes:
            require_scopes(resource.scopes, principal, settings)

    # -- methods with a handler -----------------------------------------------------------
    def prepare(self, method: str, params: Mapping[str, Any], era: str, *, principal: Principal | None, settings: McpSettings) -> Invocation:
        """Check one call's params and the caller's scopes, and find its handler.

        Raises:
            InvalidParamsError, UnknownPromptError, ResourceNotFoundError, UriMatchError: the
            request names nothing served or is malformed (answered before anything runs).
            InsufficientScopeError: ``principal`` lacks a scope of the resource or prompt (403).
        """

        def authorize(scopes: frozenset[str]) -> None:
            if scopes:
                require_scopes(scopes, principal, settings)

        if method == "resources/read":
            return self._read(_uri_param(params, method), era, authorize)
        if method == "prompts/get":
            return self._get(params, authorize)
        return self._complete(params, era, authorize)

    def _read(self, uri: str, era: str, authorize: Callable[[frozenset[str]], None]) -> Invocation:
        resource, values = self.resources.find(uri, era)
        authorize(resource.scopes)
        call = resource.call

        async def run(context: Context, request: Request, background: BackgroundTasks) -> dict[str, Any]:
            def finish(value: Any) -> dict[str, Any]:
                if value is None:
                    raise ResourceNotFoundError(uri, era=era)
                contents = shape_contents(value, uri, resource.mime_type)
                return resource.cache.apply(contents) if era == "modern" else contents

            try:
                return await run_handler(call, values, context, request, background, finish, error_data={"uri": uri})
            except McpError as exc:  # HTTPException(404) from the handler or a dependency: this resource is not there
                if exc.reason == "rejected" and exc.data.get("status") == 404:
                    raise ResourceNotFoundError(uri, f"Resource not found: {exc.message}"[:512], era=era) from exc
                raise

        return Invocation(f"resources/read:{uri}", f"resource:{resource.uri}", uri, run, True, call.dependant is not None, call.contracts)

    def _get(self, params: Mapping[str, Any], authorize: Callable[[frozenset[str]], None]) -> Invocation:
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParamsError("prompts/get requires a string 'name'")
        prompt = self.prompts.get(name)
        if prompt is None:
            raise UnknownPromptError(f"Unknown prompt: {name[:256]}", data={"name": name[:256]})
        authorize(prompt.scopes)
        arguments = check_arguments(prompt, params.get("arguments"))

        async def run(context: Context, request: Request, background: BackgroundTasks) -> dict[str, Any]:
            return await run_handler(prompt.call, arguments, context, request, background, lambda value: shape_messages(value, prompt))

        return Invocation(f"prompts/get:{name}", f"prompt:{name}", None, run, False, prompt.call.dependant is not None, prompt.call.contracts)

    def _complete(self, params: Mapping[str, Any], era: str, authorize: Callable[[frozenset[str]], None]) -> Invocation:
        kind, target, argument, value, resolved = parse_request(params)
        owner = self.prompts.get(target) if kind == "ref/prompt" else self.resources.template(target)
        if owner is None and kind == "ref/prompt":
            raise UnknownPromptError(f"Unknown prompt: {target[:256]}", data={"name": target[:256]})
        if owner is None:
            raise InvalidParamsError(f"No resource template {target[:256]!r}", reason="unknown_template", data={"uri": target[:256]})
        authorize(owner.scopes)
        completer = self.completers.get((kind, target, argument))
        inputs = {"value": value, "argument": argument, "arguments": resolved}

        async def run(context: Context, request: Request, background: BackgroundTasks) -> dict[str, Any]:
            if completer is None:  # an argument without completer: nothing to suggest
                return {"completion": {"values": []}}
            return await run_handler(completer, inputs, context, request, background, shape_completion)

        private = completer is not None and completer.dependant is not None
        return Invocation(f"completion/complete:{target}", f"completion:{target}", None, run, False, private)


def completer_of(func: Callable[..., Any], name: str, path: str) -> FeatureHandler:
    """Build a completer (no extra dependencies) for the decorators' ``complete={arg: fn}``."""
    return build_completer(func, name=name, dependencies=(), path=path)


def per_caller(result: dict[str, Any], era: str, filtered: bool) -> dict[str, Any]:
    """A list whose items depend on the caller's scopes is never ``public`` in a shared cache:
    2026 ``cacheScope: "private"`` (spec 2026-07-28 ``server/utilities/caching``)."""
    if filtered and era == "modern":
        result["cacheScope"] = "private"
    return result
