"""The ``fastapi-mcp-ctx`` command line (click): ``serve``, ``migrate``, ``keygen``, ``check``, ``stdio``.

    fastapi-mcp-ctx serve examples.quickstart:app        # uvicorn on 127.0.0.1:8000
    fastapi-mcp-ctx migrate                              # the SQL schema at MCP_STORAGE_URL
    fastapi-mcp-ctx keygen                               # a new MCP_REQUEST_STATE_KEY
    fastapi-mcp-ctx check http://127.0.0.1:8000/mcp      # probe a running server, both eras
    fastapi-mcp-ctx stdio examples.quickstart:app        # serve the app's McpRouter on stdin/stdout

Also ``python -m fastapi_mcp_ctx``. Needs the ``cli`` extra (click, httpx); ``serve`` needs
``server`` (uvicorn), ``migrate`` needs ``sql``: a missing extra is reported with the
``pip install`` to run. This module sits beside the top of the package and uses the public
surface only (plus the probe and the migrations API).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import secrets
import sys
from collections.abc import Sequence
from typing import Any

import click
from starlette.routing import NoMatchFound

from . import __version__
from ._auth.host_rules import is_loopback_host
from ._discovery import find_targets
from ._extras import missing_extra
from ._stdio.headers import split_header
from ._stdio.serve import run_stdio
from ._tasks.memory_store import MemoryTaskStore
from ._transport.bus import MemoryBus
from ._transport.memory_sessions import MemorySessionStore
from .backends import backend_from_url
from .backends._per_process import SERVE_WORKERS_ENV, explicit_memory_state, per_process_state_message
from .backends.memory import MemoryBackend
from .errors import AppLoadError, ConfigurationError, McpError, StateUnavailableError

__all__ = ["cli"]

_LOG_LEVELS = ["critical", "error", "warning", "info", "debug", "trace"]
_SQL_SCHEMES = ("sqlite+aiosqlite", "postgresql+asyncpg")


class _Group(click.Group):
    """A command's ``ConfigurationError`` (a missing extra…) becomes a one-line error, exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ConfigurationError as exc:
            raise click.ClickException(exc.message) from exc


