"""``ctx.log`` masks secrets in both sinks (server log and ``notifications/message``): by field
name (``pwd``, ``auth``, ``client_secret``, ``private_key``…, at any depth) and inline in the
message and in every string value (``Bearer <token>``, ``password=…``, ``api_key: …``,
``"token": "…"``, ``scheme://user:pw@host``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from fastapi_mcp_ctx._context import logger as _logging
from fastapi_mcp_ctx._context.logger import REDACTED, ContextLogger, _Formatter, redact, redact_text  # pyright: ignore[reportPrivateUsage]

SECRETS = ["PW1", "A1", "abc.DEF-123", "hunter2", "sk-live-9", "tok-42", "pg-pass", "cs-7", "PK-8", "ck-5", "pp-6"]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def _both_sinks(monkeypatch: pytest.MonkeyPatch, message: str, **data: Any) -> tuple[str, str]:
    """Log once; the server log line (default formatter) and the notification, as text."""
    logger = logging.Logger("fastapi_mcp_ctx")
    handler = _Records()
    logger.addHandler(handler)
    monkeypatch.setattr(_logging, "server_logger", logger)
    sent: list[dict[str, Any]] = []

    async def send(note: dict[str, Any]) -> None:
        sent.append(note)

    log = ContextLogger(
        floor="debug", client_level=lambda: None, client_opted_in=True, send=send, correlation={}, logger_name="t"
    )
    await log.warning(message, **data)
    [record] = handler.records
    [note] = sent
    return _Formatter().format(record), json.dumps(note)


async def test_sensitive_field_names_are_masked_in_both_sinks(monkeypatch: pytest.MonkeyPatch) -> None:
    line, note = await _both_sinks(
        monkeypatch,
        "kv",
        pwd="PW1",
        auth="A1",
        client_secret="cs-7",
        private_key="PK-8",
        session_cookie="ck-5",
        passphrase="pp-6",
        nested={"x_api_key": "sk-live-9", "items": [{"refreshToken": "tok-42"}]},
        note_id=7,
    )
    for sink in (line, note):
        for secret in SECRETS:
            assert secret not in sink, (secret, sink)
        assert REDACTED in sink and "7" in sink


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("calling upstream with Bearer abc.DEF-123 now", "calling upstream with Bearer [REDACTED] now"),
        ("Authorization: Bearer abc.DEF-123", "Authorization: [REDACTED]"),
        ("login password=hunter2 user=bob", "login password=[REDACTED] user=bob"),
        ("api_key: sk-live-9, region eu", "api_key: [REDACTED], region eu"),
        ('{"token": "tok-42", "n": 1}', '{"token": "[REDACTED]", "n": 1}'),
        ("db at postgresql://app:pg-pass@db:5432/x", "db at postgresql://app:[REDACTED]@db:5432/x"),
        ("client_secret=cs-7&grant_type=x", "client_secret=[REDACTED]&grant_type=x"),
        ("Basic dXNlcjpwdw==", "Basic [REDACTED]"),
    ],
)
def test_inline_secrets_are_masked(text: str, kept: str) -> None:
    assert redact_text(text) == kept


@pytest.mark.parametrize("text", ["the token expired", "tokens counted: 5", "author: Bob", "password reset sent", "a=b c: d"])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


async def test_inline_secrets_in_message_and_values_in_both_sinks(monkeypatch: pytest.MonkeyPatch) -> None:
    line, note = await _both_sinks(
        monkeypatch, "retrying with Bearer abc.DEF-123 and password=hunter2", detail="upstream said token=tok-42"
    )
    for sink in (line, note):
        for secret in ("abc.DEF-123", "hunter2", "tok-42"):
            assert secret not in sink, sink
        assert "retrying with Bearer [REDACTED]" in sink


JWT = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLWJ5dGVz"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"forwarding Bearer Bearer {JWT} upstream", "forwarding Bearer [REDACTED] upstream"),
        ("Authorization: Bearer Bearer opaque-42", "Authorization: [REDACTED]"),
        (f"the idp returned {JWT} for alice", "the idp returned [REDACTED] for alice"),
        (f"id_token={JWT}", "id_token=[REDACTED]"),
        (f"[{JWT}]", "[[REDACTED]]"),
        (f"{JWT}.extra.parts", "[REDACTED]"),  # a JWE has five segments
    ],
    ids=["bearer-bearer", "bearer-bearer-pair", "bare-jwt", "jwt-pair", "jwt-in-brackets", "jwe"],
)
def test_issue_24_item_12_gaps_are_masked(text: str, kept: str) -> None:
    assert redact_text(text) == kept


async def test_plural_sensitive_names_and_bare_jwts_in_both_sinks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24 item 12: ``Bearer Bearer <jwt>``, a bare ``eyJ…`` JWT and a key named ``tokens``
    reached the server log and ``notifications/message``."""
    line, note = await _both_sinks(
        monkeypatch,
        f"retrying with Bearer Bearer {JWT}",
        tokens=["tok-42", "tok-43"],
        api_keys={"eu": "sk-live-9"},
        passwords="hunter2",
        detail=f"upstream returned {JWT}",
        token_count_total=3,
    )
    for sink in (line, note):
        for secret in ("tok-42", "tok-43", "sk-live-9", "hunter2", "eyJzdWIiOiJhbGljZSJ9", "c2lnbmF0dXJlLWJ5dGVz"):
            assert secret not in sink, (secret, sink)
        assert "retrying with Bearer [REDACTED]" in sink


@pytest.mark.parametrize("text", ["eyJ alone", "eyJabc.def (two segments)", "hey John", "status: ok"])
def test_text_that_only_looks_like_a_jwt_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


def test_redact_leaves_the_callers_data_and_other_types() -> None:
    data = {"note": "password=hunter2", "n": 3, "ok": True, "list": ["Bearer abc.DEF-123"]}
    assert redact(data) == {"note": "password=[REDACTED]", "n": 3, "ok": True, "list": ["Bearer [REDACTED]"]}
    assert data["note"] == "password=hunter2"


ADVERSARIAL = [
    "x" * 400_000,  # a run the URL scheme pattern used to re-scan from every position
    "1" * 400_000,
    "a." * 200_000,  # many word boundaries inside one name-like run
    "a-" * 200_000 + "password=hunter2",
    "password" * 50_000,
    "x://" + "a" * 400_000,
    "ab:" * 130_000,
    "eyJ" * 130_000,  # one run, the JWT pattern must not rescan it from every eyJ
    "eyJa." * 80_000,
    "bearer " * 60_000,
]


def test_redaction_is_linear_on_adversarial_strings() -> None:
    """A client-controlled string in ctx.log once took seconds per 100k characters (quadratic
    backtracking) and blocked the event loop. Run in a child process bounded at 60 s: linear
    scanning takes well under a second for these 3 MB; the old patterns took hours."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
        "from test_log_redaction import ADVERSARIAL\n"
        "from fastapi_mcp_ctx._context.logger import redact_text\n"
        "out = [redact_text(text) for text in ADVERSARIAL]\n"
        "assert out[3].endswith('password=[REDACTED]'), out[3][-40:]\n"
        "assert out[:3] == ADVERSARIAL[:3]\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
