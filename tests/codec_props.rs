//! Property tests of the codec: typed round trips for every object type in both
//! dialects, scanner/decoder agreement, and garbage that never panics.

use gsrelay::wire::json::Hex;
use gsrelay::wire::writer::WriteExt;
use gsrelay::wire::*;
use half::f16;
use proptest::collection::vec;
use proptest::prelude::*;

fn f32_any() -> impl Strategy<Value = f32> {
    any::<u32>().prop_map(f32::from_bits)
}

/// Values exactly representable as Float16, NaNs included.
fn f16_any() -> impl Strategy<Value = f32> {
    any::<u16>().prop_map(|b| f16::from_bits(b).to_f32())
}

fn loc2() -> impl Strategy<Value = Loc2> {
    (
        f32_any(),
        f32_any(),
        f32_any(),
        f16_any(),
        f16_any(),
        f16_any(),
    )
        .prop_map(|(x, y, z, vx, vy, vz)| Loc2 {
            x,
            y,
            z,
            vx,
            vy,
            vz,
        })
}

fn rot2() -> impl Strategy<Value = Rot2> {
    [
        f16_any(),
        f16_any(),
        f16_any(),
        f16_any(),
        f16_any(),
        f16_any(),
    ]
    .prop_map(|[si, sj, sk, ei, ej, ek]| Rot2 {
        si,
        sj,
        sk,
        ei,
        ej,
        ek,
    })
}

fn vec3_f32() -> impl Strategy<Value = Vec3> {
    (f32_any(), f32_any(), f32_any()).prop_map(|(x, y, z)| Vec3 { x, y, z })
}

fn vec3_f16() -> impl Strategy<Value = Vec3> {
    (f16_any(), f16_any(), f16_any()).prop_map(|(x, y, z)| Vec3 { x, y, z })
}

fn transform() -> impl Strategy<Value = Transform1> {
    (f16_any(), f16_any(), f16_any()).prop_map(|(tx, ty, tz)| Transform1 { tx, ty, tz })
}

fn finger() -> impl Strategy<Value = Finger> {
    [
        transform(),
        transform(),
        transform(),
        transform(),
        transform(),
    ]
    .prop_map(|[tip, dip, pip, mcp, cmc]| Finger {
        tip,
        dip,
        pip,
        mcp,
        cmc,
    })
}

/// draft01 extension TLVs (tags that are no known optional part), or nothing.
fn draft01_extra() -> impl Strategy<Value = Hex> {
    prop_oneof![
        3 => Just(Hex::default()),
        1 => vec((200u64..5000, vec(any::<u8>(), 0..6)), 1..3).prop_map(|tlvs| {
            let mut b = Vec::new();
            for (tag, body) in tlvs {
                b.put_varuint(tag);
                b.put_blob(&body);
            }
            Hex(b)
        }),
    ]
}

/// Raw trailing bytes gse skips (Hand1, Hand2, Mesh1, HeadIPD1).
fn gse_extra() -> impl Strategy<Value = Hex> {
    prop_oneof![3 => Just(Hex::default()), 1 => vec(any::<u8>(), 1..6).prop_map(Hex)]
}

fn extra(d: Dialect) -> BoxedStrategy<Hex> {
    match d {
        Dialect::Draft01 => draft01_extra().boxed(),
        Dialect::Gse => gse_extra().boxed(),
    }
}

fn no_extra_in_gse(d: Dialect) -> BoxedStrategy<Hex> {
    match d {
        Dialect::Draft01 => draft01_extra().boxed(),
        Dialect::Gse => Just(Hex::default()).boxed(),
    }
}

/// Unambiguous textures: non-empty URLs of URL characters, dynamic payload types.
fn texture() -> impl Strategy<Value = Texture> {
    prop_oneof![
        "[a-z0-9./:]{1,20}".prop_map(Texture::Url),
        (96u8..=127).prop_map(Texture::RtpPt)
    ]
}

fn head1(d: Dialect) -> impl Strategy<Value = Object> {
    (
        any::<u64>(),
        any::<u16>(),
        loc2(),
        rot2(),
        proptest::option::of(f16_any()),
        no_extra_in_gse(d),
    )
        .prop_map(|(id, time, location, rotation, ipd, extra)| {
            Object::Head1(Head1 {
                id,
                time,
                location,
                rotation,
                ipd,
                extra,
            })
        })
}

fn hand1(d: Dialect) -> impl Strategy<Value = Object> {
    (
        any::<u64>(),
        any::<u16>(),
        any::<bool>(),
        loc2(),
        rot2(),
        extra(d),
    )
        .prop_map(|(id, time, left, location, rotation, extra)| {
            Object::Hand1(Hand1 {
                id,
                time,
                left,
                location,
                rotation,
                extra,
            })
        })
}

