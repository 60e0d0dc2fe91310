//! Codec benchmarks: the zero-copy scanner, typed decode and typed encode over one
//! MTU-sized game-state payload in each dialect, and the scanner per object type.
//!
//! Run with `cargo bench -p gsrelay-core --bench codec`; `docs/benchmarks.md` records the
//! method and the results.

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use gsrelay_core::wire::{
    Dialect, Finger, Hand2, Head1, Loc2, Mesh1, Object, Object1, Object2, Rot1, Rot2, Scale1,
    TexCoord, Texture, Thumb, Transform1, Vec3, decode, encode, objects, validate,
};
use half::f16;
use std::hint::black_box;
use std::time::Duration;

/// A payload under test: its typed objects and their canonical encoding.
struct Payload {
    /// Benchmark id suffix.
    name: &'static str,
    dialect: Dialect,
    objects: Vec<Object>,
    bytes: Vec<u8>,
}

impl Payload {
    /// Encodes `objects`, checking that the payload round-trips and that the scanner
    /// accepts it, so every benchmark measures the success path.
    fn new(name: &'static str, dialect: Dialect, objects: Vec<Object>) -> Self {
        let bytes = encode(&objects, dialect).expect("benchmark objects encode");
        assert_eq!(decode(&bytes, dialect).expect("decodes"), objects);
        assert_eq!(validate(&bytes, dialect).expect("scans"), objects.len());
        Payload {
            name,
            dialect,
            objects,
            bytes,
        }
    }
}

