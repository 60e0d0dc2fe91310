"""The synchronous client: join a room, publish, receive, leave.

A :class:`Client` is one session with a relay. Its network runs on the extension's own
thread (the Rust client: SRTP, RTCP, resume and rejoin); the calls here push commands to
it and drain what it received, the GIL released while they wait, so other Python threads
run meanwhile and Ctrl-C interrupts a wait.
"""

from __future__ import annotations

import json
import time
from types import TracebackType
from typing import Any, Dict, Iterator, List, Literal, Mapping, Optional, Type

from . import _native
from .codec import BytesLike, Dialect, _as_bytes, _dialect, encode
from .errors import ArgumentError
from .events import Ended, Event, RawEvent, Update, typed, typed_all
from .objects import Object

Transport = Literal["srtp", "rtp", "quic", "webtransport", "webrtc"]
"""``"srtp"`` (or ``"rtp"``, as the HTTP API names it): RTP over UDP with SRTP;
``"quic"``: RTP over QUIC; ``"webtransport"``; ``"webrtc"``: a WebRTC data channel."""

Delivery = Literal["per_stream", "aggregated"]
"""Each sender's stream on its own, or one stream from the relay with every sender's
objects (``docs/relay.md``, "Delivery modes")."""

TRANSPORTS = ("srtp", "rtp", "quic", "webtransport", "webrtc")


def interest_json(
    interest: Optional[Mapping[str, Any]],
    delivery: Optional[Delivery],
    max_delay_ms: Optional[int],
) -> Optional[str]:
    """The JSON form of an interest (``docs/interest.md``) with ``delivery`` set in it."""
    if interest is not None and not isinstance(interest, Mapping):
        raise TypeError(f"interest must be a dict (its JSON form), not {type(interest).__name__}")
    if delivery is None and max_delay_ms is None:
        return None if interest is None else json.dumps(dict(interest))
    if delivery not in (None, "per_stream", "aggregated"):
        raise ArgumentError(
            f'unknown delivery {delivery!r}: expected "per_stream" or "aggregated"', "delivery"
        )
    merged: Dict[str, Any] = dict(interest or {})
    mode: Dict[str, Any] = {"mode": delivery or "aggregated"}
    if max_delay_ms is not None:
        mode["max_delay_ms"] = max_delay_ms
    merged["delivery"] = mode
    return json.dumps(merged)


