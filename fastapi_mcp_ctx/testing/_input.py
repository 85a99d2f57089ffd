"""The client side of multi-round-trip input for :class:`~fastapi_mcp_ctx.testing.McpTestClient`:
the test's callbacks, the capabilities they declare, and their answers on the wire.

A test gives ``elicitation=``, ``sampling=`` and ``roots=`` (as the official SDK's client takes
its callbacks); each callback gets the request's ``params`` (a dict, as sent) and returns the
result, sync or async:

- elicitation: an :class:`~fastapi_mcp_ctx.input_required.ElicitAnswer` (``action`` and
  ``content`` or ``data``), a pydantic model (accepted, its fields the content) or the
  ``ElicitResult`` dict (``{"action": "accept", "content": {...}}``);
- sampling: a string (the assistant's text), a pydantic model or the ``CreateMessageResult``
  dict;
- roots: a list of URIs / ``Root`` dicts / models, or a callback returning one.

The same answers serve both eras: 2026-07-28 ``inputResponses`` entries (spec
``basic/patterns/mrtr``) and 2025 JSON-RPC results on the session (``client/elicitation``,
``client/sampling``, ``client/roots``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias, cast

from pydantic import BaseModel

from ..errors import TestClientInputError
from ..input_required import ElicitAnswer
from ._results import Asked, McpResponse

__all__ = ["TEST_MODEL", "ElicitationCallback", "InputAnswerer", "RootsCallback", "SamplingCallback", "answer_rounds"]

TEST_MODEL: Final = "mcp-test-client"
"""The ``model`` of a sampling answer given as a plain string."""

ElicitReply: TypeAlias = "ElicitAnswer[Any] | BaseModel | Mapping[str, Any]"
SampleReply: TypeAlias = "str | BaseModel | Mapping[str, Any]"
RootsReply: TypeAlias = "Sequence[str | BaseModel | Mapping[str, Any]]"
ElicitationCallback: TypeAlias = "Callable[[dict[str, Any]], ElicitReply | Awaitable[ElicitReply]]"
"""``(params) -> answer`` for ``elicitation/create`` (form or URL mode; see the module docstring)."""
SamplingCallback: TypeAlias = "Callable[[dict[str, Any]], SampleReply | Awaitable[SampleReply]]"
"""``(params) -> answer`` for ``sampling/createMessage``."""
RootsCallback: TypeAlias = "Callable[[dict[str, Any]], RootsReply | Awaitable[RootsReply]]"
"""``(params) -> roots`` for ``roots/list``."""


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def elicit_result(reply: Any) -> dict[str, Any]:
    """An ``ElicitResult`` dict from what an elicitation callback returned.

    Raises:
        TypeError: anything but an ``ElicitAnswer``, a model or a mapping.
    """
    if isinstance(reply, ElicitAnswer):
        answer = cast(ElicitAnswer[Any], reply)
        result: dict[str, Any] = {"action": answer.action}
        content = _dump(answer.data) if isinstance(answer.data, BaseModel) else answer.content
        if content is not None:
            result["content"] = dict(content)
        return result
    if isinstance(reply, BaseModel):
        return {"action": "accept", "content": reply.model_dump(mode="json")}
    if isinstance(reply, Mapping):
        return dict(cast(Mapping[str, Any], reply))
    raise TypeError(f"an elicitation callback returns an ElicitAnswer, a pydantic model or an ElicitResult dict, not {type(reply).__name__}")


def sample_result(reply: Any) -> dict[str, Any]:
    """A ``CreateMessageResult`` dict from what a sampling callback returned (a string: one
    assistant text message from model :data:`TEST_MODEL`).

    Raises:
        TypeError: anything but a string, a model or a mapping.
    """
    if isinstance(reply, str):
        return {"role": "assistant", "content": {"type": "text", "text": reply}, "model": TEST_MODEL, "stopReason": "endTurn"}
    if isinstance(reply, BaseModel):
        return _dump(reply)
    if isinstance(reply, Mapping):
        return dict(cast(Mapping[str, Any], reply))
    raise TypeError(f"a sampling callback returns a string, a pydantic model or a CreateMessageResult dict, not {type(reply).__name__}")


def roots_result(reply: Any) -> dict[str, Any]:
    """A ``ListRootsResult`` dict (``{"roots": [{"uri", "name"?}]}``) from a list of roots.

    Raises:
        TypeError: not a list of URIs, models or mappings.
    """
    if isinstance(reply, (str, bytes)) or not isinstance(reply, Sequence):
        raise TypeError(f"roots are a list of URIs, Root models or dicts, not {type(reply).__name__}")
    roots: list[dict[str, Any]] = []
    for root in cast(Sequence[Any], reply):
        if isinstance(root, str):
            roots.append({"uri": root})
        elif isinstance(root, BaseModel):
            roots.append(_dump(root))
        elif isinstance(root, Mapping):
            roots.append(dict(cast(Mapping[str, Any], root)))
        else:
            raise TypeError(f"a root is a URI, a Root model or a dict, not {type(root).__name__}")
    return {"roots": roots}


class InputAnswerer:
    """The test's callbacks: the capabilities they declare and the answer to each request."""

    def __init__(
        self,
        elicitation: ElicitationCallback | None,
        sampling: SamplingCallback | None,
        roots: RootsCallback | Sequence[Any] | None,
    ) -> None:
        if isinstance(roots, (str, bytes)) or not (roots is None or callable(roots) or isinstance(roots, Sequence)):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("roots= takes a list of roots or a callback returning one")
        self.elicitation, self.sampling, self.roots = elicitation, sampling, roots

    def capabilities(self) -> dict[str, Any]:
        """The ``ClientCapabilities`` the callbacks answer: ``elicitation`` (form and URL
        mode), ``sampling``, ``roots`` (``listChanged: false``)."""
        declared: dict[str, Any] = {}
        if self.elicitation is not None:
            declared["elicitation"] = {"form": {}, "url": {}}
        if self.sampling is not None:
            declared["sampling"] = {}
        if self.roots is not None:
            declared["roots"] = {"listChanged": False}
        return declared

    def answers(self, method: str) -> bool:
        """Whether ``method`` is one this client answers (``ping`` and the three input methods)."""
        return method in ("ping", "elicitation/create", "sampling/createMessage", "roots/list")

    async def answer(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """The result for a server request ``method`` with ``params`` (``ping``: ``{}``).

        Raises:
            TestClientInputError: the server asked for something no callback answers.
            TypeError: a callback returned something of the wrong kind.
        """
        given = dict(params)
        if method == "ping":
            return {}
        if method == "elicitation/create" and self.elicitation is not None:
            return elicit_result(await _called(self.elicitation, given))
        if method == "sampling/createMessage" and self.sampling is not None:
            return sample_result(await _called(self.sampling, given))
        if method == "roots/list" and self.roots is not None:
            source = self.roots
            reply = await _called(source, given) if callable(source) else source
            return roots_result(reply)
        option = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}.get(method)
        hint = f"pass McpTestClient({option}=...)" if option else "the test client answers elicitation/create, sampling/createMessage, roots/list and ping only"
        raise TestClientInputError(f"the server asked {method!r} and McpTestClient has no answer for it: {hint}")

    async def answer_round(self, input_requests: Mapping[str, Any], round_number: int) -> tuple[dict[str, Any], list[Asked]]:
        """The ``inputResponses`` for one ``input_required`` result's ``inputRequests``, and the record.

        Raises:
            TestClientInputError: an entry no callback answers, or one that is not ``{method, params}``.
        """
        responses: dict[str, Any] = {}
        asked: list[Asked] = []
        for key, entry in input_requests.items():
            if not isinstance(entry, Mapping) or not isinstance(cast(Mapping[str, Any], entry).get("method"), str):
                raise TestClientInputError(f"inputRequests[{key!r}] is not a {{method, params}} object: {entry!r}")
            fields = cast(Mapping[str, Any], entry)
            params = cast(dict[str, Any], fields.get("params") or {})
            responses[key] = await self.answer(str(fields["method"]), params)
            asked.append(Asked(str(fields["method"]), dict(params), responses[key], key, round_number))
        return responses, asked


    async def reply_to(self, request: Mapping[str, Any], asked: list[Asked]) -> dict[str, Any]:
        """The JSON-RPC response to a 2025 server→client ``request``; appends the question to
        ``asked`` (``ping`` left out). A method no client answers gets ``-32601``.

        Raises:
            TestClientInputError: an input method no callback answers.
        """
        method, params = str(request["method"]), cast(dict[str, Any], request.get("params") or {})
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        if not self.answers(method):
            return {**reply, "error": {"code": -32601, "message": f"Method not found: {method}"}}
        reply["result"] = await self.answer(method, params)
        if method != "ping":
            asked.append(Asked(method, dict(params), reply["result"], None, len(asked) + 1))
        return reply


