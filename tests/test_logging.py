"""Logging that shows: the server-log half of ``ctx.log`` under an application that configured
no logging, and the ``logger`` of ``notifications/message``.

The library adds a stderr handler to ``fastapi_mcp_ctx`` at the first request only when no
handler would receive its records (none on it, none on an ancestor it propagates to; Python's
``lastResort`` does not count), and stays silent once the application configures one. Under
pytest the root logger has pytest's handlers, so these tests isolate the logger first. The
real-server check (uvicorn's default logging config, stderr captured) is in
``test_uvicorn.py``. Spec 2025-11-25 ``server/utilities/logging`` (``logger`` is optional;
we always send one).
"""

from __future__ import annotations

import io
import logging
import logging.config
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import META_LOG_LEVEL, Wire, make_app, make_router, messages_of, open_client
from fastapi import Depends

from fastapi_mcp_ctx import Context, mcp_context
from fastapi_mcp_ctx._context import logger as _logging
from fastapi_mcp_ctx._context.logger import ContextLogger, install_default_handler


def build_app(**settings: Any) -> Any:
    router = make_router(**settings)

    @router.tool()
    async def store_note(text: str, ctx: Context = Depends(mcp_context)) -> str:
        """Logs at two levels."""
        await ctx.log.info("stored", note_id=7, text=text)
        await ctx.log.warning("careful", password="hunter2")
        return "ok"

    return make_app(router)


@pytest.fixture
def app() -> Any:
    return build_app()


@pytest.fixture
def bare_logger(monkeypatch: pytest.MonkeyPatch) -> Iterator[logging.Logger]:
    """``fastapi_mcp_ctx`` as an application that configured no logging leaves it: a logger
    outside the manager's tree (pytest attaches its capture handlers to root and to every
    non-propagating logger it knows), standing in for the library's one."""
    bare = logging.Logger("fastapi_mcp_ctx")
    monkeypatch.setattr(_logging, "server_logger", bare)
    yield bare


@pytest.fixture
def real_logger() -> Iterator[logging.Logger]:
    """The library's logger, restored after the test (for ``logging.config`` tests)."""
    logger = logging.getLogger("fastapi_mcp_ctx")
    saved = (list(logger.handlers), logger.level, logger.propagate, logger.disabled)
    try:
        yield logger
    finally:
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        handlers, level, propagate, disabled = saved
        for handler in handlers:
            logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
        logger.disabled = disabled


def ours(logger: logging.Logger) -> logging.Handler:
    [handler] = logger.handlers
    return handler


def capture(handler: logging.Handler) -> io.StringIO:
    stream = io.StringIO()
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)  # pyright: ignore[reportUnknownMemberType]
    return stream


def context_logger(**overrides: Any) -> ContextLogger:
    values: dict[str, Any] = {
        "floor": "debug",
        "client_level": lambda: None,
        "client_opted_in": False,
        "send": None,
        "correlation": {"request_id": 5, "tenant_id": "acme", "session_id": "s-1", "trace_id": None},
        "logger_name": "store_note",
    }
    values.update(overrides)
    return ContextLogger(**values)


# -- the default handler ------------------------------------------------------------------------------


async def test_added_when_nothing_is_configured_with_level_message_and_fields(bare_logger: logging.Logger) -> None:
    assert install_default_handler("debug") is True
    assert bare_logger.level == logging.DEBUG
    stream = capture(ours(bare_logger))
    log = context_logger()
    await log.info("stored", note_id=7, text="a b")
    await log.notice("noticed")
    await log.warning("careful", api_key="k-123")
    lines = stream.getvalue().splitlines()
    assert lines[0] == 'INFO:     fastapi_mcp_ctx - stored request_id=5 tenant_id=acme session_id=s-1 trace_id=- note_id=7 text="a b"'
    assert lines[1].startswith("NOTICE:   fastapi_mcp_ctx - noticed request_id=5")
    assert lines[2].startswith("WARNING:  fastapi_mcp_ctx - careful ") and 'api_key="[REDACTED]"' in lines[2]
    assert "k-123" not in stream.getvalue()


async def test_library_records_without_context_keep_their_traceback(bare_logger: logging.Logger) -> None:
    install_default_handler("info")
    stream = capture(ours(bare_logger))
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        bare_logger.exception("backend failed")
    text = stream.getvalue()
    assert text.startswith("ERROR:    fastapi_mcp_ctx - backend failed\nTraceback")
    assert "RuntimeError: boom" in text