fn hand2(d: Dialect) -> impl Strategy<Value = Object> {
    (
        (
            any::<u64>(),
            any::<u16>(),
            any::<bool>(),
            loc2(),
            rot2(),
            transform(),
        ),
        [transform(), transform(), transform(), transform()],
        [finger(), finger(), finger(), finger()],
        extra(d),
    )
        .prop_map(
            |(
                (id, time, left, location, rotation, wrist),
                [tip, ip, mcp, cmc],
                [index, middle, ring, pinky],
                extra,
            )| {
                Object::Hand2(Box::new(Hand2 {
                    id,
                    time,
                    left,
                    location,
                    rotation,
                    wrist,
                    thumb: Thumb { tip, ip, mcp, cmc },
                    index,
                    middle,
                    ring,
                    pinky,
                    extra,
                }))
            },
        )
}

fn object1(d: Dialect) -> impl Strategy<Value = Object> {
    let scale = match d {
        Dialect::Draft01 => f16_any().prop_map(Scale1::Uniform).boxed(),
        Dialect::Gse => vec3_f32().prop_map(Scale1::Axes).boxed(),
    };
    (
        any::<u64>(),
        any::<u16>(),
        vec3_f32(),
        vec3_f16(),
        scale,
        any::<bool>(),
        proptest::option::of(any::<u64>()),
        no_extra_in_gse(d),
    )
        .prop_map(|(id, time, position, r, scale, active, parent, extra)| {
            let rotation = Rot1 {
                i: r.x,
                j: r.y,
                k: r.z,
            };
            Object::Object1(Object1 {
                id,
                time,
                position,
                rotation,
                scale,
                active,
                parent,
                extra,
            })
        })
}

fn object2() -> impl Strategy<Value = Object> {
    (
        any::<u64>(),
        any::<u16>(),
        loc2(),
        rot2(),
        loc2(),
        any::<bool>(),
        proptest::option::of(any::<u64>()),
        draft01_extra(),
    )
        .prop_map(
            |(id, time, location, rotation, scale, active, parent, extra)| {
                Object::Object2(Object2 {
                    id,
                    time,
                    location,
                    rotation,
                    scale,
                    active,
                    parent,
                    extra,
                })
            },
        )
}

fn mesh1(d: Dialect) -> impl Strategy<Value = Object> {
    let (tex, uv) = match d {
        Dialect::Draft01 => (
            texture().prop_map(Some).boxed(),
            (f32_any(), f32_any())
                .prop_map(|(u, v)| TexCoord::Float { u, v })
                .boxed(),
        ),
        Dialect::Gse => (
            Just(None).boxed(),
            (any::<u64>(), any::<u64>())
                .prop_map(|(u, v)| TexCoord::Index { u, v })
                .boxed(),
        ),
    };
    (
        any::<u64>(),
        tex,
        vec(vec3_f32(), 0..5),
        vec(vec3_f16(), 0..5),
        vec(uv, 0..5),
        vec(any::<u64>(), 0..9),
        extra(d),
    )
        .prop_map(
            |(id, texture, vertices, normals, textures, triangles, extra)| {
                Object::Mesh1(Mesh1 {
                    id,
                    texture,
                    vertices,
                    normals,
                    textures,
                    triangles,
                    extra,
                })
            },
        )
}

fn mesh2() -> impl Strategy<Value = Object> {
    // Extension TLVs straight after MeshUrl1 can also read as a texture (docs/wire-format.md,
    // "Mesh2 texture"): extensions are only generated after a texture or a parent.
    (
        any::<u64>(),
        loc2(),
        rot2(),
        loc2(),
        "\\PC{0,20}",
        proptest::option::of(texture()),
        proptest::option::of(any::<u64>()),
        draft01_extra(),
    )
        .prop_map(
            |(id, location, rotation, scale, mesh_url, texture, parent, extra)| {
                let extra = if texture.is_none() && parent.is_none() {
                    Hex::default()
                } else {
                    extra
                };
                Object::Mesh2(Mesh2 {
                    id,
                    location,
                    rotation,
                    scale,
                    mesh_url,
                    texture,
                    parent,
                    extra,
                })
            },
        )
}

fn gamecontrol1() -> impl Strategy<Value = Object> {
    (
        any::<u64>(),
        any::<u16>(),
        any::<i64>(),
        any::<u16>(),
        [f16_any(), f16_any(), f16_any(), f16_any()],
        draft01_extra(),
    )
        .prop_map(
            |(id, time, buttons, buttons_time, [lx, ly, rx, ry], extra)| {
                Object::GameControl1(GameControl1 {
                    id,
                    time,
                    buttons,
                    buttons_time,
                    left: Stick { x: lx, y: ly },
                    right: Stick { x: rx, y: ry },
                    extra,
                })
            },
        )
}

fn threedof1() -> impl Strategy<Value = Object> {
    (
        any::<u64>(),
        any::<u16>(),
        any::<bool>(),
        rot2(),
        draft01_extra(),
    )
        .prop_map(|(id, time, left, rotation, extra)| {
            Object::ThreeDof1(ThreeDof1 {
                id,
                time,
                left,
                rotation,
                extra,
            })
        })
}

