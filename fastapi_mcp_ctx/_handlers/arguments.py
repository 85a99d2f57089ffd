"""A handler's arguments across its dependency graph: the tool's arguments are the request's
parameters (DESIGN decision 13).

As FastAPI flattens every plain parameter of an operation's dependency graph into the operation's
parameters, a plain parameter of the handler, of a dependency, of a sub-dependency or of a
``McpRouter(dependencies=[...])`` callable is an argument of the tool (resource template variable,
prompt argument). Built once, at registration:

- each **declarer** (the handler, each dependency declaring arguments) keeps its own fields (own
  annotation, own default); one name declared with two types (``int`` here, ``str`` there; a
  declarer that also accepts ``null`` agrees) is refused, naming both;
- the **flattened model** holds one field per name (the first declarer that requires it, else the
  first declarer): it gives ``inputSchema`` and validates the call's arguments once;
- a dependency declaring arguments is replaced in the graph by a **wrapper** of the same kind
  (function, coroutine, generator, async generator) whose signature lacks those parameters and
  takes the ``Request``: FastAPI's solver still solves the graph, overrides, caching and teardown
  included, and the wrapper adds the call's validated values (``request.scope[ARGUMENTS_KEY]``).

Per call (:meth:`ArgumentGraph.bind`): a declarer whose fields are the flattened ones reuses the
flattened values (no second validation); another validates the arguments with its own model, so an
absent argument gets that declarer's own default and an explicit ``null`` stays ``None``.
``app.dependency_overrides`` are read per call: an override's plain parameters are filled from the
arguments by name (``_handlers.argument_overrides``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, get_args, get_origin

from fastapi import params
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from starlette.requests import Request

from .._fastapi_compat import call_kind, is_request_type, with_dependency
from .argument_fields import ArgumentField, DeferredModel, Validate, argument_fields, argument_model, type_label
from .parameters import callable_name, classify, typed_signature

__all__ = ["ARGUMENTS_KEY", "ArgumentGraph", "CallArguments", "Declarer", "Source", "Walker", "build_arguments"]

ARGUMENTS_KEY: Final = "fastapi_mcp_ctx.arguments"
"""Request-scope key of the call's :class:`CallArguments` (set by ``_handlers.resolve.call_handler``)."""
_REQUEST: Final = "fastapi_mcp_ctx_request"


@dataclass(slots=True, eq=False)
class Declarer:
    """The handler or one dependency declaring arguments.

    Attributes:
        label: for messages (``"tool 'rename_item'"``, ``"dependency 'load_item'"``).
        fields: its arguments. order: its place in the graph (pre-order), for the schema's order.
        index: where its values sit in :attr:`CallArguments.values` (the handler: -1).
        model: its own model when it cannot reuse the flattened values, else None.
        built: its model, built with its fields (``model`` when it is needed).
        reuse: ``(parameter, flattened field)`` pairs when ``model`` is None.
    """

    label: str
    fields: tuple[ArgumentField, ...]
    order: int = 0
    index: int = -1
    model: type[BaseModel] | None = None
    reuse: tuple[tuple[str, str], ...] = ()
    built: type[BaseModel] | None = None

    def values(self, parsed: Any, raw: Any, validate: Validate) -> dict[str, Any]:
        """This declarer's keyword arguments for one call (raises pydantic's ValidationError)."""
        if self.model is None:
            return {param: getattr(parsed, flat) for param, flat in self.reuse}
        own = validate(self.model, raw)
        return {f.param: getattr(own, f.param) for f in self.fields}


@dataclass(slots=True)
class CallArguments:
    """One call's arguments as the graph's wrappers read them: ``values`` per declarer index,
    ``raw`` the arguments as received (JSON bytes for a tool, a dict otherwise), ``graph`` the
    registered graph (its ``validate`` judges ``raw`` for an override)."""

    values: tuple[dict[str, Any], ...]
    raw: Any
    graph: ArgumentGraph


def _replace_marker(parameter: inspect.Parameter, old: params.Depends, new: params.Depends) -> inspect.Parameter:
    if parameter.default is old:
        return parameter.replace(default=new)
    if get_origin(parameter.annotation) is Annotated:
        base, *metadata = get_args(parameter.annotation)
        rebuilt: Any = Annotated.__class_getitem__((base, *[new if m is old else m for m in metadata]))  # type: ignore[attr-defined]
        return parameter.replace(annotation=rebuilt)
    return parameter.replace(default=new)  # Depends() read from nowhere else: FastAPI's default form


