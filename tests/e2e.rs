//! End to end over HTTP and SRTP: a whole relay from `server::start` on loopback port 0,
//! Rust [`Client`]s joining through the HTTP API and speaking SRTP over UDP.

mod support;

use gsrelay::Interest;
use gsrelay::client::{Client, JoinOptions, Received};
use gsrelay::rtp::RtcpItem;
use gsrelay::serve::Server;
use gsrelay::token::Rights;
use gsrelay::wire::json::Hex;
use gsrelay::wire::{
    self, Dialect, Finger, GameControl1, Hand1, Hand2, Head1, HeadIpd1, Loc2, Mesh1, Mesh2, Object,
    Object1, Object2, Pointer, Rot1, Rot2, Scale1, SixDof1, Stick, TexCoord, Texture, ThreeDof1,
    Thumb, Transform1, Unknown, Vec3,
};
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;
use support::server::{PUBLISH, SUBSCRIBE, base, start, token};

/// How long a packet that must come may take.
const WAIT: Duration = Duration::from_secs(5);
/// How long to listen for a packet that must not come.
const QUIET: Duration = Duration::from_millis(300);

async fn join(server: &Server, room: &str, rights: Rights, opts: JoinOptions) -> Client {
    Client::join(&base(server), &token(room, rights), room, opts)
        .await
        .unwrap()
}

async fn publisher(server: &Server, room: &str, dialect: Dialect) -> Client {
    let opts = JoinOptions {
        dialect,
        ..JoinOptions::default()
    };
    join(server, room, PUBLISH, opts).await
}

/// A subscriber that has latched its address with an RR.
async fn subscriber(
    server: &Server,
    room: &str,
    dialect: Dialect,
    interest: Option<Interest>,
) -> Client {
    let opts = JoinOptions {
        dialect,
        interest,
        ..JoinOptions::default()
    };
    let mut c = join(server, room, SUBSCRIBE, opts).await;
    c.send_rr().await.unwrap();
    c
}

/// A publisher and a latched subscriber without interest in `room`, both in `dialect`.
async fn pair(server: &Server, room: &str, dialect: Dialect) -> (Client, Client) {
    let publisher = publisher(server, room, dialect).await;
    let subscriber = subscriber(server, room, dialect, None).await;
    (publisher, subscriber)
}

/// Asserts that the next packet `c` receives is `objects` from `ssrc`.
async fn assert_objects(c: &mut Client, ssrc: u32, objects: &[Object]) {
    assert_eq!(
        c.recv_objects(WAIT).await.unwrap(),
        Some((ssrc, objects.to_vec()))
    );
}

/// The next packet, which must be RTP: (SSRC, sequence number, payload).
async fn recv_rtp(c: &mut Client) -> (u32, u16, Vec<u8>) {
    match c.recv(WAIT).await.unwrap() {
        Some(Received::Rtp {
            ssrc, seq, payload, ..
        }) => (ssrc, seq, payload),
        other => panic!("expected RTP, got {other:?}"),
    }
}

/// Asserts that nothing at all arrives for [`QUIET`].
async fn assert_silent(c: &mut Client, what: &str) {
    let got = c.recv(QUIET).await.unwrap();
    assert!(got.is_none(), "{what}: unexpected {got:?}");
}

fn loc(x: f32) -> Loc2 {
    Loc2 {
        x,
        y: 1.5,
        z: -2.25,
        vx: 0.5,
        vy: -0.25,
        vz: 0.0,
    }
}

fn rot() -> Rot2 {
    Rot2 {
        si: 0.5,
        sj: 0.0,
        sk: -0.5,
        ei: 0.25,
        ej: 0.125,
        ek: 0.0,
    }
}

fn tf(t: f32) -> Transform1 {
    Transform1 {
        tx: t,
        ty: -t,
        tz: 0.5,
    }
}

fn finger(t: f32) -> Finger {
    Finger {
        tip: tf(t),
        dip: tf(t + 0.125),
        pip: tf(t + 0.25),
        mcp: tf(t + 0.375),
        cmc: tf(t + 0.5),
    }
}

fn head(id: u64, x: f32, ipd: Option<f32>) -> Object {
    Object::Head1(Head1 {
        id,
        time: 100,
        location: loc(x),
        rotation: rot(),
        ipd,
        extra: Hex::default(),
    })
}

fn hand1(id: u64, left: bool, x: f32) -> Object {
    Object::Hand1(Hand1 {
        id,
        time: 101,
        left,
        location: loc(x),
        rotation: rot(),
        extra: Hex::default(),
    })
}