class Client:
    """One session in a room. Make it with :meth:`join`; use it as a context manager to
    leave at the end."""

    def __init__(self, session: _native.Session, room: str, transport: str, dialect: Dialect) -> None:
        """Wraps a joined native session; call :meth:`join` instead."""
        self._session = session
        self.room = room
        """The room joined."""
        self.transport = transport
        """The transport asked for."""
        self.dialect: Dialect = dialect
        """The wire dialect spoken."""
        self._ended: Optional[Ended] = None

    @classmethod
    def join(
        cls,
        http_base: str,
        token: str,
        room: str,
        *,
        transport: Transport = "srtp",
        dialect: Dialect = "draft01",
        interest: Optional[Mapping[str, Any]] = None,
        delivery: Optional[Delivery] = None,
        max_delay_ms: Optional[int] = None,
        snapshot: bool = True,
        ssrc: Optional[int] = None,
        require_ssrc: bool = False,
        room_stream: bool = False,
        plain_rtp: bool = False,
        silence: Optional[float] = None,
        timeout: float = 15.0,
    ) -> "Client":
        """Joins ``room`` through the relay's HTTP API at ``http_base``
        (``http://127.0.0.1:8080``) with ``token``.

        ``interest`` is the JSON form of an interest as a dict (``docs/interest.md``);
        ``delivery="aggregated"`` (with ``max_delay_ms``) asks for one stream carrying every
        sender. ``snapshot`` asks for the whole room at once (a :class:`SnapshotComplete`
        follows its objects). ``silence``: seconds without a word from the relay after which
        the client takes it for gone and comes back by itself (15 s by default).

        Raises :class:`~gsrelay.errors.JoinError` (``status``/``code`` of the relay's
        refusal, e.g. 401 ``bad_token``) or :class:`~gsrelay.errors.ArgumentError`.
        """
        for name, value in (("http_base", http_base), ("token", token), ("room", room)):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, not {type(value).__name__}")
        if transport not in TRANSPORTS:
            raise ArgumentError(
                f"unknown transport {transport!r}: expected one of {', '.join(TRANSPORTS)}",
                "transport",
            )
        session = _native.join(
            http_base,
            token,
            room,
            transport=transport,
            dialect=_dialect(dialect),
            interest=interest_json(interest, delivery, max_delay_ms),
            ssrc=ssrc,
            require_ssrc=require_ssrc,
            room_stream=room_stream,
            plain_rtp=plain_rtp,
            silence=silence,
            snapshot=snapshot,
            timeout=timeout,
        )
        return cls(session, room, transport, dialect)

    # --- who it is -------------------------------------------------------------------

    @property
    def ssrc(self) -> int:
        """The session's SSRC (it may change on a :class:`Rejoined`)."""
        return self._session.info()[0]

    @property
    def relay_ssrc(self) -> int:
        """The relay's SSRC."""
        return self._session.info()[1]

    @property
    def session_id(self) -> str:
        """The relay's id of the session (``s`` and 16 hex digits)."""
        return self._session.info()[3]

    @property
    def closed(self) -> bool:
        """Whether the session ended and every event was read."""
        return self._session.is_over()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "joined"
        return (
            f"<gsrelay.Client room={self.room!r} ssrc={self.ssrc} transport={self.transport}"
            f" dialect={self.dialect} {state}>"
        )

    # --- sending ---------------------------------------------------------------------

    def publish(self, *objects: Object) -> None:
        """Encodes ``objects`` in the session's dialect and sends them as one packet.

        Raises :class:`~gsrelay.errors.CodecError` when they do not encode or are over
        :data:`gsrelay.MAX_PAYLOAD` bytes, :class:`~gsrelay.errors.ClosedError` after the
        end. A send that fails on the network arrives as an :class:`ErrorEvent`.
        """
        if not objects:
            raise ArgumentError("publish needs at least one object", "empty")
        self._session.publish(encode(objects, self.dialect))

    def publish_raw(self, payload: BytesLike) -> None:
        """Sends a payload as it is (checked: a game-state payload of the session's dialect
        of at most :data:`gsrelay.MAX_PAYLOAD` bytes)."""
        self._session.publish(_as_bytes(payload))

    def snapshot(self) -> None:
        """Asks the relay for the whole room; a :class:`SnapshotComplete` follows."""
        self._session.snapshot()

    def set_interest(
        self,
        interest: Optional[Mapping[str, Any]] = None,
        *,
        delivery: Optional[Delivery] = None,
        max_delay_ms: Optional[int] = None,
    ) -> None:
        """Replaces the session's interest (``docs/interest.md``); ``{}`` is everything."""
        text = interest_json(interest if interest is not None else {}, delivery, max_delay_ms)
        self._session.set_interest(text or "{}")

    # --- receiving -------------------------------------------------------------------

    def recv_batch(self, max: int = 4096, timeout: float = 0.0) -> List[RawEvent]:
        """Up to ``max`` events as compact ``(kind, ssrc, object_id, code, data)`` tuples
        (:class:`~gsrelay.events.Kind`), waiting at most ``timeout`` seconds for the first;
        ``[]`` when none came. The fast path: no object per event besides the tuple."""
        return self._session.recv_batch(max, timeout)

    def poll(self, timeout: float = 0.0, max: int = 4096) -> List[Event]:
        """:meth:`recv_batch` as typed events."""
        events = typed_all(self._session.recv_batch(max, timeout), self.dialect)
        for e in events:
            if isinstance(e, Ended):
                self._ended = e
        return events

    def events(self, timeout: Optional[float] = None) -> Iterator[Event]:
        """Every event as it comes, until the session ends (its :class:`Ended` is the
        last) or ``timeout`` seconds have passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 3600.0 if deadline is None else deadline - time.monotonic()
            if left <= 0 or self._session.is_over():
                return
            for e in self.poll(min(left, 0.5)):
                yield e
                if isinstance(e, Ended):
                    return

    def __iter__(self) -> Iterator[Event]:
        """:meth:`events` with no timeout."""
        return self.events()

    def updates(self, timeout: Optional[float] = None) -> Iterator[Update]:
        """The :class:`Update`\\ s among :meth:`events`."""
        for e in self.events(timeout):
            if isinstance(e, Update):
                yield e

    def wait_for(self, predicate: Any, timeout: float) -> Optional[Event]:
        """The first event for which ``predicate(event)`` is true within ``timeout``
        seconds, or ``None``; the events before it are read and dropped."""
        for e in self.events(timeout):
            if predicate(e):
                return e
        return None

    @property
    def ended(self) -> Optional[Ended]:
        """The :class:`Ended` event once it was read."""
        return self._ended

    # --- leaving ---------------------------------------------------------------------

    def leave(self, timeout: float = 5.0) -> str:
        """Leaves the room (the relay is told, waiting at most ``timeout`` seconds); says
        how it went. Nothing is sent after; events already received can still be read."""
        return self._session.leave(timeout)

    def __enter__(self) -> "Client":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.leave()


def raw_event(raw: RawEvent, dialect: Dialect = "draft01") -> Event:
    """The typed event of a tuple from :meth:`Client.recv_batch`."""
    return typed(raw, dialect)

