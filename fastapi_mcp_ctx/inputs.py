"""``ctx.inputs``: the answers a multi-round-trip call received, limited to what the client declared.

One :class:`InputRound` per attempt of a handler holds the admitted answers (this round's
``inputResponses`` in 2026-07-28, or the answers of the server→client requests the 2025 era
sent), the handler's own plain ``requestState``, and what the awaitable helpers consumed
(carried to the next round inside the sealed request state). :class:`Inputs` is the
handler's read-only view::

    view = ctx.inputs.view("format")          # InputView(kind="elicit", action="accept", content={...})
    choice = ctx.inputs.accepted("format", FormatChoice)   # validated model, or None
    job = ctx.inputs.state()                  # the plain request_state of the last round, or None

Admission (:func:`admit`, known faults B27): an answer reaches the handler only when its kind
is recognisable and the client declared that kind for this request, at the mode level: an
elicitation answer carrying ``content`` is a form answer and needs ``elicitation.form`` (a
bare ``elicitation: {}`` counts); one without (URL accept, decline, cancel) needs
``elicitation``; a sampling answer needs ``sampling``, and ``sampling.tools`` when its content
holds ``tool_use`` / ``tool_result`` blocks; a roots answer needs ``roots``. A request with no
capability view (2025 under ``MCP_SESSION_MODE=stateless``) admits none. Decline and cancel
never carry content; an answer of the wrong shape (content that is not an object of
primitive values, an unknown action, a sampling result that is not one) is dropped, so the
handler asks again.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from pydantic import BaseModel, TypeAdapter
from pydantic import ValidationError as PydanticValidationError

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["InputRound", "InputView", "Inputs", "admit", "answer_for", "answers_method", "decode_round_state", "encode_round_state"]

M = TypeVar("M", bound=BaseModel)
Kind = Literal["elicit", "sample", "roots", "none"]

_KIND_OF_METHOD: Final[dict[str, Kind]] = {"elicitation/create": "elicit", "sampling/createMessage": "sample", "roots/list": "roots"}
_ACTIONS: Final = frozenset({"accept", "decline", "cancel"})

@functools.cache
def _sampling() -> TypeAdapter[types.CreateMessageResult | types.CreateMessageResultWithTools]:
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    return TypeAdapter(types.CreateMessageResult | types.CreateMessageResultWithTools)

_STATE_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class InputView:
    """What came back for one key.

    Attributes:
        kind: ``"elicit"``, ``"sample"``, ``"roots"``, or ``"none"`` (nothing admitted).
        action: the elicitation's ``"accept"`` / ``"decline"`` / ``"cancel"`` (elicit only).
        content: the accepted form content (elicit, accept, form mode), else None.
        result: the whole answer as received (a ``CreateMessageResult``, ``ListRootsResult``
            or ``ElicitResult`` dict), None for ``"none"``.
    """

    kind: Kind = "none"
    action: Literal["accept", "decline", "cancel"] | None = None
    content: Mapping[str, Any] | None = None
    result: Mapping[str, Any] | None = None

    @property
    def roots(self) -> list[dict[str, Any]] | None:
        """The ``roots`` list of a roots answer, else None."""
        if self.kind != "roots" or self.result is None:
            return None
        return list(self.result.get("roots", []))

    @property
    def text(self) -> str | None:
        """The text of a sampling answer whose content is one text block, else None."""
        if self.kind != "sample" or self.result is None:
            return None
        content = self.result.get("content")
        if isinstance(content, Mapping) and content.get("type") == "text":  # pyright: ignore[reportUnknownMemberType]
            text = content.get("text")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            return text if isinstance(text, str) else None
        return None


_NOTHING: Final = InputView()


def _primitive(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    return isinstance(value, list) and all(isinstance(v, str) for v in value)  # pyright: ignore[reportUnknownVariableType]


def _has_tool_blocks(content: Any) -> bool:
    blocks: list[Any] = content if isinstance(content, list) else [content]  # pyright: ignore[reportUnknownVariableType]
    return any(isinstance(b, Mapping) and b.get("type") in ("tool_use", "tool_result") for b in blocks)  # pyright: ignore[reportUnknownMemberType]


def _classify(answer: Mapping[str, Any], asked: str | None) -> Kind:
    if asked is not None:
        return _KIND_OF_METHOD.get(asked, "none")
    if "action" in answer:
        return "elicit"
    if "roots" in answer:
        return "roots"
    if "role" in answer and "content" in answer and "model" in answer:
        return "sample"
    return "none"


def answers_method(answer: Mapping[str, Any], method: str) -> bool:
    """Whether an admitted ``answer`` has the shape of an answer to ``method``
    (``elicitation/create``, ``sampling/createMessage``, ``roots/list``).

    A key the previous round did not ask (no sealed state: a first-round ``inputResponses``) is
    admitted by its shape alone, so the helper asking under that key checks the kind before
    using it: an elicitation answer under a ``ctx.sample`` key is no answer (asked again)."""
    kind = _KIND_OF_METHOD.get(method)
    return kind is not None and _classify(answer, None) == kind


def answer_for(answer: Any, method: str) -> dict[str, Any] | None:
    """``answer`` in its admitted form when it is a result of ``method`` (``elicitation/create``:
    an ``ElicitResult``, action ``accept`` / ``decline`` / ``cancel``, ``content`` an object of
    primitive values when present; ``sampling/createMessage``: a ``CreateMessageResult``;
    ``roots/list``: a ``ListRootsResult``), else None. The shape rule of :func:`admit` without
    its capability check: what a task's answers (``tasks/update``) must pass before they are
    stored, where the asking request's capabilities were checked when it asked."""
    if method not in _KIND_OF_METHOD:
        return None
    return _admit_one(answer, method, lambda _: True)