fn hand2(id: u64) -> Object {
    Object::Hand2(Box::new(Hand2 {
        id,
        time: 102,
        left: true,
        location: loc(0.25),
        rotation: rot(),
        wrist: tf(0.0625),
        thumb: Thumb {
            tip: tf(0.125),
            ip: tf(0.25),
            mcp: tf(0.375),
            cmc: tf(0.5),
        },
        index: finger(0.0),
        middle: finger(0.25),
        ring: finger(0.5),
        pinky: finger(0.75),
        extra: Hex::default(),
    }))
}

fn object1(id: u64, dialect: Dialect, parent: Option<u64>) -> Object {
    Object::Object1(Object1 {
        id,
        time: 103,
        position: Vec3 {
            x: 1.0,
            y: 2.0,
            z: 3.0,
        },
        rotation: Rot1 {
            i: 0.5,
            j: 0.0,
            k: 0.25,
        },
        scale: match dialect {
            Dialect::Draft01 => Scale1::Uniform(2.0),
            Dialect::Gse => Scale1::Axes(Vec3 {
                x: 1.0,
                y: 2.0,
                z: 0.5,
            }),
        },
        active: true,
        parent,
        extra: Hex::default(),
    })
}

fn object2(id: u64, parent: Option<u64>) -> Object {
    Object::Object2(Object2 {
        id,
        time: 104,
        location: loc(4.0),
        rotation: rot(),
        scale: loc(1.0),
        active: false,
        parent,
        extra: Hex::default(),
    })
}

fn mesh1(id: u64, dialect: Dialect) -> Object {
    let (texture, textures) = match dialect {
        Dialect::Draft01 => (
            Some(Texture::Url("https://example.com/t.png".into())),
            vec![
                TexCoord::Float { u: 0.0, v: 0.0 },
                TexCoord::Float { u: 1.0, v: 0.0 },
                TexCoord::Float { u: 0.0, v: 1.0 },
            ],
        ),
        Dialect::Gse => (
            None,
            vec![
                TexCoord::Index { u: 0, v: 0 },
                TexCoord::Index { u: 1, v: 0 },
                TexCoord::Index { u: 0, v: 1 },
            ],
        ),
    };
    let v = |x, y| Vec3 { x, y, z: 0.0 };
    Object::Mesh1(Mesh1 {
        id,
        texture,
        vertices: vec![v(0.0, 0.0), v(1.0, 0.0), v(0.0, 1.0)],
        normals: vec![
            Vec3 {
                x: 0.0,
                y: 0.0,
                z: 1.0
            };
            3
        ],
        textures,
        triangles: vec![0, 1, 2],
        extra: Hex::default(),
    })
}

fn mesh2(id: u64, parent: Option<u64>) -> Object {
    Object::Mesh2(Mesh2 {
        id,
        location: loc(5.0),
        rotation: rot(),
        scale: loc(1.0),
        mesh_url: "https://example.com/chair.glb".into(),
        texture: Some(Texture::RtpPt(97)),
        parent,
        extra: Hex::default(),
    })
}

fn unknown(tag: u64, id: u8) -> Object {
    // The body starts with a one-byte VarUInt objectID.
    Object::Unknown(Unknown {
        tag,
        data: Hex(vec![id, 0xde, 0xad, 0xbe, 0xef]),
    })
}

/// One object of every type the dialect implements, optional parts both present and absent.
fn every_object(dialect: Dialect) -> Vec<Object> {
    match dialect {
        Dialect::Draft01 => vec![
            head(1, 0.5, None),
            head(2, 0.75, Some(0.0625)),
            hand1(3, true, -0.25),
            hand2(4),
            object1(5, dialect, None),
            object1(6, dialect, Some(5)),
            object2(7, None),
            object2(8, Some(7)),
            mesh1(9, dialect),
            mesh2(10, None),
            mesh2(11, Some(10)),
            Object::GameControl1(GameControl1 {
                id: 12,
                time: 105,
                buttons: -3,
                buttons_time: 99,
                left: Stick { x: 0.5, y: -0.5 },
                right: Stick { x: 0.0, y: 1.0 },
                extra: Hex::default(),
            }),
            Object::ThreeDof1(ThreeDof1 {
                id: 13,
                time: 106,
                left: false,
                rotation: rot(),
                extra: Hex::default(),
            }),
            sixdof(14, None),
            sixdof(
                15,
                Some(Pointer {
                    x: 1.0,
                    y: 0.5,
                    z: -3.0,
                    bare: false,
                }),
            ),
            Object::HeadIpd1(HeadIpd1 {
                ipd: 0.0625,
                extra: Hex::default(),
            }),
            unknown(200, 16),
            unknown(0x3fff, 17),
        ],
        Dialect::Gse => vec![
            head(1, 0.5, None),
            head(2, 0.75, Some(0.0625)),
            hand1(3, true, -0.25),
            hand2(4),
            object1(5, dialect, None),
            object1(6, dialect, Some(5)),
            mesh1(9, dialect),
            unknown(200, 16),
            unknown(0x3fff, 17),
        ],
    }
}