fn sixdof1() -> impl Strategy<Value = Object> {
    let pointer = (vec3_f32(), any::<bool>()).prop_map(|(v, bare)| Pointer {
        x: v.x,
        y: v.y,
        z: v.z,
        bare,
    });
    // A bare pointer is recognised by being exactly the last 12 bytes: no extension after it.
    (
        any::<u64>(),
        any::<u16>(),
        any::<bool>(),
        loc2(),
        rot2(),
        proptest::option::of(pointer),
        draft01_extra(),
    )
        .prop_map(|(id, time, left, location, rotation, pointer, extra)| {
            let extra = if pointer.is_some_and(|p| p.bare) {
                Hex::default()
            } else {
                extra
            };
            Object::SixDof1(SixDof1 {
                id,
                time,
                left,
                location,
                rotation,
                pointer,
                extra,
            })
        })
}

fn head_ipd1(d: Dialect) -> impl Strategy<Value = Object> {
    (f16_any(), extra(d)).prop_map(|(ipd, extra)| Object::HeadIpd1(HeadIpd1 { ipd, extra }))
}

fn unknown(d: Dialect) -> impl Strategy<Value = Object> {
    (1u64..=u64::MAX, vec(any::<u8>(), 0..20))
        .prop_filter("tag unknown in the dialect", move |(tag, _)| {
            d.kind_of(*tag) == ObjectKind::Unknown
        })
        .prop_map(|(tag, data)| {
            Object::Unknown(Unknown {
                tag,
                data: Hex(data),
            })
        })
}

fn any_object(d: Dialect) -> BoxedStrategy<Object> {
    match d {
        Dialect::Draft01 => prop_oneof![
            head1(d),
            hand1(d),
            hand2(d),
            object1(d),
            object2(),
            mesh1(d),
            mesh2(),
            gamecontrol1(),
            threedof1(),
            sixdof1(),
            head_ipd1(d),
            unknown(d),
        ]
        .boxed(),
        Dialect::Gse => prop_oneof![
            head1(d),
            hand1(d),
            hand2(d),
            object1(d),
            mesh1(d),
            head_ipd1(d),
            unknown(d)
        ]
        .boxed(),
    }
}

fn dialect() -> impl Strategy<Value = Dialect> {
    prop_oneof![Just(Dialect::Draft01), Just(Dialect::Gse)]
}

fn payload() -> impl Strategy<Value = (Dialect, Vec<Object>)> {
    dialect().prop_flat_map(|d| (Just(d), vec(any_object(d), 1..5)))
}

/// Objects compared through their JSON form, which is exact for NaN payloads too.
fn json(objects: &[Object]) -> String {
    serde_json::to_string(objects).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn encode_then_decode_is_identity((d, objects) in payload()) {
        let bytes = encode(&objects, d).unwrap();
        let decoded = decode(&bytes, d).unwrap();
        prop_assert_eq!(json(&decoded), json(&objects));
        prop_assert_eq!(encode(&decoded, d).unwrap(), bytes);
    }

    #[test]
    fn scanner_agrees_with_typed_decoder((d, objects) in payload()) {
        let bytes = encode(&objects, d).unwrap();
        let refs: Vec<ObjectRef> = objects_of(&bytes, d);
        prop_assert_eq!(refs.len(), objects.len());
        let mut next = 0;
        for (r, o) in refs.iter().zip(&objects) {
            prop_assert_eq!(r.start, next, "objects are contiguous");
            next = r.end;
            let alone = encode(std::slice::from_ref(o), d).unwrap();
            prop_assert_eq!(r.bytes(&bytes), &alone[..]);
            prop_assert_eq!(r.kind, kind_of(o));
            prop_assert_eq!(r.id, o.id());
            prop_assert_eq!(r.parent, o.parent());
            prop_assert_eq!(r.position.map(|p| p.map(f32::to_bits)), o.position().map(|p| p.map(f32::to_bits)));
        }
        prop_assert_eq!(next, bytes.len());
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_both_parsers_agree(d in dialect(), bytes in vec(any::<u8>(), 0..300)) {
        check_garbage(d, &bytes)?;
    }

    #[test]
    fn corrupted_payloads_never_panic((d, objects) in payload(), edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4), cut in any::<prop::sample::Index>()) {
        let mut bytes = encode(&objects, d).unwrap();
        for (at, b) in edits {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        check_garbage(d, &bytes)?;
        let n = cut.index(bytes.len() + 1);
        check_garbage(d, &bytes[..n])?;
    }
}

fn objects_of(bytes: &[u8], d: Dialect) -> Vec<ObjectRef> {
    objects(bytes, d).collect::<Result<_, _>>().unwrap()
}

/// Whatever the input, the scanner and decoder agree on acceptance, and an accepted
/// payload re-encodes to a canonical payload that decodes to the same objects.
fn check_garbage(d: Dialect, bytes: &[u8]) -> Result<(), TestCaseError> {
    let typed = decode(bytes, d);
    let scanned = validate(bytes, d);
    prop_assert_eq!(
        typed.is_ok(),
        scanned.is_ok(),
        "typed {:?} vs scanned {:?}",
        typed,
        scanned
    );
    if let Ok(objects) = typed {
        prop_assert_eq!(scanned.ok(), Some(objects.len()));
        let again = encode(&objects, d).unwrap();
        prop_assert_eq!(json(&decode(&again, d).unwrap()), json(&objects));
    }
    Ok(())
}