Source = Callable[[CallArguments], dict[str, Any]]
Inject = Callable[[dict[str, Any]], dict[str, Any]]


def _coroutine(call: Callable[..., Any], inject: Inject) -> Callable[..., Any]:
    async def wrapper(**kwargs: Any) -> Any:
        return await call(**inject(kwargs))

    return wrapper


def _generator(call: Callable[..., Any], inject: Inject) -> Callable[..., Any]:
    def wrapper(**kwargs: Any) -> Any:
        produced: Any = yield from call(**inject(kwargs))  # pyright: ignore[reportUnknownVariableType]
        return produced  # pyright: ignore[reportUnknownVariableType]

    return wrapper


def _async_generator(call: Callable[..., Any], inject: Inject) -> Callable[..., Any]:
    async def wrapper(**kwargs: Any) -> Any:
        async with asynccontextmanager(call)(**inject(kwargs)) as value:
            yield value

    return wrapper


def _function(call: Callable[..., Any], inject: Inject) -> Callable[..., Any]:
    def wrapper(**kwargs: Any) -> Any:
        return call(**inject(kwargs))

    return wrapper


_KINDS: Final[dict[str, Callable[[Callable[..., Any], Inject], Callable[..., Any]]]] = {
    "coroutine": _coroutine,
    "generator": _generator,
    "async_generator": _async_generator,
    "function": _function,
}


def _wrapper(call: Callable[..., Any], kept: Sequence[inspect.Parameter], request_param: str | None, source: Source) -> Callable[..., Any]:
    """``call`` as FastAPI should call it: same kind, ``kept`` parameters, the arguments added."""
    hidden = request_param is None

    def inject(kwargs: dict[str, Any]) -> dict[str, Any]:
        request: Request = kwargs.pop(_REQUEST) if request_param is None else kwargs[request_param]
        bound: CallArguments | None = request.scope.get(ARGUMENTS_KEY)
        if bound is None:
            raise RuntimeError(f"{callable_name(call)} takes MCP arguments: it runs only inside an MCP call")
        kwargs.update(source(bound))
        return kwargs

    wrapper = _KINDS[call_kind(call)](call, inject)
    parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in kept]
    if hidden:
        parameters.append(inspect.Parameter(_REQUEST, inspect.Parameter.KEYWORD_ONLY, annotation=Request))
    wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    wrapper.__name__ = wrapper.__qualname__ = callable_name(call)
    return wrapper


