"""One command written and its reply read on a redis-py connection, without redis-py's layers.

:class:`~.autopipe.KeyBatcher`'s round trips go through here. On a connection that redis-py
reads with hiredis (the ``redis`` extra installs it), the packed command goes straight into
the connection's transport and the reply is read from its stream into its hiredis reader: no
``send_packed_command`` / ``read_response`` wrappers, no health check, no per-command
``wait_for`` (the caller holds one deadline over the whole round trip). What comes out is what
redis-py's ``read_response`` returns or raises: an error reply raised as its
``ResponseError`` (``NoScriptError``...), a closed or reset socket as a ``ConnectionError``.

redis-py's names read here are private (``_writer``, ``_parser._stream`` / ``_reader`` /
``_read_size`` / ``_connected``, ``_host_error``): they are imported under a guard, and a
connection without them (the pure-Python parser, or a release that moved them) takes
redis-py's own path. ``tests/test_autopipe.py`` pins every one on the admitted redis-py.
"""

from __future__ import annotations

from typing import Any, cast

try:  # redis-py's hiredis reader, private: a release that moves it gets redis-py's own path
    from redis._parsers.hiredis import NOT_ENOUGH_DATA as _NOT_ENOUGH_DATA
    from redis._parsers.hiredis import _AsyncHiredisParser  # pyright: ignore[reportPrivateUsage]
    from redis._parsers.socket import SERVER_CLOSED_CONNECTION_ERROR
except ImportError:  # pragma: no cover - tests/test_autopipe.py pins the names on the admitted redis-py
    _NOT_ENOUGH_DATA = _AsyncHiredisParser = None  # pyright: ignore[reportConstantRedefinition]
    SERVER_CLOSED_CONNECTION_ERROR = "Connection closed by server."  # pyright: ignore[reportConstantRedefinition]
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

__all__ = ["ask", "reads_with_hiredis", "reply", "send"]


def reads_with_hiredis(conn: Any) -> bool:
    """``conn`` reads with redis-py's hiredis parser (the ``redis`` extra installs hiredis)."""
    return _AsyncHiredisParser is not None and type(conn._parser) is _AsyncHiredisParser


async def ask(conn: Any, packed: bytes) -> Any:
    """Send one packed command (RESP bytes) on the connected ``conn`` and return its reply.

    Raises:
        redis.exceptions.ResponseError: an error reply (``NoScriptError`` for ``NOSCRIPT``).
        redis.exceptions.ConnectionError: the connection was closed, reset or failed the write.
    """
    if reads_with_hiredis(conn):
        _write(conn, packed)
        return await _read(conn)
    await send(conn, packed)
    return await conn.read_response()


async def send(conn: Any, packed: bytes) -> None:
    """Write ``packed`` (RESP bytes, one or more commands) on the connected ``conn``; the replies
    are read with :func:`reply`, one call each.

    Raises:
        redis.exceptions.ConnectionError: the connection was closed, or the write failed.
    """
    if reads_with_hiredis(conn):
        _write(conn, packed)
    else:
        await conn.send_packed_command(packed, check_health=False)


async def reply(conn: Any) -> Any:
    """The next reply on ``conn``: what redis-py's ``read_response`` returns.

    Raises:
        redis.exceptions.ResponseError: an error reply; ConnectionError: as :func:`ask`.
    """
    if not reads_with_hiredis(conn):
        return await conn.read_response()
    return await _read(conn)


def _write(conn: Any, packed: bytes) -> None:
    """``packed`` straight into the transport of a connection redis-py reads with hiredis. No
    ``drain``: the reply read next cannot come before the command has left. A transport Redis
    closed meanwhile, or a failed write, is a ``ConnectionError``, as redis-py's own write makes it."""
    writer = conn._writer
    if writer.transport.is_closing():
        raise RedisConnectionError(SERVER_CLOSED_CONNECTION_ERROR)
    try:
        writer.write(packed)
    except OSError as exc:
        raise RedisConnectionError(f"Error while writing to {conn._host_error()}: {exc.args}") from exc


async def _read(conn: Any) -> Any:
    """One reply of a connection redis-py reads with hiredis, read from its stream into its
    hiredis reader (redis-py's own ``read_response`` while its parser is not connected)."""
    parser: Any = conn._parser  # redis-py's, private: on_connect gave it the stream and the hiredis reader
    if not parser._connected:
        return await conn.read_response()
    reader: Any = parser._reader
    response = reader.gets()
    while response is _NOT_ENOUGH_DATA:
        try:
            data = await parser._stream.read(parser._read_size)
        except OSError as exc:
            raise RedisConnectionError(f"Error while reading from {conn._host_error()} : {exc.args}") from exc
        if not data:
            raise RedisConnectionError(SERVER_CLOSED_CONNECTION_ERROR)
        reader.feed(data)
        response = reader.gets()
    if isinstance(response, RedisError):  # an error reply (NOSCRIPT...), or a ConnectionError (LOADING...)
        raise response
    if type(response) is list and response and isinstance(response[0], RedisConnectionError):
        raise cast("list[Any]", response)[0]
    return cast(object, response)
