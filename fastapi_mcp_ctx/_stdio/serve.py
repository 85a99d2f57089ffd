"""Serve an app's ``McpRouter`` over stdio, for desktop MCP clients that launch a process.

``run_stdio("module:app")`` (the ``fastapi-mcp-ctx stdio`` command; also
``python -m fastapi_mcp_ctx._stdio module:app``) serves one session on the process's stdin
and stdout until stdin closes (spec 2025-11-25 ``basic/transports`` §stdio and
``basic/lifecycle`` §Shutdown):

1. The real stdin and stdout are kept for the transport *before the app is imported*: fd 0
   and fd 1 are duplicated for it, then fd 1 points at stderr and fd 0 at the null device,
   and ``sys.stdout`` is ``sys.stderr``. A ``print()``, a logging handler on stdout or a
   child process cannot write into the JSON-RPC stream, nor read from it.
2. ``module:attr`` is imported (the current directory is on ``sys.path``); it names a
   FastAPI/Starlette app whose routes hold an ``McpRouter`` (included routers and mounted
   apps are searched; ``path`` chooses when there are several) or an ``McpRouter``.
3. The synthetic requests carry the headers of ``MCP_STDIO_HEADER_<NAME>`` variables and
   ``--header NAME=VALUE`` options (:mod:`.headers`: read before the app is imported, values
   never logged); each request runs the router's ``authenticate=`` on them as over HTTP.
4. The app's lifespan runs around the session, as under uvicorn (its state reaches
   ``request.state``); ``McpRouter.aclose()`` runs last.
5. stdin EOF, SIGTERM, SIGINT or SIGHUP end the session: running requests get
   :data:`DRAIN_SECONDS` to finish, then are cancelled; teardown runs. If the process has not
   finished :data:`EXIT_DEADLINE_SECONDS` after the end began (a handler that ignores
   cancellation, e.g. a blocking sync tool), it exits anyway.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

import anyio
from fastapi import FastAPI

from .._discovery import McpTarget, find_targets
from ..errors import AppLoadError, ConfigurationError
from ..router import McpRouter
from .headers import stdio_headers
from .session import StdioSession

__all__ = ["DRAIN_SECONDS", "EXIT_DEADLINE_SECONDS", "load_app", "main", "run_stdio"]

logger = logging.getLogger("fastapi_mcp_ctx.stdio")

DRAIN_SECONDS: Final = 0.5
"""At end of input, how long running requests may still finish before they are cancelled."""
EXIT_DEADLINE_SECONDS: Final = 1.8
"""The process exits at the latest this long after the end of input (or a stop signal)."""


def reserve_stdio() -> tuple[int, int]:
    """Keep the real stdin/stdout for the transport; returns their duplicates ``(read_fd, write_fd)``.

    Afterwards fd 1 and ``sys.stdout`` write to stderr, and fd 0 and ``sys.stdin`` read the
    null device. The duplicates are not inherited by child processes (PEP 446).
    """
    sys.stdout.flush()
    read_fd, write_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.stdin = open(os.devnull, encoding="utf-8")  # lives as long as the process
    return read_fd, write_fd


def load_app(spec: str) -> Any:
    """Import ``module:attr`` (``attr`` may be dotted) from the current directory or ``sys.path``.

    Raises:
        AppLoadError: a malformed spec, a module that fails to import, a missing attribute.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise AppLoadError(f"APP must be 'module:attribute' (for example 'myproject.main:app'), got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise AppLoadError(
                f"Cannot import module {module_name!r}: run from the project directory or set PYTHONPATH"
            ) from exc
        raise
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AppLoadError(f"Module {module_name!r} has no attribute {attr!r}") from None
    return obj


def _choose(app: Any, spec: str, path: str | None) -> McpTarget:
    try:
        targets = find_targets(app)
    except ConfigurationError as exc:  # an McpRouter mounted, not included
        raise AppLoadError(f"{spec}: {exc}") from None
    paths = ", ".join(sorted(t.path for t in targets))
    if path is not None:
        chosen = [t for t in targets if t.path == path]
        if not chosen:
            raise AppLoadError(f"{spec} has no McpRouter at path {path!r} (found: {paths or 'none'})")
        return chosen[0]
    if not targets:
        raise AppLoadError(f"{spec} has no McpRouter: add one with app.include_router(McpRouter())")
    if len(targets) > 1:
        raise AppLoadError(f"{spec} has several McpRouters ({paths}): choose one with --path")
    return targets[0]


