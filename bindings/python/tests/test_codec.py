"""The codec on its own: the reference implementation's vectors round-trip byte for byte
through the dataclasses, and garbage is refused with CodecError."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, List

import pytest

import gsrelay
from gsrelay import codec
from gsrelay.objects import OBJECT_TYPES, from_json, to_json

ROOT = Path(__file__).resolve().parents[3]
VECTORS = Path(os.environ.get("GSRELAY_GSE_VECTORS", ROOT.parent / "shared/interop/gse"))


def vectors(name: str) -> List[Any]:
    path = VECTORS / name
    if not path.is_file():
        pytest.skip(f"no gse vectors at {VECTORS} (set GSRELAY_GSE_VECTORS)")
    return list(json.loads(path.read_text())["vectors"])


@pytest.mark.parametrize(
    "name,dialect",
    [
        ("objects.json", "gse"),
        ("concatenated.json", "gse"),
        ("draft01_objects_not_in_gse.json", "draft01"),
    ],
)
def test_reference_vectors_round_trip_byte_for_byte(name: str, dialect: codec.Dialect) -> None:
    seen_types = set()
    for v in vectors(name):
        objects = codec.decode_hex(v["hex"], dialect)
        assert objects, v["name"]
        seen_types.update(type(o).__name__ for o in objects)
        assert codec.encode_hex(objects, dialect) == v["hex"], v["name"]
        # Through the JSON form too, as a tool would store it.
        again = [from_json(json.loads(json.dumps(to_json(o)))) for o in objects]
        assert again == objects or any(isinstance(o, gsrelay.HeadIPD1) for o in objects)
        assert codec.encode_hex(again, dialect) == v["hex"], v["name"]
    assert seen_types


def test_a_vector_decodes_to_its_fields() -> None:
    v = next(v for v in vectors("objects.json") if v["name"] == "head1_gse_test_vector_B1_ipd")
    (head,) = codec.decode_hex(v["hex"], "gse")
    assert isinstance(head, gsrelay.Head1)
    want = v["fields"]
    assert head.id == want["id"] and head.time == want["time"]
    assert head.location.x == pytest.approx(want["location"]["x"])
    assert head.location.z == want["location"]["z"]
    assert head.ipd == want["ipd"]


def every_object() -> List[gsrelay.Object]:
    loc = gsrelay.Loc2(1.5, -2.0, 3.25, 0.5, 0.0, -0.25)
    rot = gsrelay.Rot2(0.0, 0.5, 0.0, 0.0, 0.25, 0.0)
    return [
        gsrelay.Head1(id=1, time=7, location=loc, rotation=rot, ipd=0.0625),
        gsrelay.Hand1(id=2, time=8, left=True, location=loc, rotation=rot),
        gsrelay.Hand2(id=3, left=False, location=loc, wrist=gsrelay.Transform1(0.5, 0.25, 0.0)),
        gsrelay.Object1(id=4, position=gsrelay.Vec3(1, 2, 3), scale=2.0, parent=9),
        gsrelay.Object2(id=5, location=loc, rotation=rot, active=False),
        gsrelay.Mesh1(
            id=6,
            texture=gsrelay.TextureUrl("https://example.com/t.png"),
            vertices=[gsrelay.Vec3(0, 0, 0), gsrelay.Vec3(1, 0, 0), gsrelay.Vec3(0, 1, 0)],
            normals=[gsrelay.Vec3(0, 0, 1)] * 3,
            textures=[gsrelay.TexCoord(0.0, 0.0), gsrelay.TexCoord(1.0, 0.0), gsrelay.TexCoord(0.0, 1.0)],
            triangles=[0, 1, 2],
        ),
        gsrelay.Mesh2(id=7, mesh_url="https://example.com/m.glb", texture=gsrelay.TextureRtpPT(97)),
        gsrelay.GameControl1(id=8, buttons=5, buttons_time=3, left=gsrelay.Stick(0.5, -0.5)),
        gsrelay.ThreeDOF1(id=9, left=True, rotation=rot),
        gsrelay.SixDOF1(id=10, location=loc, rotation=rot, pointer=gsrelay.Pointer(1, 2, 3)),
        gsrelay.HeadIPD1(ipd=0.0625),
        gsrelay.Unknown(tag=4000, data=bytes([11, 1, 2, 3])),
    ]


def test_every_draft01_dataclass_round_trips() -> None:
    objects = every_object()
    payload = gsrelay.encode(objects)
    assert gsrelay.validate(payload) == len(objects)
    assert gsrelay.decode(payload) == objects
    kinds = {type(o) for o in objects} | {gsrelay.Container}
    assert kinds == set(OBJECT_TYPES)


def test_non_finite_floats_survive() -> None:
    head = gsrelay.Head1(id=1, location=gsrelay.Loc2(x=math.inf, y=-math.inf, z=math.nan))
    (back,) = gsrelay.decode(gsrelay.encode(head))
    assert isinstance(back, gsrelay.Head1)
    assert back.location.x == math.inf and back.location.y == -math.inf
    assert math.isnan(back.location.z)


def test_garbage_is_refused_with_codec_errors() -> None:
    with pytest.raises(gsrelay.CodecError) as e:
        gsrelay.decode_hex("zz")
    assert e.value.code == "bad_hex"
    with pytest.raises(gsrelay.CodecError) as e:
        gsrelay.decode(b"\x01\x05\x00")
    assert e.value.code == "decode" and "decode" in str(e.value)
    with pytest.raises(ValueError):  # CodecError is a ValueError too
        gsrelay.decode(b"\x00")
    with pytest.raises(gsrelay.CodecError) as e:
        gsrelay.encode(gsrelay.Head1(id=-1))
    assert e.value.code == "bad_object"
    with pytest.raises(gsrelay.CodecError):
        gsrelay.encode(gsrelay.Head1(location="here"))  # type: ignore[arg-type]
    with pytest.raises(gsrelay.CodecError):
        gsrelay.encode(gsrelay.Head1(time=1 << 20))
    with pytest.raises(gsrelay.CodecError):
        gsrelay.encode([object()])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        gsrelay.encode(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        gsrelay.decode("0102")  # type: ignore[arg-type]
    with pytest.raises(gsrelay.ArgumentError) as a:
        gsrelay.decode(b"", "xml")  # type: ignore[arg-type]
    assert a.value.code == "dialect"
    with pytest.raises(gsrelay.CodecError):
        gsrelay.validate(b"\xff\xff\xff")