def _need(module: str, command: str) -> Any:
    """Import an optional module, or raise the ``pip install`` advice for its extra."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, f"`fastapi-mcp-ctx {command}`") from exc


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="fastapi-mcp-ctx")
def cli() -> None:
    """Serve, migrate and probe MCP servers built with fastapi-mcp-ctx."""


# -- serve --------------------------------------------------------------------------------


def _put_first_on_path(app_dir: str) -> None:
    """Make APP importable from ``app_dir`` (the console script's ``sys.path`` lacks the cwd)."""
    folder = os.path.abspath(app_dir)
    if folder not in sys.path:
        sys.path.insert(0, folder)


def _load_app(spec: str, app_dir: str) -> Any:
    """Import ``module:attr`` (``app_dir`` first on ``sys.path``, as uvicorn does)."""
    importer = _need("uvicorn.importer", "serve")
    _put_first_on_path(app_dir)
    try:
        return importer.import_from_string(spec)
    except importer.ImportFromStringError as exc:
        raise click.BadParameter(str(exc), param_hint="APP") from exc
    except ModuleNotFoundError as exc:  # a module the app itself imports
        raise click.ClickException(f"importing {spec} failed: {exc}") from exc
    except McpError as exc:  # e.g. McpRouter(...) with a storage URL whose extra is missing
        raise click.ClickException(f"{spec}: {exc.message}") from exc


def _mcp_path(app: Any) -> str:
    """The path of the app's MCP endpoint (an ``McpRouter`` names its route ``mcp``), or ``/``."""
    url_path_for = getattr(app, "url_path_for", None)
    if url_path_for is None:
        return "/"
    try:
        return str(url_path_for("mcp"))
    except NoMatchFound:
        return "/"


def _per_process_parts(app: Any) -> list[str]:
    """What of ``app``'s routers lives in one process only (so ``--workers N`` would split it)."""
    problems: list[str] = []
    for target in find_targets(app):
        router = target.router
        if router.settings.session_mode != "stateless" and isinstance(router.sessions, MemorySessionStore):
            problems.append(
                f"{target.path}: 2025 sessions are kept in this process's memory (MCP_SESSION_MODE="
                f"{router.settings.session_mode}), so a request reaching another worker gets 404 'Session not found' "
                "(MCP_SESSION_STORE_URL=memory://)"
            )
        elif router.settings.session_mode != "stateless" and isinstance(router.bus, MemoryBus):
            problems.append(f"{target.path}: the replica bus is this process's (McpRouter(bus=...) in memory)")
        if explicit_memory_state(router.settings, router.state_backend):  # left at its default: refused at first use instead
            problems.append(f"{target.path}: ctx.state is in this process's memory (MCP_STORAGE_URL=memory:// set explicitly)")
        if router.registry.any_task() and isinstance(router.tasks.store, MemoryTaskStore):
            problems.append(
                f"{target.path}: task records are kept in this process's memory, so a task created on one worker is "
                "unknown to the others (tasks/get -32602): set MCP_SESSION_STORE_URL=redis://host:port/db"
            )
        if not router.request_state.shared:
            problems.append(
                f"{target.path}: 2026 requestState is sealed with a random key of each process (MCP_REQUEST_STATE_KEY "
                "unset), so a retry reaching another worker is refused: export MCP_REQUEST_STATE_KEY=$(fastapi-mcp-ctx keygen)"
            )
    return problems


def _base_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@cli.command()
@click.argument("app")
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address (0.0.0.0: every interface).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1), help="Worker processes.")
@click.option("--reload", is_flag=True, help="Restart on code changes (development).")
@click.option(
    "--proxy-headers/--no-proxy-headers",
    default=False,
    show_default=True,
    help="Trust X-Forwarded-For/-Proto (only behind a proxy you run).",
)
@click.option("--forwarded-allow-ips", default=None, help="Proxies trusted with --proxy-headers (uvicorn's default: 127.0.0.1).")
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(_LOG_LEVELS),
    help="uvicorn's level; given explicitly, also MCP_LOG_LEVEL (the library's floor) unless that is set.",
)
@click.option(
    "--graceful-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds open streams get at shutdown before they are closed.",
)
@click.option("--app-dir", default=".", show_default=True, help="Folder put first on sys.path to import APP.")
def serve(
    app: str,
    host: str,
    port: int,
    workers: int,
    reload: bool,
    proxy_headers: bool,
    forwarded_allow_ips: str | None,
    log_level: str,
    graceful_timeout: float,
    app_dir: str,
) -> None:
    """Serve APP with uvicorn (APP is module:attr, e.g. examples.quickstart:app)."""
    uvicorn = _need("uvicorn", "serve")
    explicit = click.get_current_context().get_parameter_source("log_level") is click.core.ParameterSource.COMMANDLINE
    if explicit and "MCP_LOG_LEVEL" not in os.environ:  # before the app (and its settings) load
        os.environ["MCP_LOG_LEVEL"] = "debug" if log_level == "trace" else log_level
    target = _load_app(app, app_dir)  # fails here, with a clear message, not in a worker
    if not callable(target) or not find_targets(target):
        raise click.BadParameter(
            f"{app} is {type(target).__name__!r}, not an ASGI application holding an McpRouter "
            "(e.g. app = FastAPI(); app.include_router(McpRouter()))",
            param_hint="APP",
        )
    if workers > 1 and (problems := _per_process_parts(target)):
        raise click.UsageError(
            f"--workers {workers} would split state that lives in one process:\n  - "
            + "\n  - ".join(problems)
            + "\nServe with --workers 1, or share them: MCP_SESSION_STORE_URL=redis://… (sessions, their streams and the "
            "replica bus; or MCP_SESSION_MODE=stateless: 2026-07-28 clients and stateless 2025 requests need no session) "
            "and MCP_STORAGE_URL=redis://…, postgresql+asyncpg://… or sqlite+aiosqlite:///… (after `fastapi-mcp-ctx migrate`)."
        )
    if workers > 1 and any(isinstance(t.router.state_backend, MemoryBackend) for t in find_targets(target)):
        click.echo(f"notice: a handler's first use of ctx.state will fail: {per_process_state_message(workers)}", err=True)
    url = _base_url(host, port) + _mcp_path(target)
    click.echo(f"fastapi-mcp-ctx {__version__}: serving {app}, MCP endpoint {url}", err=True)
    if not is_loopback_host(host) and any(t.router.endpoint.gate is not None and t.router.endpoint.gate.verifier is None for t in find_targets(target)):
        click.echo(
            f"warning: --host {host} but no authentication is configured: only local requests are served, others get 403; "
            "set MCP_AUTH_MODE=jwt (or oauth), McpRouter(authenticate=...), or MCP_AUTH_MODE=none explicitly (docs/auth.md)",
            err=True,
        )
    before = os.environ.get(SERVE_WORKERS_ENV)
    if workers > 1:  # the workers import the app afresh: this tells them they are N (backends/_per_process.py)
        os.environ[SERVE_WORKERS_ENV] = str(workers)
    try:
        uvicorn.run(
            app if workers > 1 or reload else target,
            host=host,
            port=port,
            workers=workers,
            reload=reload,
            proxy_headers=proxy_headers,
            forwarded_allow_ips=forwarded_allow_ips,
            log_level=log_level,
            timeout_graceful_shutdown=graceful_timeout,
        )
    finally:  # this process's environment as it was (serve called in-process, e.g. by a test)
        if before is None:
            os.environ.pop(SERVE_WORKERS_ENV, None)
        else:
            os.environ[SERVE_WORKERS_ENV] = before