fn sixdof(id: u64, pointer: Option<Pointer>) -> Object {
    Object::SixDof1(SixDof1 {
        id,
        time: 107,
        left: true,
        location: loc(0.125),
        rotation: rot(),
        pointer,
        extra: Hex::default(),
    })
}

#[tokio::test]
async fn every_object_type_reaches_the_subscriber_byte_for_byte() {
    let server = start().await;
    for dialect in [Dialect::Draft01, Dialect::Gse] {
        let room = format!("types-{dialect}");
        let (mut publisher, mut sub) = pair(&server, &room, dialect).await;
        let objects = every_object(dialect);
        let all = wire::encode(&objects, dialect).unwrap();
        let payloads = objects
            .iter()
            .map(|o| wire::encode(std::slice::from_ref(o), dialect).unwrap())
            .chain([all]);
        for (i, payload) in payloads.enumerate() {
            publisher.send_payload(&payload).await.unwrap();
            let (ssrc, _, got) = recv_rtp(&mut sub).await;
            assert_eq!(ssrc, publisher.ssrc(), "{dialect} packet {i}");
            assert_eq!(
                hex::encode(&got),
                hex::encode(&payload),
                "{dialect} packet {i}"
            );
        }
        assert_eq!(sub.rejected(), 0);
    }
    server.shutdown().await.unwrap();
}

/// Receives the snapshot after a FIR: RTP packets from `ssrc` with consecutive sequence
/// numbers until `want` objects have arrived. Returns the objects by id and the last
/// sequence number.
async fn snapshot(c: &mut Client, ssrc: u32, want: usize) -> (HashMap<u64, Object>, u16) {
    let mut got = HashMap::new();
    let mut count = 0;
    let mut last: Option<u16> = None;
    while count < want {
        let (from, seq, payload) = recv_rtp(c).await;
        assert_eq!(from, ssrc);
        if let Some(last) = last {
            assert_eq!(
                seq,
                last.wrapping_add(1),
                "snapshot packets are consecutive"
            );
        }
        last = Some(seq);
        for o in wire::decode(&payload, c.dialect()).unwrap() {
            count += 1;
            let id = o.id().expect("only objects with an objectID are cached");
            assert!(
                got.insert(id, o).is_none(),
                "object {id} twice in the snapshot"
            );
        }
    }
    (got, last.unwrap())
}

