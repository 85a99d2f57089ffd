"""How ``ctx.state`` values are stored: JSON text, on every backend (memory included).

A write encodes the value to compact ASCII JSON (:func:`encode_value`); a read decodes it again
(:func:`decode_value`), or validates it into the model the caller names (:func:`load_value`), so
a read returns the JSON form (a ``datetime`` comes back as its ISO string, a tuple as a list, a
pydantic model as a dict) and never an object shared with the caller. A value that is not JSON
(``bytes``, a cycle, a function, ``NaN``/``inf``) fails to encode, before anything is written;
``state.py`` names its key in the ``SerializationError`` it raises, and holds the keys, tenants
and pages these values live under. It imports nothing of the package.
"""

from __future__ import annotations

import json
from typing import Any, Final, cast

from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticSerializationError, to_jsonable_python

__all__ = ["decode_value", "encode_value", "load_value"]


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        raise TypeError("bytes-like values are not JSON-serializable")
    try:
        return to_jsonable_python(obj)
    except PydanticSerializationError as exc:
        raise TypeError(str(exc)) from exc


_ENCODER = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":"), default=_json_default)
encode_value: Final = _ENCODER.encode
"""The JSON text stored for a value; ``TypeError``, ``ValueError``, ``RecursionError`` or
``OverflowError`` for a value that is not JSON."""
decode_value: Final = json.loads
"""The JSON value of stored text (no model)."""
_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _validator(model: Any) -> TypeAdapter[Any]:
    if isinstance(model, TypeAdapter):
        return cast(TypeAdapter[Any], model)
    adapter = _ADAPTERS.get(model)
    if adapter is None:
        adapter = _ADAPTERS[model] = TypeAdapter(model)
    return adapter


def load_value(text: str, model: Any) -> Any:
    """The value of stored ``text``: its JSON form, or validated into ``model`` (a pydantic model
    class, a type or a ``TypeAdapter``; None: the JSON form).

    Raises:
        pydantic.ValidationError: the stored value does not fit ``model``.
    """
    if model is None:
        return decode_value(text)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return model.model_validate_json(text)
    return _validator(model).validate_json(text)