# -- migrate ------------------------------------------------------------------------------


def _sql_url(url: str | None) -> str:
    if not url:
        raise click.UsageError("no database URL: set MCP_STORAGE_URL or pass --url")
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in _SQL_SCHEMES:
        raise click.UsageError(
            f"{scheme or url!r} has no SQL schema to migrate: migrate takes a sqlite+aiosqlite:///… "
            "or postgresql+asyncpg://… URL (memory:// and redis:// need no migration)"
        )
    return url


@cli.command()
@click.option("--url", envvar="MCP_STORAGE_URL", help="The database (default: $MCP_STORAGE_URL).")
@click.option("--revision", default="head", show_default=True, help="Target revision.")
@click.option("--sql", "offline", is_flag=True, help="Print the SQL instead of running it (no connection).")
@click.option("--check", "check_only", is_flag=True, help="Change nothing: exit 1 unless the schema is current.")
def migrate(url: str | None, revision: str, offline: bool, check_only: bool) -> None:
    """Create or upgrade the ctx.state SQL schema.

    Runs the Alembic migrations shipped in the package, from any folder; the history is kept
    in the table mcp_alembic_version.
    """
    url = _sql_url(url)
    sa = _need("sqlalchemy", "migrate")
    alembic_util = _need("alembic.util", "migrate")
    migrations = _need("fastapi_mcp_ctx.backends.sql_migrations", "migrate")
    try:
        shown = sa.make_url(url).render_as_string(hide_password=True)
    except (sa.exc.ArgumentError, ValueError) as exc:  # e.g. a port that is not a number
        raise click.BadParameter(f"not a database URL ({exc})", param_hint="--url / MCP_STORAGE_URL") from None
    if offline:
        try:
            migrations.upgrade_sql(url, sys.stdout, revision)
        except alembic_util.CommandError as exc:
            raise click.ClickException(f"cannot write the SQL for {shown}: {exc}") from exc
        return
    try:
        if check_only:
            database = sa.make_url(url).database
            if url.lower().startswith("sqlite") and database and database != ":memory:" and not os.path.exists(database):
                raise click.ClickException(f"{shown}: no database file at {database} (`fastapi-mcp-ctx migrate` creates it)")
            asyncio.run(_check_schema(url))
            click.echo(f"{shown}: the ctx.state schema is current")
            return
        step = asyncio.run(migrations.upgrade(url, revision))
    except StateUnavailableError as exc:  # the check's connection failed: the operator acts, no "retry later"
        cause = exc.__cause__ or exc
        raise click.ClickException(
            f"cannot reach {shown}: {type(cause).__name__}: {cause}; check that the database is running and that "
            "--url / MCP_STORAGE_URL (host, port, database, user, password) is right"
        ) from exc
    except McpError as exc:
        raise click.ClickException(f"{shown}: {exc.message}") from exc
    except (sa.exc.SQLAlchemyError, OSError, alembic_util.CommandError) as exc:
        raise click.ClickException(f"cannot migrate {shown}: {exc}") from exc
    if step.changed:
        click.echo(f"{shown}: ctx.state schema upgraded from {step.before or '(none)'} to {step.after}")
    elif step.after is None:
        click.echo(f"{shown}: no ctx.state schema, nothing to do (revision {revision!r} is the empty schema)")
    else:
        click.echo(f"{shown}: ctx.state schema already at {step.after}")


