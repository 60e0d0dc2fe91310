"""The draft-01 game-state objects as dataclasses.

Each mirrors a variant of the Rust codec's ``gsrelay_core::wire::Object`` field for field;
:func:`to_json` and :func:`from_json` convert to and from its JSON form (what
``gsrelay decode`` prints), which the extension encodes and decodes. Every field has a
default, so objects are built with keywords: ``Head1(id=1, location=Loc2(x=1.0))``.

Floats are Python floats (the codec rounds them to Float32 or Float16 as the draft says);
``extra`` holds bytes of optional parts the codec does not know, written back unchanged.
"""

from __future__ import annotations

import dataclasses
import math
import struct
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from .errors import CodecError

JsonValue = Any
"""A value of the JSON form (what ``json.loads`` returns)."""


@dataclass
class Vec3:
    """Loc1 (three Float32) or Norm1 (three Float16)."""

    x: float = 0.0
    y: float = 0.0
    z: float = 0.0


@dataclass
class Loc2:
    """Loc2 / Scale2: a value (Float32) and its rate of change per second (Float16)."""

    x: float = 0.0
    y: float = 0.0
    z: float = 0.0
    vx: float = 0.0
    vy: float = 0.0
    vz: float = 0.0


@dataclass
class Rot1:
    """Rot1: the vector part of a unit quaternion."""

    i: float = 0.0
    j: float = 0.0
    k: float = 0.0


@dataclass
class Rot2:
    """Rot2: the rotation now (``s*``) and the one expected a second later (``e*``)."""

    si: float = 0.0
    sj: float = 0.0
    sk: float = 0.0
    ei: float = 0.0
    ej: float = 0.0
    ek: float = 0.0


@dataclass
class Transform1:
    """Transform1: a joint's translation from its base (three Float16)."""

    tx: float = 0.0
    ty: float = 0.0
    tz: float = 0.0


@dataclass
class Stick:
    """An analog stick, two Float16 in -1..1."""

    x: float = 0.0
    y: float = 0.0


@dataclass
class Thumb:
    """A thumb's four joints."""

    tip: Transform1 = field(default_factory=Transform1)
    ip: Transform1 = field(default_factory=Transform1)
    mcp: Transform1 = field(default_factory=Transform1)
    cmc: Transform1 = field(default_factory=Transform1)


@dataclass
class Finger:
    """A finger's five joints."""

    tip: Transform1 = field(default_factory=Transform1)
    dip: Transform1 = field(default_factory=Transform1)
    pip: Transform1 = field(default_factory=Transform1)
    mcp: Transform1 = field(default_factory=Transform1)
    cmc: Transform1 = field(default_factory=Transform1)


@dataclass
class Pointer:
    """The 6DOF controller's pointer intersection point."""

    x: float = 0.0
    y: float = 0.0
    z: float = 0.0
    bare: bool = False
    """Written as the EBNF literally reads (``tag6DOFpointer1 Loc1``, no Length)."""


@dataclass
class TextureUrl:
    """TextureUrl1: a texture by URL."""

    url: str = ""


@dataclass
class TextureRtpPT:
    """TextureRtpPT1: a texture from the video stream of this RTP payload type."""

    payload_type: int = 0


Texture = Union[TextureUrl, TextureRtpPT]


@dataclass
class TexCoord:
    """A texture coordinate: floats in draft-01 (TextureUV1); ints in the gse dialect."""

    u: float = 0.0
    v: float = 0.0


@dataclass
class Head1:
    """Head1: a player's head pose, with an optional interpupillary distance."""

    id: int = 0
    time: int = 0
    location: Loc2 = field(default_factory=Loc2)
    rotation: Rot2 = field(default_factory=Rot2)
    ipd: Optional[float] = None
    extra: bytes = b""


@dataclass
class Hand1:
    """Hand1: a hand's pose."""

    id: int = 0
    time: int = 0
    left: bool = False
    location: Loc2 = field(default_factory=Loc2)
    rotation: Rot2 = field(default_factory=Rot2)
    extra: bytes = b""


@dataclass
class Hand2:
    """Hand2: a skeletal hand."""

    id: int = 0
    time: int = 0
    left: bool = False
    location: Loc2 = field(default_factory=Loc2)
    rotation: Rot2 = field(default_factory=Rot2)
    wrist: Transform1 = field(default_factory=Transform1)
    thumb: Thumb = field(default_factory=Thumb)
    index: Finger = field(default_factory=Finger)
    middle: Finger = field(default_factory=Finger)
    ring: Finger = field(default_factory=Finger)
    pinky: Finger = field(default_factory=Finger)
    extra: bytes = b""


@dataclass
class Object1:
    """Object1: a generic object. ``scale`` is one float in draft-01, a Vec3 in gse."""

    id: int = 0
    time: int = 0
    position: Vec3 = field(default_factory=Vec3)
    rotation: Rot1 = field(default_factory=Rot1)
    scale: Union[float, Vec3] = 1.0
    active: bool = True
    parent: Optional[int] = None
    extra: bytes = b""


