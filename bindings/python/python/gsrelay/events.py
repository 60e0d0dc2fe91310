"""What a session receives: updates of objects, and what happens to the session.

:meth:`gsrelay.Client.poll` and iteration hand these out; :meth:`gsrelay.Client.recv_batch`
hands out the same as compact tuples ``(kind, ssrc, object_id, code, data)`` (:data:`RawEvent`)
for code that reads tens of thousands of updates a second.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import List, Tuple, Union

from .codec import Dialect, decode
from .objects import Object


class Kind(enum.IntEnum):
    """The ``kind`` of a raw event (the C ABI's numbers)."""

    OBJECT = 2
    SNAPSHOT_COMPLETE = 3
    STREAM_STARTED = 4
    STREAM_ENDED = 5
    OWNERSHIP = 6
    RESUMED = 7
    REJOINED = 8
    ENDED = 9
    ERROR = 10
    DROPPED = 11


RawEvent = Tuple[int, int, int, int, Union[bytes, str, None]]
"""``(kind, ssrc, object_id, code, data)``: ``data`` is an object's TLV bytes or a message."""


@dataclass
class Update:
    """An object's update from stream ``ssrc`` (in aggregated delivery, its sender's).

    ``data`` is the object's bytes as sent; :attr:`object` decodes them (each time it is
    read: keep the result)."""

    __slots__ = ("ssrc", "object_id", "data", "dialect")
    ssrc: int
    object_id: int
    data: bytes
    dialect: Dialect

    @property
    def object(self) -> Object:
        """The object decoded."""
        return decode(self.data, self.dialect)[0]


@dataclass
class StreamStarted:
    """The first packet of stream ``ssrc`` arrived."""

    __slots__ = ("ssrc",)
    ssrc: int


@dataclass
class StreamEnded:
    """Stream ``ssrc`` ended (its sender left)."""

    __slots__ = ("ssrc",)
    ssrc: int


@dataclass
class SnapshotComplete:
    """Every stream in the room when it was asked for has sent its state; ``partial``
    when the wait (``SNAPSHOT_WAIT``, 2 s) ran out first."""

    __slots__ = ("partial",)
    partial: bool


@dataclass
class Ownership:
    """An ownership notice for object (``ssrc``, ``object_id``): ``notice`` 3 granted,
    4 lost, 5 refused (``docs/relay.md``, "GSOW")."""

    __slots__ = ("ssrc", "object_id", "notice")
    ssrc: int
    object_id: int
    notice: int


@dataclass
class Resumed:
    """The relay went silent and the session came back with its SSRC (``ssrc``); the room
    is asked for again, a :class:`SnapshotComplete` follows."""

    __slots__ = ("ssrc",)
    ssrc: int


@dataclass
class Rejoined:
    """The session came back under a new SSRC (``ssrc``); the room is asked for again."""

    __slots__ = ("ssrc",)
    ssrc: int


@dataclass
class Ended:
    """The session is over: it left, or the relay ended it (``by_relay``). Nothing follows."""

    __slots__ = ("reason", "by_relay")
    reason: str
    by_relay: bool


@dataclass
class ErrorEvent:
    """Something failed without ending the session (a publish, an interest change, an
    attempt to come back): ``code`` is stable, ``message`` says more."""

    __slots__ = ("code", "message")
    code: str
    message: str


@dataclass
class Dropped:
    """``count`` updates were dropped, oldest first, because nobody read for a while."""

    __slots__ = ("count",)
    count: int


Event = Union[
    Update,
    StreamStarted,
    StreamEnded,
    SnapshotComplete,
    Ownership,
    Resumed,
    Rejoined,
    Ended,
    ErrorEvent,
    Dropped,
]
"""Anything :meth:`gsrelay.Client.poll` returns."""


def typed(raw: RawEvent, dialect: Dialect) -> Event:
    """The event of a raw tuple."""
    kind, ssrc, object_id, code, data = raw
    if kind == Kind.OBJECT:
        return Update(ssrc, object_id, data if isinstance(data, bytes) else b"", dialect)
    if kind == Kind.SNAPSHOT_COMPLETE:
        return SnapshotComplete(bool(code))
    if kind == Kind.STREAM_STARTED:
        return StreamStarted(ssrc)
    if kind == Kind.STREAM_ENDED:
        return StreamEnded(ssrc)
    if kind == Kind.OWNERSHIP:
        return Ownership(ssrc, object_id, code)
    if kind == Kind.RESUMED:
        return Resumed(ssrc)
    if kind == Kind.REJOINED:
        return Rejoined(ssrc)
    if kind == Kind.ENDED:
        return Ended(str(data), code == 1)
    if kind == Kind.DROPPED:
        return Dropped(code)
    text = str(data)
    error_code, _, message = text.partition(": ")
    return ErrorEvent(error_code, message)


def typed_all(raws: List[RawEvent], dialect: Dialect) -> List[Event]:
    """:func:`typed` of each."""
    return [typed(r, dialect) for r in raws]