async def _check_schema(url: str) -> None:
    # The backend also logs a failed check for server operators; here the command's own message says it.
    logging.getLogger("fastapi_mcp_ctx").addHandler(logging.NullHandler())
    backend = backend_from_url(url)
    try:
        await backend.check()
    finally:
        await backend.aclose()


# -- keygen -------------------------------------------------------------------------------


@cli.command()
def keygen() -> None:
    """Print a new MCP_REQUEST_STATE_KEY.

    32 random bytes, urlsafe base64. Give every replica the same key:

        export MCP_REQUEST_STATE_KEY=$(fastapi-mcp-ctx keygen)
    """
    click.echo(secrets.token_urlsafe(32))


# -- check --------------------------------------------------------------------------------


def _headers(values: Sequence[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for value in values:
        try:
            name, rest = split_header(value, "-H")
        except ValueError as exc:  # the message never echoes the value (a credential)
            raise click.BadParameter(str(exc), param_hint="-H/--header") from None
        headers[name] = rest
    return headers


@cli.command()
@click.argument("url")
@click.option(
    "-H",
    "--header",
    "header_values",
    multiple=True,
    metavar="HEADER",
    help="Extra request header, 'Name: value' or NAME=VALUE (repeatable), e.g. -H 'Authorization: Bearer <token>' or -H X-API-Key=<key>.",
)
@click.option("--timeout", default=10.0, show_default=True, type=click.FloatRange(min=0.1), help="Seconds per exchange.")
def check(url: str, header_values: tuple[str, ...], timeout: float) -> None:
    """Probe a running MCP server at URL, both eras.

    Runs initialize (2025), server/discover (2026-07-28) and tools/list; prints versions,
    capabilities, tool counts, the session id and timings. Exit 0 when both eras answer.
    """
    headers = _headers(header_values)
    httpx = _need("httpx", "check")
    probe = _need("fastapi_mcp_ctx._probe", "check")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise click.BadParameter(f"{url!r} is not a URL ({exc})", param_hint="URL") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise click.BadParameter(f"{url!r}: expected http://host:port/path or https://…", param_hint="URL")
    report = asyncio.run(probe.probe(url, headers=headers, timeout=timeout))
    click.echo(report.render())
    sys.exit(0 if report.ok else 1)


# -- stdio --------------------------------------------------------------------------------


@cli.command()
@click.argument("app")
@click.option("--path", default=None, help="The router's full path, when APP has several McpRouters.")
@click.option("--app-dir", default=".", show_default=True, help="Folder put first on sys.path to import APP.")
@click.option(
    "--header",
    "header_values",
    multiple=True,
    metavar="HEADER",
    help="A header of every request the app's dependencies and authenticate= see, NAME=VALUE or 'Name: value' (repeatable); "
    "also MCP_STDIO_HEADER_<NAME>=VALUE in the environment (- written _).",
)
def stdio(app: str, path: str | None, app_dir: str, header_values: tuple[str, ...]) -> None:
    """Serve APP's McpRouter over stdin/stdout (APP is module:attr).

    Every request runs the app's authenticate= and dependencies as over HTTP, on a request
    carrying the --header / MCP_STDIO_HEADER_<NAME> headers (values are never logged).
    """
    _put_first_on_path(app_dir)
    try:
        run_stdio(app, path, header_values)
    except AppLoadError as exc:
        click.echo(f"Error: {exc}", err=True)
        raise click.exceptions.Exit(2) from exc