/// Rounds to the nearest Float16 so that typed round trips compare equal.
fn h(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

fn loc2(x: f32, y: f32, z: f32) -> Loc2 {
    Loc2 {
        x,
        y,
        z,
        vx: h(0.12),
        vy: h(-0.03),
        vz: h(0.4),
    }
}

fn rot2() -> Rot2 {
    Rot2 {
        si: h(0.0),
        sj: h(0.383),
        sk: h(0.0),
        ei: h(0.01),
        ej: h(0.39),
        ek: h(-0.005),
    }
}

fn joint(i: usize) -> Transform1 {
    let i = i as f32;
    Transform1 {
        tx: h(0.004 * i),
        ty: h(0.021 - 0.001 * i),
        tz: h(-0.018 + 0.002 * i),
    }
}

fn finger(base: usize) -> Finger {
    Finger {
        tip: joint(base),
        dip: joint(base + 1),
        pip: joint(base + 2),
        mcp: joint(base + 3),
        cmc: joint(base + 4),
    }
}

fn head1() -> Object {
    Object::Head1(Head1 {
        id: 1,
        time: 41_234,
        location: loc2(2.5, 1.68, -4.25),
        rotation: rot2(),
        ipd: Some(h(0.063)),
        extra: Default::default(),
    })
}

fn hand2(id: u64, left: bool) -> Object {
    let side = if left { -0.2 } else { 0.2 };
    Object::Hand2(Box::new(Hand2 {
        id,
        time: 41_234,
        left,
        location: loc2(2.5 + side, 1.2, -4.0),
        rotation: rot2(),
        wrist: joint(0),
        thumb: Thumb {
            tip: joint(1),
            ip: joint(2),
            mcp: joint(3),
            cmc: joint(4),
        },
        index: finger(5),
        middle: finger(10),
        ring: finger(15),
        pinky: finger(20),
        extra: Default::default(),
    }))
}

/// An icosahedron: 12 vertices; the first 7 of its faces (21 indexes).
fn icosahedron() -> (Vec<Vec3>, Vec<Vec3>, Vec<u64>) {
    let t = (1.0 + 5f32.sqrt()) / 2.0;
    let raw = [
        [-1.0, t, 0.0],
        [1.0, t, 0.0],
        [-1.0, -t, 0.0],
        [1.0, -t, 0.0],
        [0.0, -1.0, t],
        [0.0, 1.0, t],
        [0.0, -1.0, -t],
        [0.0, 1.0, -t],
        [t, 0.0, -1.0],
        [t, 0.0, 1.0],
        [-t, 0.0, -1.0],
        [-t, 0.0, 1.0],
    ];
    let n = (1.0 + t * t).sqrt();
    let vertices = raw
        .iter()
        .map(|[x, y, z]| Vec3 {
            x: x * 0.1,
            y: y * 0.1,
            z: z * 0.1,
        })
        .collect();
    let normals = raw
        .iter()
        .map(|[x, y, z]| Vec3 {
            x: h(x / n),
            y: h(y / n),
            z: h(z / n),
        })
        .collect();
    let triangles = vec![
        0, 11, 5, 0, 5, 1, 0, 1, 7, 0, 7, 10, 0, 10, 11, 1, 5, 9, 5, 11, 4,
    ];
    (vertices, normals, triangles)
}

fn mesh1(dialect: Dialect) -> Object {
    let (vertices, normals, triangles) = icosahedron();
    let (texture, textures) = match dialect {
        // A URL texture: the draft01 parser tries that reading first, so this is its
        // cheaper path (a payload-type texture is parsed twice).
        Dialect::Draft01 => (
            Some(Texture::Url("tex/crate.png".into())),
            (0..12)
                .map(|i| TexCoord::Float {
                    u: (i % 4) as f32 / 3.0,
                    v: (i / 4) as f32 / 2.0,
                })
                .collect(),
        ),
        // gse coordinates are VarUInt texel indexes; some take two bytes.
        Dialect::Gse => (
            None,
            (0..12)
                .map(|i| TexCoord::Index {
                    u: (i % 4) * 85,
                    v: (i / 4) * 127,
                })
                .collect(),
        ),
    };
    Object::Mesh1(Mesh1 {
        id: 1_001,
        texture,
        vertices,
        normals,
        textures,
        triangles,
        extra: Default::default(),
    })
}

/// The generic object: Object2 in draft01, Object1 in gse (which has no Object2).
fn prop(dialect: Dialect) -> Object {
    match dialect {
        Dialect::Draft01 => Object::Object2(Object2 {
            id: 1_000,
            time: 41_234,
            location: loc2(3.0, 0.9, -3.5),
            rotation: rot2(),
            scale: Loc2 {
                x: 1.0,
                y: 1.0,
                z: 1.0,
                ..Default::default()
            },
            active: true,
            parent: Some(1),
            extra: Default::default(),
        }),
        Dialect::Gse => Object::Object1(Object1 {
            id: 1_000,
            time: 41_234,
            position: Vec3 {
                x: 3.0,
                y: 0.9,
                z: -3.5,
            },
            rotation: Rot1 {
                i: h(0.0),
                j: h(0.383),
                k: h(0.0),
            },
            scale: Scale1::Axes(Vec3 {
                x: 1.0,
                y: 1.0,
                z: 1.0,
            }),
            active: true,
            parent: Some(1),
            extra: Default::default(),
        }),
    }
}

/// One player's state update: head (with IPD), both skeletal hands, a held object
/// parented to the head, and a small mesh.
fn mix(dialect: Dialect) -> Payload {
    let name = match dialect {
        Dialect::Draft01 => "draft01",
        Dialect::Gse => "gse",
    };
    let objects = vec![
        head1(),
        hand2(2, true),
        hand2(3, false),
        prop(dialect),
        mesh1(dialect),
    ];
    Payload::new(name, dialect, objects)
}

/// Iterates every object, touching what the relay's forwarding decision reads.
fn scan(payload: &[u8], dialect: Dialect) {
    for o in objects(payload, dialect) {
        let o = o.expect("benchmark payloads are valid");
        black_box(o.id);
        black_box(o.position);
    }
}

fn scan_decode_encode(g: &mut BenchmarkGroup<'_, WallTime>, p: &Payload) {
    let (bytes, d) = (&p.bytes[..], p.dialect);
    g.bench_function(format!("scan/{}", p.name), |b| {
        b.iter(|| scan(black_box(bytes), d))
    });
    g.bench_function(format!("decode/{}", p.name), |b| {
        b.iter(|| decode(black_box(bytes), d).expect("valid"))
    });
    g.bench_function(format!("encode/{}", p.name), |b| {
        b.iter(|| encode(black_box(&p.objects), d).expect("encodable"))
    });
}

/// The payload mix, as objects per second and as bytes per second.
fn codec(c: &mut Criterion) {
    let mixes = [mix(Dialect::Draft01), mix(Dialect::Gse)];
    for p in &mixes {
        eprintln!(
            "payload {}: {} objects, {} bytes",
            p.name,
            p.objects.len(),
            p.bytes.len()
        );
    }

    let mut g = c.benchmark_group("codec_objects");
    for p in &mixes {
        g.throughput(Throughput::Elements(p.objects.len() as u64));
        scan_decode_encode(&mut g, p);
    }
    g.finish();

    let mut g = c.benchmark_group("codec_bytes");
    for p in &mixes {
        g.throughput(Throughput::Bytes(p.bytes.len() as u64));
        scan_decode_encode(&mut g, p);
    }
    g.finish();
}

/// The scanner on payloads holding one object of a type.
fn scan_per_type(c: &mut Criterion) {
    let mut g = c.benchmark_group("scan_per_type");
    g.throughput(Throughput::Elements(1));
    for d in [Dialect::Draft01, Dialect::Gse] {
        let cases = [
            ("head1", head1()),
            ("hand2", hand2(2, true)),
            ("mesh1", mesh1(d)),
        ];
        for (name, o) in cases {
            let p = Payload::new(name, d, vec![o]);
            g.bench_function(format!("{name}/{d}"), |b| {
                b.iter(|| scan(black_box(&p.bytes), d))
            });
        }
    }
    g.finish();
}

/// Short runs so the whole suite takes about two minutes on two shared cores.
fn config() -> Criterion {
    Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = codec, scan_per_type
}
criterion_main!(benches);