@dataclass
class Object2:
    """Object2: a generic object with rates of change."""

    id: int = 0
    time: int = 0
    location: Loc2 = field(default_factory=Loc2)
    rotation: Rot2 = field(default_factory=Rot2)
    scale: Loc2 = field(default_factory=lambda: Loc2(1.0, 1.0, 1.0))
    active: bool = True
    parent: Optional[int] = None
    extra: bytes = b""


@dataclass
class Mesh1:
    """Mesh1: a small inline triangle mesh."""

    id: int = 0
    texture: Optional[Texture] = None
    vertices: List[Vec3] = field(default_factory=list)
    normals: List[Vec3] = field(default_factory=list)
    textures: List[TexCoord] = field(default_factory=list)
    triangles: List[int] = field(default_factory=list)
    extra: bytes = b""


@dataclass
class Mesh2:
    """Mesh2: an external mesh placed in the scene."""

    id: int = 0
    location: Loc2 = field(default_factory=Loc2)
    rotation: Rot2 = field(default_factory=Rot2)
    scale: Loc2 = field(default_factory=lambda: Loc2(1.0, 1.0, 1.0))
    mesh_url: str = field(default="", metadata={"json": "meshUrl"})
    texture: Optional[Texture] = None
    parent: Optional[int] = None
    extra: bytes = b""


@dataclass
class GameControl1:
    """GameControl1: buttons (bits) and two sticks."""

    id: int = 0
    time: int = 0
    buttons: int = 0
    buttons_time: int = field(default=0, metadata={"json": "buttonsTime"})
    left: Stick = field(default_factory=Stick)
    right: Stick = field(default_factory=Stick)
    extra: bytes = b""


@dataclass
class ThreeDOF1:
    """ThreeDOF1: an orientation-only controller."""

    id: int = 0
    time: int = 0
    left: bool = False
    rotation: Rot2 = field(default_factory=Rot2)
    extra: bytes = b""


@dataclass
class SixDOF1:
    """SixDOF1: a pose controller with an optional pointer."""

    id: int = 0
    time: int = 0
    left: bool = False
    location: Loc2 = field(default_factory=Loc2)
    rotation: Rot2 = field(default_factory=Rot2)
    pointer: Optional[Pointer] = None
    extra: bytes = b""


@dataclass
class HeadIPD1:
    """HeadIPD1 sent on its own (it has no objectID)."""

    ipd: float = 0.0
    extra: bytes = b""


@dataclass
class Unknown:
    """An object whose tag the dialect does not know: its body bytes, untouched."""

    tag: int = 0
    data: bytes = b""


@dataclass
class Container:
    """One sender's objects inside an aggregated packet (``ssrc`` is the sender)."""

    ssrc: int = 0
    objects: List["Object"] = field(default_factory=list)


Object = Union[
    Head1,
    Hand1,
    Hand2,
    Object1,
    Object2,
    Mesh1,
    Mesh2,
    GameControl1,
    ThreeDOF1,
    SixDOF1,
    HeadIPD1,
    Container,
    Unknown,
]
"""Any game-state object."""

OBJECT_TYPES: Tuple[type, ...] = typing.get_args(Object)
_BY_NAME: Dict[str, type] = {c.__name__: c for c in OBJECT_TYPES}


# --- JSON form -----------------------------------------------------------------------

_Conv = Tuple[Callable[[Any], JsonValue], Callable[[JsonValue], Any]]


def _float_out(v: Any) -> JsonValue:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise CodecError(f"expected a number, got {type(v).__name__}", "bad_object")
    if math.isfinite(v):
        return float(v)
    if math.isnan(v):
        return "-NaN" if math.copysign(1.0, v) < 0 else "NaN"
    return "Infinity" if v > 0 else "-Infinity"


def _float_in(v: JsonValue) -> float:
    if isinstance(v, str):
        if v == "Infinity":
            return math.inf
        if v == "-Infinity":
            return -math.inf
        if v == "NaN":
            return math.nan
        if v == "-NaN":
            return -math.nan
        if v.startswith("NaN:0x"):
            return float(struct.unpack("<f", struct.pack("<I", int(v[6:], 16)))[0])
    return float(v)


def _int_out(v: Any) -> JsonValue:
    if isinstance(v, bool) or not isinstance(v, int):
        raise CodecError(f"expected an int, got {type(v).__name__}", "bad_object")
    return v


def _bool_out(v: Any) -> JsonValue:
    if not isinstance(v, bool):
        raise CodecError(f"expected a bool, got {type(v).__name__}", "bad_object")
    return v


def _str_out(v: Any) -> JsonValue:
    if not isinstance(v, str):
        raise CodecError(f"expected a str, got {type(v).__name__}", "bad_object")
    return v


def _bytes_out(v: Any) -> JsonValue:
    if not isinstance(v, (bytes, bytearray, memoryview)):
        raise CodecError(f"expected bytes, got {type(v).__name__}", "bad_object")
    return bytes(v).hex()


