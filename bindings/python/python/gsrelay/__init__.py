"""gsrelay: the Python client of the gsrelay relay (game state over RTP).

- :class:`Client` (synchronous) and :class:`AsyncClient` (asyncio): join a room, publish
  objects or raw payloads, receive updates, ask for the room, change interest, leave; the
  session resumes or rejoins by itself when the relay goes silent (:class:`Resumed`,
  :class:`Rejoined`).
- :mod:`gsrelay.codec`: payloads to and from the draft-01 objects of :mod:`gsrelay.objects`.
- :func:`mint_token`: the relay's access tokens.

The network, the codec and the tokens are the Rust client's (``gsrelay-client``), bound with
pyo3. See ``docs/python-client.md``.
"""

from __future__ import annotations

from .aio import AsyncClient
from .client import Client, Delivery, Transport
from .codec import MAX_PAYLOAD, Dialect, decode, decode_hex, encode, encode_hex, validate
from .errors import (
    ArgumentError,
    BusyError,
    ClosedError,
    CodecError,
    GsrelayError,
    JoinError,
    TokenError,
)
from .events import (
    Dropped,
    Ended,
    ErrorEvent,
    Event,
    Kind,
    Ownership,
    RawEvent,
    Rejoined,
    Resumed,
    SnapshotComplete,
    StreamEnded,
    StreamStarted,
    Update,
)
from .objects import (
    Container,
    Finger,
    GameControl1,
    Hand1,
    Hand2,
    Head1,
    HeadIPD1,
    Loc2,
    Mesh1,
    Mesh2,
    Object,
    Object1,
    Object2,
    Pointer,
    Rot1,
    Rot2,
    SixDOF1,
    Stick,
    TexCoord,
    TextureRtpPT,
    TextureUrl,
    ThreeDOF1,
    Thumb,
    Transform1,
    Unknown,
    Vec3,
)
from .tokens import mint_token

__all__ = [
    "AsyncClient", "Client", "Delivery", "Transport", "Dialect", "MAX_PAYLOAD",
    "decode", "decode_hex", "encode", "encode_hex", "validate", "mint_token",
    "ArgumentError", "BusyError", "ClosedError", "CodecError", "GsrelayError", "JoinError",
    "TokenError", "Dropped", "Ended", "ErrorEvent", "Event", "Kind", "Ownership", "RawEvent",
    "Rejoined", "Resumed", "SnapshotComplete", "StreamEnded", "StreamStarted", "Update",
    "Container", "Finger", "GameControl1", "Hand1", "Hand2", "Head1", "HeadIPD1", "Loc2",
    "Mesh1", "Mesh2", "Object", "Object1", "Object2", "Pointer", "Rot1", "Rot2", "SixDOF1",
    "Stick", "TexCoord", "TextureRtpPT", "TextureUrl", "ThreeDOF1", "Thumb", "Transform1",
    "Unknown", "Vec3",
]
