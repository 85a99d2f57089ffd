"""Multi-round-trip input: the builders of ``inputRequests`` and the signal that asks for them.

A handler that needs something the caller did not supply calls
``ctx.request_input(input_requests={...}, request_state=..., fallback_hint=...)``: it never
returns; it raises :class:`InputRequired`, which ``tools/call``, ``resources/read`` and
``prompts/get`` turn into the protocol's answer (never an ``isError``, never an error log):

- 2026-07-28: the result ``{"resultType": "input_required", "inputRequests": {...},
  "requestState": "<sealed>"}``; the client answers each entry and retries the same request
  with ``inputResponses``, which re-enters the handler (spec 2026-07-28
  ``basic/patterns/mrtr``);
- 2025 era: the server sends the real ``elicitation/create`` / ``sampling/createMessage`` /
  ``roots/list`` requests on the call's stream and re-enters the handler with the answers.

Either way the handler reads the answers on ``ctx.inputs`` (``fastapi_mcp_ctx.inputs``). The
entries of ``input_requests`` are built here, each ``{"method": ..., "params": {...}}``::

    from fastapi_mcp_ctx import input_required

    ctx.request_input(input_requests={
        "format": input_required.elicit("Which format?", FormatChoice),      # form mode
        "login": input_required.elicit_url("Sign in first", "https://…"),     # URL mode
        "summary": input_required.sample("Summarise: …", max_tokens=200),
        "roots": input_required.list_roots(),
    })

Form-mode schemas admit only what the spec admits (2025-11-25 ``client/elicitation``
§Requested Schema): an object of flat properties, each a string (``minLength``,
``maxLength``, ``format`` ∈ email | uri | date | date-time), number or integer (``minimum``,
``maximum``), boolean, or one of the SEP-1330 enum forms (``enum``; titled ``oneOf`` of
``{const, title}``; legacy ``enumNames``; arrays of ``enum`` or of ``anyOf`` ``{const, title}``
items, with ``minItems`` / ``maxItems``), each with ``title``, ``description`` and a
``default`` (SEP-1034).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar

from pydantic import BaseModel

__all__ = [
    "INPUT_METHODS",
    "ElicitAnswer",
    "InputRequired",
    "elicit",
    "elicit_url",
    "elicitation_schema",
    "list_roots",
    "required_capabilities",
    "sample",
]

INPUT_METHODS: Final = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
"""The methods an ``inputRequests`` entry may carry (spec 2026-07-28 ``basic/patterns/mrtr``)."""

_COMMON: Final = frozenset({"type", "title", "description", "default"})
_STRING_KEYS: Final = _COMMON | {"minLength", "maxLength", "format"}
_NUMBER_KEYS: Final = _COMMON | {"minimum", "maximum"}
_ENUM_KEYS: Final = _COMMON | {"enum", "enumNames", "oneOf"}
_ARRAY_KEYS: Final = _COMMON | {"items", "minItems", "maxItems"}
_FORMATS: Final = frozenset({"email", "uri", "date", "date-time"})

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ElicitAnswer(Generic[M]):
    """What ``await ctx.elicit(...)`` returns.

    Attributes:
        action: ``"accept"``, ``"decline"`` or ``"cancel"``.
        data: the accepted content validated as the model (None unless accepted).
        content: the accepted content as received (None unless accepted).
    """

    action: Literal["accept", "decline", "cancel"]
    data: M | None = None
    content: Mapping[str, Any] | None = None


class InputRequired(Exception):  # noqa: N818 - a signal, not an error: it becomes a result
    """The signal ``ctx.request_input`` raises: the call needs input before it can finish.

    Not an error: the framework turns it into ``input_required`` (2026-07-28) or into real
    server→client requests and a re-entry (2025). Do not catch it in a handler (an ``except
    Exception`` around ``ctx.request_input`` / ``await ctx.elicit`` swallows the question).

    Attributes:
        input_requests: ``{key: {"method": ..., "params": {...}}}`` (may be empty).
        request_state: the handler's plain state for the next round, or None.
        fallback_hint: a sentence appended to the refusal's hint when the client cannot answer.
    """

    def __init__(
        self,
        input_requests: Mapping[str, Mapping[str, Any]] | None = None,
        request_state: str | None = None,
        fallback_hint: str | None = None,
    ) -> None:
        if not input_requests and request_state is None:
            raise TypeError("request_input needs input_requests or request_state (at least one of them)")
        if request_state is not None and not isinstance(request_state, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"request_state must be a str, not {type(request_state).__name__}")
        requests: dict[str, dict[str, Any]] = {}
        for key, entry in (input_requests or {}).items():
            requests[_checked_key(key)] = _checked_entry(key, entry)
        super().__init__(f"input required: {', '.join(requests) or 'state only'}")
        self.input_requests = requests
        self.request_state = request_state
        self.fallback_hint = fallback_hint


def _checked_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise TypeError(f"input request keys must be non-empty strings, not {key!r}")
    return key


def _checked_entry(key: str, entry: Any) -> dict[str, Any]:
    if not isinstance(entry, Mapping):
        raise TypeError(f"input request {key!r} must be a mapping built by fastapi_mcp_ctx.input_required")
    fields: Mapping[str, Any] = entry  # pyright: ignore[reportUnknownVariableType]
    method, params = fields.get("method"), fields.get("params", {})
    if method not in INPUT_METHODS:
        raise ValueError(f"input request {key!r}: method must be one of {', '.join(sorted(INPUT_METHODS))}, not {method!r}")
    if not isinstance(params, Mapping):
        raise TypeError(f"input request {key!r}: params must be a mapping")
    return {"method": method, "params": dict(params)}  # pyright: ignore[reportUnknownArgumentType]


def required_capabilities(method: str, params: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The client capabilities ``method`` with ``params`` needs (names as ``ClientView.can`` reads them).

    ``ping``: none. ``roots/list``: ``roots``. ``sampling/createMessage``: ``sampling``, plus
    ``sampling.tools`` when ``tools`` or ``toolChoice`` is given and ``sampling.context`` when
    ``includeContext`` is ``thisServer`` or ``allServers`` (spec 2025-11-25 ``client/sampling``).
    ``elicitation/create``: ``elicitation.url`` for ``mode: "url"``, else ``elicitation.form``
    (a bare ``elicitation: {}`` declares form mode; spec 2025-11-25 ``client/elicitation``).
    """
    given = params or {}
    if method == "roots/list":
        return ("roots",)
    if method == "sampling/createMessage":
        needed = ["sampling"]
        if given.get("tools") is not None or given.get("toolChoice") is not None:
            needed.append("sampling.tools")
        if given.get("includeContext") in ("thisServer", "allServers"):
            needed.append("sampling.context")
        return tuple(needed)
    if method == "elicitation/create":
        return ("elicitation.url",) if given.get("mode") == "url" else ("elicitation.form",)
    return ()


