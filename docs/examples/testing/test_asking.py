from typing import Any

import pytest

from booking import app
from fastapi_mcp_ctx import ElicitAnswer
from fastapi_mcp_ctx.testing import Era, McpResponseError, McpTestClient

ANSWERS = {
    "Who is staying?": {"name": "Ada"},
    "How many nights for Ada?": {"nights": 2},
    "Book 2 nights for Ada?": {"confirm": True},
}


def front_desk(params: dict[str, Any]) -> ElicitAnswer[Any]:
    """The user: answers each question the tool asks by its message."""
    return ElicitAnswer("accept", content=ANSWERS[params["message"]])


async def test_the_booking_asks_three_questions(era: Era) -> None:
    async with McpTestClient(app, era=era, elicitation=front_desk) as client:
        result = await client.call_tool("book_room")
    assert result.structured == {"guest": "Ada", "nights": 2, "booked": True}
    assert [question.params["message"] for question in result.asked] == list(ANSWERS)
    assert result.rounds == 3


async def test_declining_ends_the_booking(era: Era) -> None:
    async with McpTestClient(app, era=era, elicitation=lambda params: ElicitAnswer("decline")) as client:
        result = await client.call_tool("book_room")
    assert result.is_error is True
    assert result.text == "The user chose to decline the booking."


async def test_sampling_and_roots(era: Era) -> None:
    prompts: list[str] = []

    def model(params: dict[str, Any]) -> str:
        prompts.append(params["messages"][0]["content"]["text"])
        return "Sleep by the sea."

    async with McpTestClient(app, era=era, sampling=model, roots=["file:///projects/hotel"]) as client:
        assert (await client.call_tool("tagline", {"hotel": "Sea View"})).text == "Sleep by the sea."
        assert (await client.call_tool("workspace")).structured == {"result": ["file:///projects/hotel"]}
    assert prompts == ["Write a one-line tagline for Sea View."]


async def test_a_client_without_elicitation_is_refused() -> None:
    async with McpTestClient(app, era="legacy") as legacy:
        result = await legacy.call_tool("book_room")
    assert result.is_error is True and result.asked == ()
    assert result.error is not None
    assert result.error["data"]["reason"] == "client_capability_missing"
    async with McpTestClient(app, era="modern") as modern:
        with pytest.raises(McpResponseError) as caught:
            await modern.call_tool("book_room")
    assert caught.value.code == -32021
    assert caught.value.data["requiredCapabilities"] == {"elicitation": {"form": {}}}


async def test_the_2026_wire_one_round_at_a_time() -> None:
    async with McpTestClient(app, era="modern", elicitation=front_desk) as client:
        first = await client.call_tool("book_room", auto_answer=False)
        assert first.input_required is True
        [(key, question)] = first.result["inputRequests"].items()
        assert question["method"] == "elicitation/create"
        assert question["params"]["message"] == "Who is staying?"
        second = await client.call_tool(
            "book_room",
            input_responses={key: {"action": "accept", "content": {"name": "Grace"}}},
            request_state=first.result["requestState"],
            auto_answer=False,
        )
    assert second.result["inputRequests"]["elicit-2"]["params"]["message"] == "How many nights for Grace?"