@dataclass(slots=True)
class Walker:
    """Walks dependencies once, wrapping those that declare arguments (directly or below).

    ``memo``: id(original) → (original, what the graph calls); ``originals``: id(wrapper) →
    (wrapper, original); ``take(declarer, parameters)`` decides the kept fields and the source
    of their values (registration: the pre-validated values; an override: validated at call time).
    """

    owner: str
    allow_path: bool
    context_type: type
    take: Callable[[Declarer, Any], Source]
    memo: dict[int, tuple[Any, Any]] = field(default_factory=lambda: {})
    originals: dict[int, tuple[Any, Any]] = field(default_factory=lambda: {})
    declarers: list[Declarer] = field(default_factory=lambda: [])
    entered: int = 1

    def marker(self, parameter: inspect.Parameter, marker: params.Depends, dependency: Callable[..., Any]) -> inspect.Parameter:
        """``parameter`` with its marker calling the dependency's wrapper, when it has one."""
        wrapped = self.wrap(dependency)
        if wrapped is dependency and marker.dependency is not None:
            return parameter
        return _replace_marker(parameter, marker, with_dependency(marker, wrapped))

    def depends(self, marker: params.Depends) -> params.Depends:
        """A ``dependencies=[Depends(...)]`` entry calling the wrapper, when its callable has one."""
        if marker.dependency is None:
            return marker
        wrapped = self.wrap(marker.dependency)
        return marker if wrapped is marker.dependency else with_dependency(marker, wrapped)

    def wrap(self, call: Callable[..., Any], label: str | None = None) -> Callable[..., Any]:
        """What the graph calls in place of ``call``: ``call`` itself, or its wrapper."""
        known = self.memo.get(id(call))
        if known is not None:
            return known[1]
        self.memo[id(call)] = (call, call)  # a cycle stops here (FastAPI refuses it on its own)
        order, self.entered = self.entered, self.entered + 1
        label = label or f"dependency {callable_name(call)!r}"
        try:
            signature = typed_signature(call)
        except (TypeError, ValueError):  # no signature (a builtin): FastAPI's own error, if any
            return call
        where = f"{label} of {self.owner}"
        kept: list[inspect.Parameter] = []
        arguments: list[inspect.Parameter] = []
        changed = False
        request_param: str | None = None
        for parameter in signature.parameters.values():
            if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                continue
            found = classify(parameter, where=where, allow_path=self.allow_path, context_type=self.context_type)
            if found.kind == "argument":
                arguments.append(parameter)
                changed = True
                continue
            if found.kind == "dependency":
                assert found.marker is not None and found.dependency is not None
                rewritten = self.marker(parameter, found.marker, found.dependency)
                changed = changed or rewritten is not parameter
                parameter = rewritten
            elif request_param is None and is_request_type(parameter.annotation):
                request_param = parameter.name
            kept.append(parameter)
        if not changed:
            return call
        fields, built = argument_fields(arguments, where, f"arguments_of_{callable_name(call)}")
        declarer = Declarer(label, fields, order, built=built)
        source: Source = _nothing  # a dependency whose sub-dependencies alone take arguments
        if fields:
            self.declarers.append(declarer)
            source = self.take(declarer, signature)
        wrapper = _wrapper(call, kept, request_param, source)
        self.memo[id(call)] = (call, wrapper)
        self.originals[id(wrapper)] = (wrapper, call)
        return wrapper


def _nothing(_: CallArguments) -> dict[str, Any]:
    return {}


def _same(a: ArgumentField, b: ArgumentField) -> bool:
    if a is b:
        return True
    try:
        same_default = a.default is b.default or (not isinstance(a.default, FieldInfo) and type(a.default) is type(b.default) and bool(a.default == b.default))
        return bool(a.annotation == b.annotation) and same_default
    except Exception:  # an annotation or default that refuses ==: validate on its own
        return False


def _registered(declarer: Declarer, _: Any) -> Source:
    return lambda bound: bound.values[declarer.index]


@dataclass(frozen=True, slots=True, eq=False)
class ArgumentGraph:
    """The arguments of one handler and its dependency graph (module docstring).

    Attributes:
        deferred: the flattened model (``inputSchema``; validates the arguments once per call),
            :attr:`model`, which a tool drops after registration (built again at its first call).
        names / required: every argument in schema order; those some declarer requires.
        handler: the handler's own declarer. declarers: the dependencies' (values by index).
        dependency_parameters / dependencies: the handler's FastAPI parameters and the
            ``dependencies=[...]`` with wrapped callables, for ``build_dependant``.
        flat: nothing but the handler declares arguments (the call needs no :meth:`bind`).
        validate: how a model judges the raw arguments (:func:`strict_json` for a tool,
            :func:`lax_python` for a resource, prompt or completer).
        walker: the registration walk (its memo serves the overrides' walks).
    """

    owner: str
    deferred: DeferredModel
    names: tuple[str, ...]
    required: tuple[str, ...]
    handler: Declarer
    declarers: tuple[Declarer, ...]
    dependency_parameters: tuple[inspect.Parameter, ...]
    dependencies: tuple[params.Depends, ...]
    flat: bool
    walker: Walker
    validate: Validate
    overrides: dict[tuple[int, int], tuple[Any, Any, Callable[..., Any]]] = field(default_factory=lambda: {})

    @property
    def model(self) -> type[BaseModel]:
        """The flattened model (built again here if it was dropped)."""
        return self.deferred.get()

    def bind(self, parsed: Any, raw: Any) -> tuple[dict[str, Any], CallArguments]:
        """The handler's keyword arguments and the :class:`CallArguments` of one call, from the
        flattened model's ``parsed`` value (raises pydantic's ValidationError for a declarer whose
        own model refuses ``raw``)."""
        validate = self.validate
        values = tuple(d.values(parsed, raw, validate) for d in self.declarers)
        return self.handler.values(parsed, raw, validate), CallArguments(values, raw, self)