def _texture_out(v: Any) -> JsonValue:
    if isinstance(v, TextureUrl):
        return {"url": _str_out(v.url)}
    if isinstance(v, TextureRtpPT):
        return {"rtpPT": _int_out(v.payload_type)}
    raise CodecError(f"expected a TextureUrl or TextureRtpPT, got {type(v).__name__}", "bad_object")


def _texture_in(v: JsonValue) -> Texture:
    if "url" in v:
        return TextureUrl(str(v["url"]))
    return TextureRtpPT(int(v["rtpPT"]))


def _texcoord_out(v: Any) -> JsonValue:
    if not isinstance(v, TexCoord):
        raise CodecError(f"expected a TexCoord, got {type(v).__name__}", "bad_object")
    if isinstance(v.u, int) and isinstance(v.v, int) and not isinstance(v.u, bool):
        return {"u": v.u, "v": v.v}
    return {"u": _float_out(v.u), "v": _float_out(v.v)}


def _texcoord_in(v: JsonValue) -> TexCoord:
    u, w = v["u"], v["v"]
    if isinstance(u, int) and isinstance(w, int):
        return TexCoord(u, w)
    return TexCoord(_float_in(u), _float_in(w))


def _scale_out(v: Any) -> JsonValue:
    if isinstance(v, Vec3):
        return _to(v)
    return _float_out(v)


def _scale_in(v: JsonValue) -> Union[float, Vec3]:
    if isinstance(v, dict):
        return typing.cast(Vec3, _from(Vec3, v))
    return _float_in(v)


def _conv(hint: Any) -> _Conv:
    """The pair (to JSON, from JSON) for a field's type."""
    if hint is float:
        return _float_out, _float_in
    if hint is int:
        return _int_out, int
    if hint is bool:
        return _bool_out, bool
    if hint is str:
        return _str_out, str
    if hint is bytes:
        return _bytes_out, bytes.fromhex
    if hint == Union[float, Vec3]:
        return _scale_out, _scale_in
    if hint == Texture:
        return _texture_out, _texture_in
    if hint is TexCoord:
        return _texcoord_out, _texcoord_in
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Union and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        out, back = _conv(inner[0] if len(inner) == 1 else Union[tuple(inner)])
        return (lambda v: None if v is None else out(v)), (lambda v: None if v is None else back(v))
    if origin in (list, List):
        out, back = _conv(args[0])

        def list_out(v: Any) -> JsonValue:
            if not isinstance(v, (list, tuple)):
                raise CodecError(f"expected a list, got {type(v).__name__}", "bad_object")
            return [out(x) for x in v]

        return list_out, (lambda v: [back(x) for x in v])
    if hint == Object:
        return to_json, from_json
    if dataclasses.is_dataclass(hint):
        cls = typing.cast(type, hint)

        def nested_out(v: Any) -> JsonValue:
            if not isinstance(v, cls):
                raise CodecError(f"expected a {cls.__name__}, got {type(v).__name__}", "bad_object")
            return _to(v)

        return nested_out, (lambda v: _from(cls, v))
    raise TypeError(f"no JSON form for {hint!r}")


_Field = Tuple[str, str, Callable[[Any], JsonValue], Callable[[JsonValue], Any], bool]
_FIELDS: Dict[type, List[_Field]] = {}


def _fields(cls: type) -> List[_Field]:
    """Each field's name, JSON name, converters and whether it is left out when empty."""
    known = _FIELDS.get(cls)
    if known is None:
        hints = typing.get_type_hints(cls)
        known = []
        for f in dataclasses.fields(cls):
            out, back = _conv(hints[f.name])
            optional = f.name == "extra" or (f.default is None) or f.name == "bare"
            known.append((f.name, f.metadata.get("json", f.name), out, back, optional))
        _FIELDS[cls] = known
    return known


def _to(v: Any) -> Dict[str, JsonValue]:
    out: Dict[str, JsonValue] = {}
    for name, key, conv, _, optional in _fields(type(v)):
        value = getattr(v, name)
        if optional and (value is None or value is False or value == b""):
            continue
        out[key] = conv(value)
    return out


def _from(cls: type, v: JsonValue) -> Any:
    kwargs = {}
    for name, key, _, conv, _ in _fields(cls):
        if key in v:
            kwargs[name] = conv(v[key])
    return cls(**kwargs)


def to_json(obj: Object) -> Dict[str, JsonValue]:
    """The JSON form of ``obj`` (a dict with its ``"type"``), as the codec reads it."""
    name = type(obj).__name__
    if _BY_NAME.get(name) is not type(obj):
        raise CodecError(f"not a game-state object: {type(obj).__name__}", "bad_object")
    out = {"type": name}
    out.update(_to(obj))
    return out


def from_json(value: JsonValue) -> Object:
    """The object of a JSON form (one element of what ``gsrelay decode`` prints)."""
    try:
        cls = _BY_NAME[value["type"]]
    except (KeyError, TypeError) as e:
        raise CodecError(f"not the JSON form of an object: {value!r}", "bad_object") from e
    return typing.cast(Object, _from(cls, value))