Resend = Callable[[dict[str, Any]], Awaitable[McpResponse]]
"""Send the request again with these params: the next round's answer."""


async def answer_rounds(answerer: InputAnswerer, first: McpResponse, params: Mapping[str, Any], resend: Resend, max_rounds: int) -> McpResponse:
    """Answer 2026-07-28 ``input_required`` results until the request completes: each round's
    ``inputRequests`` answered by ``answerer`` and sent back as ``inputResponses`` with the
    round's ``requestState`` echoed (spec 2026-07-28 ``basic/patterns/mrtr``).

    Returns:
        The last answer, with ``asked`` and the ``notifications`` of every round.
    Raises:
        TestClientInputError: a question no callback answers; still ``input_required`` after
            ``max_rounds`` answered rounds.
    """
    answer, asked, notes, sent = first, list(first.asked), list(first.notifications), dict(params)
    rounds = 0
    while answer.input_required:
        rounds += 1
        if rounds > max_rounds:
            raise TestClientInputError(
                f"{first.method}: still input_required after {max_rounds} answered rounds "
                "(the handler keeps asking; raise max_input_rounds= or pass auto_answer=False)"
            )
        responses, record = await answerer.answer_round(answer.result.get("inputRequests") or {}, rounds)
        asked.extend(record)
        sent["inputResponses"] = responses
        sent.pop("requestState", None)
        if "requestState" in answer.result:
            sent["requestState"] = answer.result["requestState"]
        answer = await resend(sent)
        notes.extend(answer.notifications)
    return McpResponse(first.method, answer.result, notes, answer.http_status, answer.headers, tuple(asked))


async def _called(callback: Callable[[dict[str, Any]], Any], params: dict[str, Any]) -> Any:
    reply = callback(params)
    return await reply if inspect.isawaitable(reply) else reply