def resolve_app(obj: Any, spec: str, path: str | None) -> tuple[Any, McpTarget]:
    """``(app, target)`` for a loaded object: an app holding an McpRouter, or an McpRouter.

    Raises:
        AppLoadError: the object is neither, or the router is missing or ambiguous.
    """
    if isinstance(obj, McpRouter):
        app = FastAPI()
        app.include_router(obj)
        return app, _choose(app, spec, path)
    if not callable(getattr(getattr(obj, "router", None), "lifespan_context", None)):
        raise AppLoadError(f"{spec} is a {type(obj).__name__}, not a FastAPI/Starlette app or an McpRouter")
    return obj, _choose(obj, spec, path)


async def _stop_on_signals(session: StdioSession) -> None:
    names = ("SIGTERM", "SIGINT", "SIGHUP")
    signals = [getattr(signal, name) for name in names if hasattr(signal, name)]
    try:
        with anyio.open_signal_receiver(*signals) as received:
            async for signum in received:
                logger.info("stdio: signal %s, shutting down", signum)
                session.stop()
    except NotImplementedError:  # Windows: no signal receiver; Ctrl+C ends the process as usual
        return


async def serve_app(
    app: Any,
    target: McpTarget,
    read_fd: int,
    write_fd: int,
    on_shutdown: Callable[[], None],
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Run the app's lifespan around one stdio session of ``target``; ``aclose`` the router last."""
    try:
        async with app.router.lifespan_context(app) as state:
            app_state: dict[str, Any] | None = state if isinstance(state, dict) else None  # pyright: ignore[reportUnknownVariableType]
            session = StdioSession(
                target.router,
                app=target.app,
                path=target.path,
                app_state=app_state,
                read_fd=read_fd,
                write_fd=write_fd,
                drain_seconds=DRAIN_SECONDS,
                on_shutdown=on_shutdown,
                headers=headers,
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(_stop_on_signals, session)
                await session.serve()
                tg.cancel_scope.cancel()
    finally:
        await target.router.aclose()


class _Watchdog:
    """Ends the process ``seconds`` after :meth:`start` unless :meth:`cancel` came first."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(self._seconds, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _fire(self) -> None:
        logger.error("stdio: shutdown did not finish within %.1f s (a handler ignores cancellation?): exiting", self._seconds)
        sys.stderr.flush()
        os._exit(0)


def _log_to_stderr() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def run_stdio(app_spec: str, path: str | None = None, headers: Sequence[str] = ()) -> None:
    """Serve the ``McpRouter`` of ``app_spec`` (``module:attr``) on this process's stdin/stdout.

    Returns when stdin closes or on SIGTERM/SIGINT/SIGHUP, after teardown (see the module
    docstring for the order). Spec 2025-11-25 ``basic/transports`` §stdio.

    Args:
        app_spec: ``module:attr`` naming a FastAPI/Starlette app or an ``McpRouter``.
        path: the full HTTP path of the router to serve when the app has several.
        headers: ``NAME=VALUE`` headers of every synthetic request, after (and over) the
            environment's ``MCP_STDIO_HEADER_<NAME>`` variables (:func:`.headers.stdio_headers`).
    Raises:
        AppLoadError: the spec names nothing servable, or a header is malformed (the message
            says what to fix, and names no header value).
        Exception: whatever the app's import or lifespan startup raises.
    """
    request_headers = stdio_headers(headers, os.environ)  # before anything else: a bad header changes nothing
    read_fd, write_fd = reserve_stdio()
    app, target = resolve_app(load_app(app_spec), app_spec, path)
    _log_to_stderr()  # after the import: an app that configures logging keeps its setup
    watchdog = _Watchdog(EXIT_DEADLINE_SECONDS)
    try:
        anyio.run(serve_app, app, target, read_fd, write_fd, watchdog.start, request_headers, backend="asyncio")
    finally:
        watchdog.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fastapi_mcp_ctx._stdio APP [--path PATH] [--header NAME=VALUE]...``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m fastapi_mcp_ctx._stdio", description="Serve an app's McpRouter over stdio.")
    parser.add_argument("app", metavar="APP", help="module:attribute of a FastAPI app (or an McpRouter)")
    parser.add_argument("--path", default=None, help="the router's full path, when the app has several McpRouters")
    parser.add_argument(
        "--header", action="append", default=[], metavar="NAME=VALUE", help="a header of every request (repeatable)"
    )
    args = parser.parse_args(argv)
    try:
        run_stdio(args.app, args.path, args.header)
    except AppLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