# -- form schemas --------------------------------------------------------------------------
def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any]) -> dict[str, Any]:
    """A pydantic property schema with ``$ref`` resolved and ``Optional`` (``anyOf`` with null) unwrapped."""
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref.removeprefix("#/$defs/"), {})
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(merged, defs)
    any_of = node.get("anyOf")
    if isinstance(any_of, list):
        arms: list[Any] = [arm for arm in any_of if not (isinstance(arm, Mapping) and arm.get("type") == "null")]  # pyright: ignore[reportUnknownVariableType, reportUnknownMemberType]
        if len(arms) == 1 and isinstance(arms[0], Mapping):
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            return _resolve({**arms[0], **rest}, defs)  # pyright: ignore[reportUnknownArgumentType]
    return dict(node)


_MODEL_SCHEMAS: dict[type[BaseModel], dict[str, Any]] = {}


def _from_model(model: type[BaseModel]) -> dict[str, Any]:
    schema = _MODEL_SCHEMAS.get(model)
    if schema is None:  # pydantic's schema generation costs ~1.7 ms: once per model (read-only below)
        schema = _MODEL_SCHEMAS[model] = model.model_json_schema()
    defs: Mapping[str, Any] = schema.get("$defs", {})
    properties: dict[str, Any] = {}
    for name, node in schema.get("properties", {}).items():
        prop = _resolve(node, defs)
        if isinstance(prop.get("enum"), list) and "type" not in prop:
            prop["type"] = "string"
        items = prop.get("items")
        if isinstance(items, Mapping):
            item = _resolve(items, defs)  # pyright: ignore[reportUnknownArgumentType]
            if isinstance(item.get("enum"), list):
                item = {"type": "string", "enum": item["enum"]}
            prop["items"] = item
        allowed = {"string": _STRING_KEYS | _ENUM_KEYS, "number": _NUMBER_KEYS, "integer": _NUMBER_KEYS, "boolean": _COMMON, "array": _ARRAY_KEYS}
        keep = allowed.get(prop.get("type", ""), _COMMON)
        properties[name] = {k: v for k, v in prop.items() if k in keep}  # the model itself validates the answer
    result: dict[str, Any] = {"type": "object", "properties": properties}
    required = schema.get("required")
    if required:
        result["required"] = list(required)
    return result