def _merge(owner: str, declarers: Sequence[Declarer]) -> Iterator[tuple[str, ArgumentField, bool]]:
    """``(name, primary field, required)`` per argument; refuses a name declared with two types."""
    entries: dict[str, list[tuple[Declarer, ArgumentField]]] = {}
    for declarer in declarers:
        for f in declarer.fields:
            entries.setdefault(f.name, []).append((declarer, f))
    for name, found in entries.items():
        first, first_field = found[0]
        for other, other_field in found[1:]:
            if other_field.shape != first_field.shape:
                raise ValueError(
                    f"{owner}: argument {name!r} is declared {type_label(first_field.annotation)} by {first.label} and"
                    f" {type_label(other_field.annotation)} by {other.label}: one argument has one type, declare the same"
                    " type in both (or rename one of them)"
                )
        required = [f for _, f in found if f.required]
        yield name, (required[0] if required else first_field), bool(required)


def build_arguments(
    owner: str,
    model_name: str,
    arguments: Sequence[inspect.Parameter],
    dependency_parameters: Sequence[inspect.Parameter],
    dependencies: Sequence[params.Depends],
    *,
    context_type: type,
    validate: Validate,
    allow_path: bool = False,
) -> ArgumentGraph:
    """Classify and flatten the arguments of a handler (``arguments``: its own argument
    parameters, annotations resolved) and of its graph, once, at registration.

    Raises:
        ValueError: a parameter that is neither an argument with a JSON Schema nor a dependency,
            a ``Context`` in a dependency without ``Depends(mcp_context)``, ``Path()`` outside a
            resource, one argument declared with two types (naming both declarers).
    ``context_type`` is the ``Context`` class (see ``_handlers.parameters.classify``).
    """
    walker = Walker(owner, allow_path, context_type, _registered)
    handler_fields, handler_model = argument_fields(arguments, owner, model_name)
    handler = Declarer(owner, handler_fields, 0, built=handler_model)
    wrapped_dependencies = tuple(walker.depends(d) for d in dependencies)
    rewritten: list[inspect.Parameter] = []
    for parameter in dependency_parameters:
        found = classify(parameter, where=owner, allow_path=allow_path, context_type=context_type)
        if found.kind == "dependency" and found.marker is not None and found.dependency is not None:
            parameter = walker.marker(parameter, found.marker, found.dependency)
        rewritten.append(parameter)
    declarers = sorted(walker.declarers, key=lambda d: d.order)
    for index, declarer in enumerate(declarers):
        declarer.index = index
    merged = list(_merge(owner, [handler, *declarers]))
    primaries = {f.name: f for _, f, _ in merged}
    params_by_name: dict[str, str] = {}
    for name, primary, _ in merged:
        if params_by_name.setdefault(primary.param, name) != name:
            raise ValueError(f"{owner}: arguments {params_by_name[primary.param]!r} and {name!r} use one parameter name {primary.param!r}: rename one")
    for declarer in [handler, *declarers]:
        if all(_same(f, primaries[f.name]) for f in declarer.fields):
            declarer.reuse = tuple((f.param, primaries[f.name].param) for f in declarer.fields)
        else:
            declarer.model = declarer.built
    flat = not declarers and handler.model is None
    # a tool whose dependencies declare nothing: its own model is the flattened one (one model, as before)
    if flat and handler.built is not None:
        deferred = DeferredModel(model_name, handler_fields, handler.built)
    else:
        flattened = [f for _, f, _ in merged]
        deferred = DeferredModel(model_name, flattened, argument_model(model_name, flattened))
    if handler.model is None:  # the flattened values serve the handler: only the graph holds its model
        handler.built = None
    return ArgumentGraph(
        owner=owner,
        deferred=deferred,
        names=tuple(name for name, _, _ in merged),
        required=tuple(name for name, _, required in merged if required),
        handler=handler,
        declarers=tuple(declarers),
        dependency_parameters=tuple(rewritten),
        dependencies=wrapped_dependencies,
        flat=flat,
        walker=walker,
        validate=validate,
    )