#[tokio::test]
async fn late_joiner_fir_gets_the_latest_state_then_continuous_sequence_numbers() {
    let server = start().await;
    for dialect in [Dialect::Draft01, Dialect::Gse] {
        let room = format!("late-{dialect}");
        let (mut publisher, mut early) = pair(&server, &room, dialect).await;
        let mut latest = HashMap::new();
        let updates = every_object(dialect)
            .into_iter()
            .map(|o| vec![o])
            .chain([vec![head(1, 9.5, None), hand1(3, true, 4.0)]]);
        for objects in updates {
            publisher.send_objects(&objects).await.unwrap();
            // Once the early subscriber has the packet, the relay has stored it.
            assert_objects(&mut early, publisher.ssrc(), &objects).await;
            for o in objects {
                // A top-level HeadIPD1 has no objectID, so it is never cached.
                if let Some(id) = o.id() {
                    latest.insert(id, o);
                }
            }
        }

        let mut late = join(
            &server,
            &room,
            SUBSCRIBE,
            JoinOptions {
                dialect,
                ..JoinOptions::default()
            },
        )
        .await;
        assert_eq!(late.streams(), &[publisher.ssrc()]);
        // The FIR also latches the late joiner's address.
        late.send_fir(publisher.ssrc()).await.unwrap();
        let (got, last) = snapshot(&mut late, publisher.ssrc(), latest.len()).await;
        assert_eq!(got, latest, "{dialect}");

        // The next forwarded packet follows the snapshot's numbers.
        let next = vec![head(1, 10.5, None)];
        publisher.send_objects(&next).await.unwrap();
        let (ssrc, seq, payload) = recv_rtp(&mut late).await;
        assert_eq!(ssrc, publisher.ssrc());
        assert_eq!(seq, last.wrapping_add(1), "{dialect}");
        assert_eq!(wire::decode(&payload, dialect).unwrap(), next);
        assert_silent(&mut late, "after the live packet").await;
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn rooms_are_isolated_in_both_directions() {
    let server = start().await;
    let d = Dialect::Draft01;
    let (mut pa, mut sa) = pair(&server, "room-a", d).await;
    let (mut pb, mut sb) = pair(&server, "room-b", d).await;
    let state_a = vec![head(1, 1.0, None), hand1(2, true, 1.0)];
    let state_b = vec![head(1, -1.0, None), hand1(3, false, -1.0)];

    // Publishing in one room reaches only that room.
    pa.send_objects(&state_a).await.unwrap();
    assert_objects(&mut sa, pa.ssrc(), &state_a).await;
    pb.send_objects(&state_b).await.unwrap();
    assert_objects(&mut sb, pb.ssrc(), &state_b).await;
    assert_silent(&mut sa, "room a after room b published").await;
    assert_silent(&mut sb, "room b after room a published").await;

    for (sub, own, own_state, other) in [
        (&mut sa, pa.ssrc(), &state_a, pb.ssrc()),
        (&mut sb, pb.ssrc(), &state_b, pa.ssrc()),
    ] {
        // A FIR naming the other room's stream yields nothing.
        sub.send_fir(other).await.unwrap();
        assert_silent(sub, "FIR for another room's stream").await;
        // A FIR naming the relay yields this room's stream only.
        sub.send_fir(sub.relay_ssrc()).await.unwrap();
        let (got, _) = snapshot(sub, own, own_state.len()).await;
        let want: HashMap<u64, Object> = own_state
            .iter()
            .map(|o| (o.id().unwrap(), o.clone()))
            .collect();
        assert_eq!(got, want);
        assert_silent(sub, "after the room's snapshot").await;
    }
    // No FIR was passed on to either publisher: both streams had state.
    assert_silent(&mut pa, "publisher a").await;
    assert_silent(&mut pb, "publisher b").await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_denied_type_never_reaches_the_subscriber() {
    let server = start().await;
    let d = Dialect::Draft01;
    let room = "interest";
    let interest: Interest = serde_json::from_value(json!({"types": {"deny": ["Hand1"]}})).unwrap();
    let (mut publisher, mut all) = pair(&server, room, d).await;
    let mut picky = subscriber(&server, room, d, Some(interest)).await;

    let packets = [
        vec![
            head(1, 0.0, None),
            hand1(2, true, 0.0),
            hand1(3, false, 0.0),
        ],
        vec![hand1(2, true, 1.0), hand1(3, false, 1.0)],
        vec![hand1(2, true, 2.0), head(1, 2.0, None)],
    ];
    let mut last: Option<u16> = None;
    for objects in &packets {
        publisher.send_objects(objects).await.unwrap();
        // The unfiltered subscriber gets everything...
        assert_objects(&mut all, publisher.ssrc(), objects).await;
        let admitted: Vec<Object> = objects
            .iter()
            .filter(|o| !matches!(o, Object::Hand1(_)))
            .cloned()
            .collect();
        if admitted.is_empty() {
            // ...a packet of denied objects only is not forwarded (and takes no number).
            assert_silent(&mut picky, "a Hand1-only packet").await;
            continue;
        }
        let (ssrc, seq, payload) = recv_rtp(&mut picky).await;
        assert_eq!(ssrc, publisher.ssrc());
        assert_eq!(wire::decode(&payload, d).unwrap(), admitted);
        if let Some(last) = last {
            assert_eq!(seq, last.wrapping_add(1));
        }
        last = Some(seq);
    }
    // The snapshot is filtered too.
    picky.send_fir(publisher.ssrc()).await.unwrap();
    let (got, _) = snapshot(&mut picky, publisher.ssrc(), 1).await;
    assert_eq!(got, HashMap::from([(1, head(1, 2.0, None))]));
    assert_silent(&mut picky, "after the filtered snapshot").await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn deleting_the_publisher_sends_bye_to_the_subscriber() {
    let server = start().await;
    let d = Dialect::Draft01;
    let room = "bye";
    let (mut publisher, mut sub) = pair(&server, room, d).await;
    publisher.send_objects(&[head(1, 0.0, None)]).await.unwrap();
    let (ssrc, _, _) = recv_rtp(&mut sub).await;
    assert_eq!(ssrc, publisher.ssrc());

    let gone = publisher.ssrc();
    publisher.leave().await.unwrap();
    match sub.recv(WAIT).await.unwrap() {
        Some(Received::Rtcp(items)) => assert!(
            items
                .iter()
                .any(|i| matches!(i, RtcpItem::Bye { ssrcs } if ssrcs.contains(&gone))),
            "{items:?}"
        ),
        other => panic!("expected RTCP BYE, got {other:?}"),
    }
    server.shutdown().await.unwrap();
}