def _titled_options(value: Any, where: str) -> None:
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where} must be a non-empty list of {{const, title}} objects")
    for option in value:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(option, Mapping) or not isinstance(option.get("const"), str) or not isinstance(option.get("title"), str):  # pyright: ignore[reportUnknownMemberType]
            raise ValueError(f"{where} must hold {{const: str, title: str}} objects, not {option!r}")


def _string_list(value: Any, where: str) -> None:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):  # pyright: ignore[reportUnknownVariableType]
        raise ValueError(f"{where} must be a non-empty list of strings")


def _check_property(name: str, prop: Any) -> None:
    """Raise ValueError unless ``prop`` is a primitive schema the spec admits."""
    where = f"elicitation property {name!r}"
    if not isinstance(prop, Mapping):
        raise ValueError(f"{where} must be a JSON Schema object")
    fields: Mapping[str, Any] = prop  # pyright: ignore[reportUnknownVariableType]
    kind = fields.get("type")
    if kind == "string":
        enum_form = "enum" in fields or "oneOf" in fields
        keys = _ENUM_KEYS if enum_form else _STRING_KEYS
        if "enum" in fields:
            _string_list(fields["enum"], f"{where}: enum")
            if "enumNames" in fields:
                _string_list(fields["enumNames"], f"{where}: enumNames")
                if len(fields["enumNames"]) != len(fields["enum"]):
                    raise ValueError(f"{where}: enumNames must have as many entries as enum")
        elif "oneOf" in fields:
            _titled_options(fields["oneOf"], f"{where}: oneOf")
        if "format" in fields and fields["format"] not in _FORMATS:
            raise ValueError(f"{where}: format must be one of {', '.join(sorted(_FORMATS))}")
    elif kind in ("number", "integer"):
        keys = _NUMBER_KEYS
    elif kind == "boolean":
        keys = _COMMON
    elif kind == "array":
        keys = _ARRAY_KEYS
        items = fields.get("items")
        if not isinstance(items, Mapping):
            raise ValueError(f"{where}: an array needs items (an enum of strings, or anyOf {{const, title}})")
        item: Mapping[str, Any] = items  # pyright: ignore[reportUnknownVariableType]
        if "anyOf" in item:
            _titled_options(item["anyOf"], f"{where}: items.anyOf")
        else:
            if item.get("type") != "string":
                raise ValueError(f"{where}: items must be {{type: string, enum: [...]}} or {{anyOf: [{{const, title}}]}}")
            _string_list(item.get("enum"), f"{where}: items.enum")
    else:
        raise ValueError(f"{where}: type must be string, number, integer, boolean or array (of enum values), not {kind!r}")
    extra = set(fields) - keys
    if extra:
        raise ValueError(f"{where}: keyword(s) {', '.join(sorted(extra))} are not admitted in an elicitation form")


