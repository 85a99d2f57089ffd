"""What the registration decorators accept: the bare form (``@mcp_router.tool``), the called
form (``@mcp_router.tool()`` / ``@mcp_router.tool("name")``), and nothing that would register
something else than the function or nothing at all.

``McpRouter.tool`` / ``prompt`` (``_handlers.tool_routes``, ``_handlers.feature_routes``) take
their first argument as a name or, when it is a function, as the function itself (FastMCP's
and the official SDK's spelling). ``resource`` needs its URI and ``completion`` its argument:
used bare they raise :class:`TypeError` at decoration, naming the fix, instead of registering
a decorator in place of the function. :func:`check_handler` refuses, at registration, what
could never serve a call (a class, a non-callable, a ``staticmethod`` / ``classmethod``
object, a generator function).
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["check_handler", "check_name", "is_bare"]


def is_bare(first: object) -> bool:
    """True when a decorator's first argument is the decorated object itself (``@router.tool``
    without parentheses): something callable, or a ``staticmethod`` / ``classmethod`` object
    (refused by :func:`check_handler`); a string, None or any other value is a name."""
    return callable(first) or isinstance(first, (staticmethod, classmethod))


def check_name(value: object, what: str, parameter: str = "name") -> None:
    """Raise when a decorator's ``name`` (or ``uri``) is neither a string nor None.

    Raises:
        TypeError: naming the decorator and the value's type.
    """
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{what}: {parameter} must be a string, got {type(value).__name__} {value!r:.80}")


def check_handler(func: Any, what: str) -> None:
    """Raise unless ``func`` can be registered by ``what`` (``"@mcp_router.tool"``).

    Raises:
        TypeError: a class, a ``staticmethod`` / ``classmethod`` object (decorators in the wrong
            order), a non-callable or a callable object that is no function or method (its
            annotations cannot be read), a generator function (a handler returns its result);
            the message names the fix.
    """
    if isinstance(func, (staticmethod, classmethod)):
        kind = type(func).__name__  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
        raise TypeError(
            f"{what} got a {kind} object: put {what} below @{kind} (nearest the def) for a staticmethod, or register "
            f"a classmethod once the class exists: mcp_router.add_tool(MyClass.method) (or .resource(...)(MyClass.method))"
        )
    if inspect.isclass(func):
        raise TypeError(
            f"{what} decorates a function, not the class {func.__name__}: decorate a function, or register a method "
            f"of an instance (mcp_router.add_tool(instance.method))"
        )
    if not callable(func):
        raise TypeError(f"{what} decorates a function, got {type(func).__name__} {func!r:.80}")
    if not inspect.isroutine(func):
        raise TypeError(
            f"{what} decorates a function or a method, got a {type(func).__name__} object: register one of its "
            f"methods (mcp_router.add_tool(obj.__call__, name=\"...\")) or a function calling it"
        )
    if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
        raise TypeError(
            f"{what}: {getattr(func, '__name__', func)!r} is a generator function; a handler returns its result: "
            "return a list (and send progress with ctx.report_progress while it works)"
        )