def _admit_one(answer: Any, asked: str | None, can: Callable[[str], bool]) -> dict[str, Any] | None:
    """The admitted form of one answer, or None when it is dropped (module docstring)."""
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    if not isinstance(answer, Mapping):
        return None
    fields: dict[str, Any] = dict(answer)  # pyright: ignore[reportUnknownArgumentType]
    kind = _classify(fields, asked)
    if kind == "elicit":
        action = fields.get("action")
        if action not in _ACTIONS:
            return None
        content = fields.get("content")
        if action != "accept" or content is None:
            return {"action": action} if can("elicitation") else None  # decline / cancel never carry content
        if not isinstance(content, Mapping) or not all(isinstance(k, str) and _primitive(v) for k, v in content.items()):  # pyright: ignore[reportUnknownVariableType]
            return None
        return {"action": "accept", "content": dict(content)} if can("elicitation.form") else None  # pyright: ignore[reportUnknownArgumentType]
    if kind == "sample":
        try:
            _sampling().validate_python(fields)
        except PydanticValidationError:
            return None
        if not can("sampling") or (_has_tool_blocks(fields.get("content")) and not can("sampling.tools")):
            return None
        return fields
    if kind == "roots":
        try:
            types.ListRootsResult.model_validate(fields)
        except PydanticValidationError:
            return None
        return fields if can("roots") else None
    return None