async def test_added_once(bare_logger: logging.Logger) -> None:
    assert install_default_handler("debug") is True
    assert install_default_handler("debug") is False
    assert len(bare_logger.handlers) == 1


async def test_not_added_when_the_application_has_a_handler_on_an_ancestor(bare_logger: logging.Logger) -> None:
    root = logging.Logger("root")
    root.addHandler(logging.StreamHandler(io.StringIO()))  # e.g. logging.basicConfig()
    bare_logger.parent = root
    assert install_default_handler("debug") is False
    assert bare_logger.handlers == [] and bare_logger.level == logging.NOTSET
    bare_logger.propagate = False  # the ancestor no longer receives the records: ours is needed
    assert install_default_handler("debug") is True


async def test_the_real_logger_is_left_alone_under_a_configured_root() -> None:
    assert logging.getLogger().handlers  # pytest's, standing for the application's
    assert install_default_handler("debug") is False


async def test_opt_out_with_a_null_handler(bare_logger: logging.Logger) -> None:
    bare_logger.addHandler(logging.NullHandler())
    assert install_default_handler("debug") is False
    assert len(bare_logger.handlers) == 1 and isinstance(bare_logger.handlers[0], logging.NullHandler)


async def test_level_the_application_set_is_kept(bare_logger: logging.Logger) -> None:
    bare_logger.setLevel(logging.WARNING)
    install_default_handler("debug")
    assert bare_logger.level == logging.WARNING


async def test_silent_once_the_application_configures_logging_later(bare_logger: logging.Logger) -> None:
    install_default_handler("debug")
    stream = capture(ours(bare_logger))
    theirs = io.StringIO()
    late = logging.StreamHandler(theirs)
    bare_logger.addHandler(late)
    await context_logger().info("late")
    assert stream.getvalue() == "", "no duplicate line once another handler receives the record"
    assert "late" in theirs.getvalue()


async def test_dict_config_naming_the_logger_takes_over(real_logger: logging.Logger) -> None:
    for handler in list(real_logger.handlers):
        real_logger.removeHandler(handler)
    real_logger.addHandler(_logging._DefaultHandler(io.StringIO()))  # pyright: ignore[reportPrivateUsage]  # as if installed
    theirs = io.StringIO()
    logging.config.dictConfig(
        {
            "version": 1,
            "disable_existing_loggers": False,
            "formatters": {"plain": {"format": "%(levelname)s %(message)s %(mcp)s"}},
            "handlers": {"mine": {"class": "logging.StreamHandler", "formatter": "plain", "stream": theirs}},
            "loggers": {"fastapi_mcp_ctx": {"handlers": ["mine"], "level": "INFO", "propagate": False}},
        }
    )
    [handler] = real_logger.handlers
    assert handler.formatter is not None and handler.formatter._fmt == "%(levelname)s %(message)s %(mcp)s"  # pyright: ignore[reportPrivateUsage]
    await context_logger().info("stored", note_id=7)
    line = theirs.getvalue()
    assert line.startswith("INFO stored {") and "'request_id': 5" in line and "'data': {'note_id': 7}" in line


async def test_first_request_installs_it(bare_logger: logging.Logger) -> None:
    async with open_client(build_app(log_level="info")) as client:
        assert bare_logger.handlers == []
        await Wire(client).call_tool("modern", "store_note", {"text": "x"})
    assert len(bare_logger.handlers) == 1 and bare_logger.level == logging.INFO


# -- notifications/message carries a logger -----------------------------------------------------------


async def test_notification_logger_is_the_tool_name(wire: Wire, era: str) -> None:
    meta = {META_LOG_LEVEL: "debug"} if era == "modern" else None
    response = await wire.call_tool(era, "store_note", {"text": "x"}, meta=meta)
    notes = [m["params"] for m in messages_of(response) if m.get("method") == "notifications/message"]
    assert [n["level"] for n in notes] == ["info", "warning"]
    assert all(n["logger"] == "store_note" for n in notes)
    assert notes[0]["data"] == {"note_id": 7, "text": "x", "message": "stored"}
    assert notes[1]["data"]["password"] == "[REDACTED]"


async def test_notification_logger_defaults_to_the_server_name() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    log = context_logger(client_opted_in=True, send=send, logger_name="test-server")
    await log.info("hello")
    assert sent[0]["params"]["logger"] == "test-server"
