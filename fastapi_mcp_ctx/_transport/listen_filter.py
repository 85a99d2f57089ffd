"""The filter of a 2026-07-28 ``subscriptions/listen`` request: what a listen stream may carry.

Spec 2026-07-28 ``basic/patterns/subscriptions``; known fault B52. The rules kept here:

- the filter (``params.notifications``) is required and typed (else ``-32602``); the server
  honours the intersection of what was asked and what the application declared
  (:class:`Served`), and acknowledges exactly that subset (:meth:`ListenFilter.acknowledged`);
- delivery is an allow-list (:meth:`ListenFilter.admits`): the three list-changed
  notifications when asked for, ``notifications/resources/updated`` for the URIs asked for and
  ``notifications/tasks`` for the task ids asked for; never progress, logs or anything else.

The stream that applies it, its bounds and its answers: ``listen.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .._wire.uris import normalize_uri
from ..errors import InvalidParamsError

__all__ = [
    "LIST_CHANGED_METHODS",
    "MAX_RESOURCE_URIS",
    "TASK_METHOD",
    "UPDATED_METHOD",
    "ChangeKind",
    "ListenFilter",
    "Served",
    "parse_filter",
]

ChangeKind = Literal["tools", "prompts", "resources"]

UPDATED_METHOD: Final = "notifications/resources/updated"
TASK_METHOD: Final = "notifications/tasks"
"""A task's status (tasks extension, SEP-2663 §Task Status Notifications), to the streams naming it."""
LIST_CHANGED_METHODS: Final[dict[ChangeKind, str]] = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}
_KIND_OF_METHOD: Final[dict[str, ChangeKind]] = {method: kind for kind, method in LIST_CHANGED_METHODS.items()}
_FILTER_FIELDS: Final[dict[ChangeKind, str]] = {
    "tools": "toolsListChanged",
    "prompts": "promptsListChanged",
    "resources": "resourcesListChanged",
}
MAX_RESOURCE_URIS: Final = 1000
"""URIs one listen request may name in ``resourceSubscriptions`` (more: ``-32602``)."""


@dataclass(frozen=True, slots=True)
class Served:
    """What the application declared it publishes: ``McpRouter(list_changed=..., resources_subscribe=...)``."""

    list_changed: frozenset[ChangeKind] = frozenset()
    resources_subscribe: bool = False

    @property
    def any(self) -> bool:
        """True when at least one notification type is served (listen is offered at all)."""
        return bool(self.list_changed) or self.resources_subscribe


@dataclass(frozen=True, slots=True)
class ListenFilter:
    """The honoured subset of one listen request's filter."""

    list_changed: frozenset[ChangeKind] = frozenset()
    resource_uris: tuple[str, ...] = ()
    _uri_set: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    task_ids: tuple[str, ...] = ()
    """``notifications.taskIds`` (tasks extension): ``notifications/tasks`` of these tasks."""

    @property
    def empty(self) -> bool:
        """Nothing honoured: the stream is acknowledged and answered at once (B52)."""
        return not self.list_changed and not self.resource_uris and not self.task_ids

    def acknowledged(self) -> dict[str, Any]:
        """The ``notifications`` member of the acknowledgement (wire field names)."""
        ack: dict[str, Any] = {_FILTER_FIELDS[kind]: True for kind in _FILTER_FIELDS if kind in self.list_changed}
        if self.resource_uris:
            ack["resourceSubscriptions"] = list(self.resource_uris)
        if self.task_ids:
            ack["taskIds"] = list(self.task_ids)
        return ack

    def admits(self, message: Mapping[str, Any]) -> bool:
        """Allow-list check of one notification against this filter."""
        method = message.get("method")
        kind = _KIND_OF_METHOD.get(method) if isinstance(method, str) else None
        if kind is not None:
            return kind in self.list_changed
        if method == TASK_METHOD:
            params = message.get("params")
            task_id: object = params.get("taskId") if isinstance(params, Mapping) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            return isinstance(task_id, str) and task_id in self.task_ids
        if method == UPDATED_METHOD:
            params = message.get("params")
            uri: object = params.get("uri") if isinstance(params, Mapping) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            return isinstance(uri, str) and normalize_uri(uri) in self._uri_set
        return False


def parse_filter(params: Mapping[str, Any], served: Served, *, tasks: bool = False) -> ListenFilter:
    """The honoured filter of a ``subscriptions/listen`` request (``tasks``: task tools are
    served, so ``notifications.taskIds`` is honoured).

    Raises:
        InvalidParamsError: ``notifications`` missing or not an object, a ``*ListChanged``
            field that is not a boolean, ``resourceSubscriptions`` not a list of non-empty
            strings or longer than :data:`MAX_RESOURCE_URIS` (``-32602``, HTTP 400).
    """
    raw = params.get("notifications")
    if not isinstance(raw, dict):
        raise InvalidParamsError("subscriptions/listen requires a 'notifications' filter object")
    notifications: dict[str, Any] = raw  # pyright: ignore[reportUnknownVariableType]
    kinds: set[ChangeKind] = set()
    for kind, name in _FILTER_FIELDS.items():
        value = notifications.get(name)
        if value is None:
            continue
        if not isinstance(value, bool):
            raise InvalidParamsError(f"notifications.{name} must be a boolean")
        if value and kind in served.list_changed:
            kinds.add(kind)
    requested = _strings(notifications, "resourceSubscriptions", "resource URIs")
    uris = tuple(dict.fromkeys(requested)) if served.resources_subscribe else ()
    named = _strings(notifications, "taskIds", "task ids")
    task_ids = tuple(dict.fromkeys(named)) if tasks else ()
    return ListenFilter(frozenset(kinds), uris, frozenset(normalize_uri(u) for u in uris), task_ids)


def _strings(notifications: Mapping[str, Any], name: str, what: str) -> list[str]:
    """``notifications[name]``: a list of at most :data:`MAX_RESOURCE_URIS` non-empty strings
    ([] when absent); ``InvalidParamsError`` otherwise."""
    value = notifications.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):  # pyright: ignore[reportUnknownVariableType]
        raise InvalidParamsError(f"notifications.{name} must be a list of {what} (strings)")
    listed: list[str] = value  # pyright: ignore[reportUnknownVariableType]
    if len(listed) > MAX_RESOURCE_URIS:
        raise InvalidParamsError(f"notifications.{name} lists more than {MAX_RESOURCE_URIS} {what}")
    return listed
