"""The game-state codec on its own: payloads to and from objects, in either dialect.

The bytes are the Rust codec's (``gsrelay_core::wire``, through the extension); this
module only turns its JSON form into the dataclasses of :mod:`gsrelay.objects`.
"""

from __future__ import annotations

import json
from typing import Iterable, List, Literal, Union

from . import _native
from .errors import ArgumentError, CodecError
from .objects import OBJECT_TYPES, Object, from_json, to_json

Dialect = Literal["draft01", "gse"]
"""``"draft01"``: the draft as written (the default); ``"gse"``: the reference
implementation's byte layout (``docs/wire-format.md``)."""

BytesLike = Union[bytes, bytearray, memoryview]

MAX_PAYLOAD: int = _native.MAX_PAYLOAD
"""Most bytes of one published payload."""


def _as_bytes(payload: object, what: str = "payload") -> bytes:
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, (bytearray, memoryview)):
        return bytes(payload)
    raise TypeError(f"{what} must be bytes, bytearray or memoryview, not {type(payload).__name__}")


def _dialect(dialect: object) -> str:
    if dialect not in ("draft01", "gse"):
        raise ArgumentError(f'unknown dialect {dialect!r}: expected "draft01" or "gse"', "dialect")
    return str(dialect)


def objects_json(objects: Union[Object, Iterable[Object]]) -> str:
    """The JSON form of one object or several, as the extension reads it."""
    if isinstance(objects, OBJECT_TYPES):
        items: List[Object] = [objects]  # type: ignore[list-item]
    else:
        try:
            items = list(objects)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(
                f"expected a game-state object or an iterable of them, not {type(objects).__name__}"
            ) from None
    return json.dumps([to_json(o) for o in items], allow_nan=False)


def encode(objects: Union[Object, Iterable[Object]], dialect: Dialect = "draft01") -> bytes:
    """The payload of one object or several (any length; a publish takes at most
    :data:`MAX_PAYLOAD` bytes)."""
    return _native.encode(objects_json(objects), _dialect(dialect))


def decode(payload: BytesLike, dialect: Dialect = "draft01") -> List[Object]:
    """The objects of a payload; :class:`CodecError` says where it breaks."""
    text = _native.decode(_as_bytes(payload), _dialect(dialect))
    return [from_json(v) for v in json.loads(text)]


def decode_hex(hex_payload: str, dialect: Dialect = "draft01") -> List[Object]:
    """:func:`decode` of a payload written in hex (spaces allowed)."""
    if not isinstance(hex_payload, str):
        raise TypeError(f"hex_payload must be a str, not {type(hex_payload).__name__}")
    try:
        payload = bytes.fromhex(hex_payload)
    except ValueError as e:
        raise CodecError(f"not hex: {e}", "bad_hex") from None
    return decode(payload, dialect)


def encode_hex(objects: Union[Object, Iterable[Object]], dialect: Dialect = "draft01") -> str:
    """:func:`encode`, in lowercase hex."""
    return encode(objects, dialect).hex()


def validate(payload: BytesLike, dialect: Dialect = "draft01") -> int:
    """How many objects a payload holds, or :class:`CodecError` with the reason the relay
    would drop it."""
    return _native.validate(_as_bytes(payload), _dialect(dialect))