def elicitation_schema(schema: type[BaseModel] | Mapping[str, Any]) -> dict[str, Any]:
    """The ``requestedSchema`` of a form-mode elicitation, checked.

    Args:
        schema: a pydantic model (its fields become the properties; ``Optional`` and enum
            references are flattened, keywords the spec does not admit are left out, since the
            model validates the answer), or a JSON Schema dict ``{"type": "object",
            "properties": {...}, "required": [...]}`` taken as it is.
    Returns:
        ``{"type": "object", "properties": {...}, "required"?: [...]}``.
    Raises:
        ValueError: a property is not a primitive schema the spec admits (nested objects,
            ``$ref``, unknown keywords...), or ``required`` names an unknown property.
        TypeError: ``schema`` is neither a model class nor a mapping.
    """
    if isinstance(schema, type) and issubclass(schema, BaseModel):  # pyright: ignore[reportUnnecessaryIsInstance]
        built = _from_model(schema)
    elif isinstance(schema, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        built = dict(schema)
        if built.get("type", "object") != "object":
            raise ValueError("an elicitation schema must be {'type': 'object', 'properties': {...}}")
        built["type"] = "object"
        extra = set(built) - {"type", "properties", "required", "$schema"}
        if extra:
            raise ValueError(f"an elicitation schema admits type, properties and required only, not {', '.join(sorted(extra))}")
    else:
        raise TypeError(f"schema must be a pydantic model class or a JSON Schema dict, not {type(schema).__name__}")
    properties = built.get("properties")
    if not isinstance(properties, Mapping):
        raise ValueError("an elicitation schema needs a 'properties' object")
    for name, prop in properties.items():  # pyright: ignore[reportUnknownVariableType]
        _check_property(str(name), prop)  # pyright: ignore[reportUnknownArgumentType]
    required = built.get("required")
    if required is not None and (
        not isinstance(required, list) or not all(r in properties for r in required)  # pyright: ignore[reportUnknownVariableType]
    ):
        raise ValueError("'required' must list names of the schema's properties")
    return built


# -- builders --------------------------------------------------------------------------------
def elicit(message: str, schema: type[BaseModel] | Mapping[str, Any]) -> dict[str, Any]:
    """A form-mode ``elicitation/create`` entry: ``{"method": "elicitation/create", "params":
    {"message": message, "requestedSchema": ...}}`` (needs the client's ``elicitation.form``;
    a bare ``elicitation: {}`` counts). Never ask for secrets in a form: use :func:`elicit_url`.

    Raises:
        ValueError / TypeError: see :func:`elicitation_schema`; an empty ``message``.
    """
    if not isinstance(message, str) or not message:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError("an elicitation needs a non-empty message")
    return {"method": "elicitation/create", "params": {"message": message, "requestedSchema": elicitation_schema(schema)}}


def elicit_url(message: str, url: str) -> dict[str, Any]:
    """A URL-mode ``elicitation/create`` entry (``{"mode": "url", "message", "url"}``): the
    user is sent to ``url`` out of band (sign-in, payment, credentials). Needs the client's
    ``elicitation.url``. In the 2025 era the server adds the ``elicitationId`` it requires.

    Raises:
        ValueError: an empty message, or a ``url`` that is not ``http(s)://…``.
    """
    if not isinstance(message, str) or not message:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError("an elicitation needs a non-empty message")
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError(f"a URL elicitation needs an http(s) URL, not {url!r}")
    return {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}


def sample(
    messages_or_prompt: str | Sequence[Mapping[str, Any]],
    *,
    max_tokens: int = 1000,
    system_prompt: str | None = None,
    temperature: float | None = None,
    stop_sequences: Sequence[str] | None = None,
    model_preferences: Mapping[str, Any] | None = None,
    include_context: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_choice: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``sampling/createMessage`` entry (spec 2025-11-25 ``client/sampling``).

    Args:
        messages_or_prompt: a prompt string (one user text message) or the ``messages`` list
            (``[{"role": "user", "content": {"type": "text", "text": …}}, …]``).
        max_tokens: ``maxTokens`` (tokens, > 0).
        tools / tool_choice: tool use in sampling: needs the client's ``sampling.tools``.
        include_context: ``"none"``; ``"thisServer"`` / ``"allServers"`` need ``sampling.context``.
    Raises:
        ValueError: ``max_tokens`` < 1, an empty prompt or message list.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError(f"max_tokens must be a positive integer, not {max_tokens!r}")
    if isinstance(messages_or_prompt, str):
        if not messages_or_prompt:
            raise ValueError("a sampling prompt must not be empty")
        messages: list[Any] = [{"role": "user", "content": {"type": "text", "text": messages_or_prompt}}]
    else:
        messages = [dict(m) for m in messages_or_prompt]
        if not messages:
            raise ValueError("sampling needs at least one message")
    params: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens}
    optional: dict[str, Any] = {
        "systemPrompt": system_prompt,
        "temperature": temperature,
        "stopSequences": list(stop_sequences) if stop_sequences is not None else None,
        "modelPreferences": dict(model_preferences) if model_preferences is not None else None,
        "includeContext": include_context,
        "metadata": dict(metadata) if metadata is not None else None,
        "tools": [dict(t) for t in tools] if tools is not None else None,
        "toolChoice": dict(tool_choice) if tool_choice is not None else None,
    }
    params.update({key: value for key, value in optional.items() if value is not None})
    return {"method": "sampling/createMessage", "params": params}


def list_roots() -> dict[str, Any]:
    """A ``roots/list`` entry (``{"method": "roots/list", "params": {}}``); needs the client's ``roots``."""
    return {"method": "roots/list", "params": {}}