def admit(
    responses: Mapping[str, Any] | None, can: Callable[[str], bool] | None, asked: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """The answers of ``responses`` that may reach the handler (module docstring).

    Args:
        responses: ``{key: answer}`` as received (``inputResponses``, or 2025 answers).
        can: the request's capability check (``ClientView.can``); None when the request has
            no capability view (then nothing is admitted).
        asked: ``{key: method}`` the previous round asked; an answer to a key asked as one
            kind must have that kind's shape. Keys not asked are judged by their shape.
    """
    if not responses or can is None:
        return {}
    admitted: dict[str, dict[str, Any]] = {}
    for key, answer in responses.items():
        kept = _admit_one(answer, (asked or {}).get(key), can)
        if kept is not None:
            admitted[key] = kept
    return admitted


def _view(answer: Mapping[str, Any] | None) -> InputView:
    if answer is None:
        return _NOTHING
    kind = _classify(answer, None)
    if kind == "elicit":
        content = answer.get("content")
        return InputView("elicit", answer["action"], content if isinstance(content, Mapping) else None, answer)  # pyright: ignore[reportUnknownArgumentType]
    return InputView(kind, None, None, answer)


@dataclass(slots=True, init=False)
class InputRound:
    """One attempt's input: admitted answers, the handler's plain state, the helpers' record.

    Attributes:
        answers: admitted answers by key (this round's and those carried from earlier rounds).
        state: the handler's plain ``request_state`` of the previous round, or None.
        consumed: answers the awaitable helpers returned in this attempt (carried onward).
        counters: per-kind call counters of the awaitable helpers (their default keys).
        number: 1 for the first attempt of the call.
    """

    answers: dict[str, dict[str, Any]] = field(default_factory=lambda: {})
    state: str | None = None
    consumed: dict[str, dict[str, Any]] = field(default_factory=lambda: {})
    counters: dict[str, int] = field(default_factory=lambda: {})
    number: int = 1

    def __init__(
        self,
        answers: dict[str, dict[str, Any]] | None = None,
        state: str | None = None,
        consumed: dict[str, dict[str, Any]] | None = None,
        counters: dict[str, int] | None = None,
        number: int = 1,
    ) -> None:  # written out: the generated one calls a factory per dict, and every call makes a round
        self.answers = {} if answers is None else answers
        self.state = state
        self.consumed = {} if consumed is None else consumed
        self.counters = {} if counters is None else counters
        self.number = number

    def next_key(self, kind: str) -> str:
        """The default key of the next awaitable question of ``kind`` (``elicit-1``, ``sample-2``…):
        stable across re-runs, since a handler asks the same questions in the same order."""
        self.counters[kind] = self.counters.get(kind, 0) + 1
        return f"{kind}-{self.counters[kind]}"


class Inputs:
    """``ctx.inputs``: the answers of this round (see the module docstring)."""

    __slots__ = ("_round",)

    def __init__(self, round_: InputRound | None) -> None:
        self._round = round_

    def view(self, name: str) -> InputView:
        """What came back for ``name``: ``kind`` ``"elicit"`` (with ``action``, ``content``),
        ``"sample"``, ``"roots"``, or ``"none"`` when nothing (admissible) came back."""
        return _view(self._round.answers.get(name) if self._round is not None else None)

    def accepted(self, name: str, model: type[M]) -> M | None:
        """The content of an accepted form answer for ``name``, validated as ``model``; None when
        nothing came back, the user declined or cancelled, or the content does not validate."""
        view = self.view(name)
        if view.kind != "elicit" or view.action != "accept" or view.content is None:
            return None
        try:
            return model.model_validate(dict(view.content))
        except PydanticValidationError:
            return None

    def state(self) -> str | None:
        """The plain ``request_state`` the handler gave in the previous round, or None."""
        return self._round.state if self._round is not None else None

    def names(self) -> list[str]:
        """The keys that have an admitted answer."""
        return sorted(self._round.answers) if self._round is not None else []

    def __repr__(self) -> str:
        return f"Inputs(names={self.names()!r}, state={self.state()!r})"


# -- the plain request state -----------------------------------------------------------------
def encode_round_state(handler_state: str | None, carried: Mapping[str, Mapping[str, Any]], asked: Mapping[str, str]) -> str:
    """The ONE plain string a round hands to the sealer: the handler's own state, the answers
    earlier rounds gave the awaitable helpers, and what this round asks (key → method)."""
    body: dict[str, Any] = {"v": _STATE_VERSION, "a": dict(carried), "k": dict(asked)}
    if handler_state is not None:
        body["s"] = handler_state
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def decode_round_state(plain: str) -> tuple[str | None, dict[str, Any], dict[str, str]]:
    """``(handler_state, carried answers, asked)`` of a plain state from :func:`encode_round_state`.

    Raises:
        ValueError: not a state this module wrote.
    """
    try:
        body = json.loads(plain)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError("request state is not JSON") from exc
    if not isinstance(body, dict) or body.get("v") != _STATE_VERSION:  # pyright: ignore[reportUnknownMemberType]
        raise ValueError("request state has an unknown layout")
    fields: dict[str, Any] = body  # pyright: ignore[reportUnknownVariableType]
    state, carried, asked = fields.get("s"), fields.get("a", {}), fields.get("k", {})
    if state is not None and not isinstance(state, str):
        raise ValueError("request state: the handler's state is not a string")
    if not isinstance(carried, dict) or not isinstance(asked, dict):
        raise ValueError("request state: malformed answers")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in asked.items()):  # pyright: ignore[reportUnknownVariableType]
        raise ValueError("request state: malformed questions")
    return state, carried, asked  # pyright: ignore[reportUnknownVariableType]
