//! The UDP transport end to end: a real relay task on loopback, clients with real SRTP,
//! sessions joined through the `RelayHandle` (no HTTP server needed).

mod support;

use gsrelay::client::{Client, Received};
use gsrelay::internal::Metrics;
use gsrelay::internal::command::{
    CommandError, JoinAnswer, JoinCommand, SrtpKeys, TransportRequest,
};
use gsrelay::internal::shard::{self, ShardTask};
use gsrelay::internal::udp::UdpConfig;
use gsrelay::rtp::{KeyMaterial, RtcpItem, SrtpProfile, SrtpSession};
use gsrelay::wire::{
    self, Dialect, GameControl1, Hand1, Head1, Loc2, Object, Object1, Rot1, Rot2, Scale1, Vec3,
};
use gsrelay::{JoinRequest, Relay, RelayConfig};
use std::collections::HashMap;
use std::time::Duration;
use support::srtp::Copying;
use tokio::net::UdpSocket;

const WAIT: Duration = Duration::from_secs(5);
/// How long to listen for a packet that must not come.
const QUIET: Duration = Duration::from_millis(300);

struct Harness {
    t: ShardTask,
    metrics: Metrics,
}

async fn relay(insecure_plain_rtp: bool) -> Harness {
    let metrics = Metrics::new();
    let relay = Relay::new(RelayConfig::default(), 7);
    let cfg = UdpConfig {
        insecure_plain_rtp,
        ..UdpConfig::new("127.0.0.1:0".parse().unwrap())
    };
    let t = shard::spawn(cfg, relay, metrics.clone()).await.unwrap();
    Harness { t, metrics }
}

impl Harness {
    async fn answer(
        &self,
        publish: bool,
        subscribe: bool,
        profile: Option<SrtpProfile>,
    ) -> JoinAnswer {
        let request = JoinRequest {
            room: "r".into(),
            identity: "someone".into(),
            publish,
            subscribe,
            ..JoinRequest::default()
        };
        self.t
            .handle
            .join(JoinCommand {
                request,
                generation: 0,
                metadata: None,
                transport: TransportRequest::Rtp(profile),
            })
            .await
            .unwrap()
    }

    async fn client(&self, publish: bool, subscribe: bool, profile: SrtpProfile) -> Client {
        let answer = self.answer(publish, subscribe, Some(profile)).await;
        Client::from_answer(answer, Dialect::Draft01).await.unwrap()
    }

    fn dropped(&self, reason: &str) -> u64 {
        self.metrics.dropped.with_label_values(&[reason]).get()
    }

    /// A publisher and a latched subscriber, shown to work with one update (head 1 at
    /// x = 1); the sequence number the subscriber got it under.
    async fn flowing(&self, profile: SrtpProfile) -> (Client, Client, u16) {
        let mut publisher = self.client(true, false, profile).await;
        let mut sub = self.client(false, true, profile).await;
        sub.send_rr().await.unwrap();
        publisher.send_objects(&[head(1, 1.0)]).await.unwrap();
        let first = sub.recv(WAIT).await.unwrap();
        let Some(Received::Rtp { ssrc, seq, .. }) = first else {
            panic!("{profile}: {first:?}");
        };
        assert_eq!(ssrc, publisher.ssrc(), "{profile}");
        (publisher, sub, seq)
    }
}

fn head(id: u64, x: f32) -> Object {
    Object::Head1(Head1 {
        id,
        time: 7,
        location: Loc2 {
            x,
            y: 1.5,
            z: -2.0,
            ..Loc2::default()
        },
        rotation: Rot2 {
            si: 0.5,
            ..Rot2::default()
        },
        ..Head1::default()
    })
}

fn objects() -> Vec<Object> {
    vec![
        head(1, 0.25),
        Object::Hand1(Hand1 {
            id: 2,
            left: true,
            ..Hand1::default()
        }),
        Object::Object1(Object1 {
            id: 3,
            position: Vec3 {
                x: 1.0,
                y: 2.0,
                z: 3.0,
            },
            rotation: Rot1::default(),
            scale: Scale1::default(),
            active: true,
            ..Object1::default()
        }),
        Object::GameControl1(GameControl1 {
            id: 4,
            buttons: 5,
            ..GameControl1::default()
        }),
    ]
}

/// Receives RTP packets until `want` objects (by id) have arrived from `ssrc`, keeping the
/// latest of each; panics on timeout.
async fn collect(c: &mut Client, ssrc: u32, want: usize) -> HashMap<u64, Object> {
    let mut got = HashMap::new();
    while got.len() < want {
        let (from, objs) = c
            .recv_objects(WAIT)
            .await
            .unwrap()
            .expect("timed out waiting for objects");
        assert_eq!(from, ssrc);
        for o in objs {
            got.insert(o.id().unwrap(), o);
        }
    }
    got
}

#[tokio::test]
async fn publish_subscribe_over_srtp_with_both_profiles() {
    for profile in SrtpProfile::ALL {
        let h = relay(false).await;
        let mut publisher = h.client(true, false, profile).await;
        let mut sub = h.client(false, true, profile).await;
        sub.send_rr().await.unwrap();
        let sent = objects();
        publisher.send_objects(&sent).await.unwrap();
        let Some(Received::Rtp { ssrc, payload, .. }) = sub.recv(WAIT).await.unwrap() else {
            panic!("{profile}: no RTP packet");
        };
        assert_eq!(ssrc, publisher.ssrc());
        assert_eq!(
            gsrelay::wire::decode(&payload, Dialect::Draft01).unwrap(),
            sent
        );
        // A second update: same stream, next sequence number.
        publisher.send_objects(&[head(1, 9.0)]).await.unwrap();
        assert_eq!(
            sub.recv_objects(WAIT).await.unwrap(),
            Some((publisher.ssrc(), vec![head(1, 9.0)]))
        );
        let m = &h.metrics;
        assert_eq!(
            m.packets.with_label_values(&["udp", "in"]).get(),
            3,
            "{profile}"
        );
        assert_eq!(
            m.packets.with_label_values(&["udp", "out"]).get(),
            2,
            "{profile}"
        );
        assert!(m.bytes.with_label_values(&["udp", "out"]).get() > 0);
        assert_eq!(m.latency("udp").get_sample_count(), 3);
        assert_eq!(sub.rejected(), 0);
    }
}

#[tokio::test]
async fn late_joiner_fir_gets_the_latest_state() {
    let h = relay(false).await;
    let profile = SrtpProfile::AeadAes128Gcm;
    let mut publisher = h.client(true, false, profile).await;
    let mut early = h.client(false, true, profile).await;
    early.send_rr().await.unwrap();
    publisher.send_objects(&objects()).await.unwrap();
    publisher.send_objects(&[head(1, 42.0)]).await.unwrap();
    // Once the early subscriber has both packets, the relay has stored them.
    collect(&mut early, publisher.ssrc(), 4).await;
    early.recv(WAIT).await.unwrap().expect("second update");

    let mut expected: HashMap<u64, Object> = objects()
        .into_iter()
        .map(|o| (o.id().unwrap(), o))
        .collect();
    expected.insert(1, head(1, 42.0));

    let mut late = h.client(false, true, profile).await;
    assert_eq!(late.streams(), &[publisher.ssrc()]);
    // A FIR naming the relay asks for every stream; it also latches the late joiner.
    late.send_fir(late.relay_ssrc()).await.unwrap();
    assert_eq!(collect(&mut late, publisher.ssrc(), 4).await, expected);
    // A FIR naming the stream, with the next FIR sequence number.
    late.send_fir(publisher.ssrc()).await.unwrap();
    assert_eq!(collect(&mut late, publisher.ssrc(), 4).await, expected);
    assert_eq!(h.metrics.snapshots.get(), 2);
}

/// The forger knows the victims' SSRCs but not their keys, and sends first: RTCP for a
/// subscriber and RTP for a publisher spread over the sequence space (one of them far
/// ahead of wherever the publisher starts). Neither latches nor moves a replay window, so
/// the victims' first genuine packets pass: the relay keeps one SRTP context per session
/// from its join on.
#[tokio::test]
async fn wrong_key_is_dropped_and_neither_latches_nor_poisons_the_victims() {
    for profile in SrtpProfile::ALL {
        forgeries_ahead_of_the_victims(profile).await;
    }
}

async fn forgeries_ahead_of_the_victims(profile: SrtpProfile) {
    let h = relay(false).await;
    let mut publisher = h.client(true, false, profile).await;
    let victim = h.answer(false, true, Some(profile)).await;

    let wrong = KeyMaterial::generate(profile).unwrap();
    let mut forger = SrtpSession::for_client(profile, &wrong, &wrong).unwrap();
    let mut rr = Vec::new();
    gsrelay::rtp::rtcp::write_rr(&mut rr, victim.joined.ssrc, &[]).unwrap();
    let forged = forger.seal_rtcp(&rr).unwrap();
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.send_to(&forged, h.t.local_addr).await.unwrap();
    for seq in [0u16, 0x4000, 0x8000, 0xc000] {
        let mut rtp = vec![0x80, 96];
        rtp.extend_from_slice(&seq.to_be_bytes());
        rtp.extend_from_slice(&[0; 4]);
        rtp.extend_from_slice(&publisher.ssrc().to_be_bytes());
        rtp.extend_from_slice(b"forged payload");
        let forged = forger.seal_rtp(&rtp).unwrap();
        socket.send_to(&forged, h.t.local_addr).await.unwrap();
    }

    // The victim latches from its own address and receives normally.
    let mut victim = Client::from_answer(victim, Dialect::Draft01).await.unwrap();
    victim.send_rr().await.unwrap();
    publisher.send_objects(&[head(1, 1.0)]).await.unwrap();
    assert_eq!(
        victim.recv_objects(WAIT).await.unwrap(),
        Some((publisher.ssrc(), vec![head(1, 1.0)])),
        "{profile}"
    );
    assert_eq!(h.dropped("auth_failed"), 5, "{profile}");
    assert_eq!(h.dropped("replay"), 0, "{profile}");
    // Nothing was ever sent to the forger.
    assert_silent(&socket).await;
}

/// A NACK is answered with the current state under a fresh sequence number: re-sending
/// under the lost one would seal one SRTP index twice (keystream reuse; under GCM it would
/// reveal the authentication key), which SRTP refuses.
#[tokio::test]
async fn a_nack_over_srtp_is_answered_under_a_fresh_index() {
    for profile in SrtpProfile::ALL {
        let h = relay(false).await;
        let (publisher, mut sub, seq) = h.flowing(profile).await;
        sub.send_nack(publisher.ssrc(), &[seq]).await.unwrap();
        let Some(Received::Rtp {
            seq: repair,
            payload,
            ..
        }) = sub.recv(WAIT).await.unwrap()
        else {
            panic!("{profile}: no repair");
        };
        assert_eq!(repair, seq.wrapping_add(1), "{profile}: a fresh number");
        assert_eq!(
            wire::decode(&payload, Dialect::Draft01).unwrap(),
            vec![head(1, 1.0)]
        );
        assert_eq!(h.dropped("index_reuse"), 0, "{profile}");
    }
}

/// Asserts that nothing arrives on `socket` for [`QUIET`].
async fn assert_silent(socket: &UdpSocket) {
    let mut buf = [0u8; 2048];
    let got = tokio::time::timeout(QUIET, socket.recv_from(&mut buf)).await;
    assert!(got.is_err(), "{:?} received {got:?}", socket.local_addr());
}

fn moves(h: &Harness) -> u64 {
    h.metrics.address_moves.with_label_values(&["udp"]).get()
}

/// A client whose address changed: the session, its SSRC and its numbering carry on, the
/// room sees no BYE, and the old address is sent nothing more.
#[tokio::test]
async fn an_authenticated_packet_from_a_new_address_moves_the_session() {
    for profile in SrtpProfile::ALL {
        let h = relay(false).await;
        let (mut publisher, mut sub, seq1) = h.flowing(profile).await;
        // The publisher moves: its next packet, from the new address, goes on as before.
        publisher.rebind().unwrap();
        publisher.send_objects(&[head(1, 2.0)]).await.unwrap();
        let next = sub.recv(WAIT).await.unwrap();
        let Some(Received::Rtp { ssrc, seq, .. }) = next else {
            panic!("{profile}: no BYE, the stream goes on: {next:?}");
        };
        assert_eq!(
            (ssrc, seq),
            (publisher.ssrc(), seq1.wrapping_add(1)),
            "{profile}"
        );
        // The subscriber moves; a socket on its old address hears nothing more.
        let old = sub.local_addr().unwrap();
        sub.rebind().unwrap();
        let spy = UdpSocket::bind(old).await.unwrap();
        sub.send_rr().await.unwrap();
        // The relay heard the RR from the new address once it counts the move.
        let deadline = tokio::time::Instant::now() + WAIT;
        while moves(&h) < 2 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{profile}: no move counted"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        publisher.send_objects(&[head(1, 3.0)]).await.unwrap();
        assert_eq!(
            sub.recv_objects(WAIT).await.unwrap(),
            Some((publisher.ssrc(), vec![head(1, 3.0)])),
            "{profile}"
        );
        assert_silent(&spy).await;
        assert_eq!(moves(&h), 2, "{profile}");
    }
}

/// A copy of a packet the relay already took, sent from elsewhere, moves nothing: the
/// replay window refuses it before the address could change.
#[tokio::test]
async fn a_replayed_packet_from_another_address_moves_nothing() {
    let h = relay(false).await;
    let profile = SrtpProfile::AeadAes128Gcm;
    let answer = h.answer(false, true, Some(profile)).await;
    let keys = answer.srtp().unwrap().clone();
    let mut sub = Client::from_answer(answer, Dialect::Draft01).await.unwrap();
    let mut publisher = h.client(true, false, profile).await;
    // What the subscriber's first RR looks like on the wire: the same keys, the same index.
    let client = KeyMaterial::from_base64(profile, &keys.client_key).unwrap();
    let relay_key = KeyMaterial::from_base64(profile, &keys.relay_key).unwrap();
    let mut mirror = SrtpSession::for_client(profile, &client, &relay_key).unwrap();
    let mut rr = Vec::new();
    gsrelay::rtp::rtcp::write_rr(&mut rr, sub.ssrc(), &[]).unwrap();
    let copy = mirror.seal_rtcp(&rr).unwrap();
    sub.send_rr().await.unwrap();
    publisher.send_objects(&[head(1, 1.0)]).await.unwrap();
    assert!(sub.recv_objects(WAIT).await.unwrap().is_some());
    let elsewhere = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    elsewhere.send_to(&copy, h.t.local_addr).await.unwrap();
    publisher.send_objects(&[head(1, 2.0)]).await.unwrap();
    assert_eq!(
        sub.recv_objects(WAIT).await.unwrap(),
        Some((publisher.ssrc(), vec![head(1, 2.0)])),
        "the session stayed where it was"
    );
    assert_eq!(h.dropped("replay"), 1);
    assert_eq!(moves(&h), 0);
    assert_silent(&elsewhere).await;
}

/// Forged packets from other addresses: a few are authenticated and fail, the rest of a
/// flood is dropped unopened; the session never moves.
#[tokio::test]
async fn a_flood_of_forgeries_from_other_addresses_is_bounded_and_moves_nothing() {
    let h = relay(false).await;
    let profile = SrtpProfile::AesCm128HmacSha1_80;
    let (mut publisher, mut sub, _) = h.flowing(profile).await;
    let wrong = KeyMaterial::generate(profile).unwrap();
    let mut forger = SrtpSession::for_client(profile, &wrong, &wrong).unwrap();
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let flood = 200u64;
    for _ in 0..flood {
        let mut rr = Vec::new();
        gsrelay::rtp::rtcp::write_rr(&mut rr, sub.ssrc(), &[]).unwrap();
        socket
            .send_to(&forger.seal_rtcp(&rr).unwrap(), h.t.local_addr)
            .await
            .unwrap();
    }
    // The relay reads its socket in order: once the publisher's next packet is through,
    // the flood before it has been counted.
    publisher.send_objects(&[head(1, 2.0)]).await.unwrap();
    assert_eq!(
        sub.recv_objects(WAIT).await.unwrap(),
        Some((publisher.ssrc(), vec![head(1, 2.0)]))
    );
    // A shard exports its counts after its next input: keep it busy until they are in.
    let deadline = tokio::time::Instant::now() + WAIT;
    let refused = || h.dropped("auth_failed") + h.dropped("replay") + h.dropped("address_mismatch");
    while refused() < flood {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the flood is not all counted"
        );
        sub.send_rr().await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(refused(), flood);
    // Within one second at most MOVE_TRIES_PER_SEC were opened (two seconds' worth if
    // the flood straddled a second's turn).
    // Those opened failed by their tag or, an index the session already used, as replays.
    let tried = h.dropped("auth_failed") + h.dropped("replay");
    assert!(
        tried >= 1 && tried <= 2 * u64::from(gsrelay::internal::udp::MOVE_TRIES_PER_SEC),
        "{tried}"
    );
    assert_eq!(moves(&h), 0);
}

/// xorshift64: a fixed-seed source for the noise test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[tokio::test]
async fn random_datagrams_do_not_disturb_a_working_pair() {
    let h = relay(false).await;
    let profile = SrtpProfile::AesCm128HmacSha1_80;
    let mut publisher = h.client(true, false, profile).await;
    let mut sub = h.client(false, true, profile).await;
    sub.send_rr().await.unwrap();
    let known = [publisher.ssrc(), sub.ssrc(), sub.relay_ssrc()];
    let noise = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut datagram = Vec::new();
    // 100 rounds of 100: small enough bursts that the relay's receive buffer never
    // overflows, so the pair's packets cannot be lost to the kernel.
    for round in 0..100u16 {
        for _ in 0..100 {
            let len = (rng.next() % 1500) as usize;
            datagram.clear();
            datagram.extend((0..len).map(|_| rng.next() as u8));
            match rng.next() % 3 {
                // RTP or RTCP looking, with a known session's SSRC.
                0 if len >= 12 => {
                    datagram[0] = 0x80;
                    let ssrc = known[(rng.next() % 3) as usize].to_be_bytes();
                    let at = if (192..=223).contains(&datagram[1]) {
                        4
                    } else {
                        8
                    };
                    datagram[at..at + 4].copy_from_slice(&ssrc);
                }
                // Version 2 with a random SSRC.
                1 if len >= 2 => datagram[0] = 0x80 | (datagram[0] & 0x3f),
                _ => {}
            }
            noise.send_to(&datagram, h.t.local_addr).await.unwrap();
        }
        let update = head(1, f32::from(round));
        publisher
            .send_objects(std::slice::from_ref(&update))
            .await
            .unwrap();
        assert_eq!(
            sub.recv_objects(WAIT).await.unwrap(),
            Some((publisher.ssrc(), vec![update])),
            "round {round}"
        );
    }
    assert_eq!(
        h.metrics.packets.with_label_values(&["udp", "in"]).get(),
        10_000 + 100 + 1
    );
    // Every noise datagram was dropped and counted, and nothing of the pair's was.
    let dropped: f64 = h
        .metrics
        .registry
        .gather()
        .iter()
        .filter(|f| f.name() == "gsrelay_dropped_packets_total")
        .flat_map(|f| f.get_metric())
        .map(|m| m.get_counter().get_value())
        .sum();
    assert_eq!(dropped, 10_000.0);
    assert_eq!(sub.rejected(), 0);
}

#[tokio::test]
async fn leaving_sends_bye_to_the_others() {
    let h = relay(false).await;
    let profile = SrtpProfile::AesCm128HmacSha1_80;
    let mut publisher = h.client(true, false, profile).await;
    let mut sub = h.client(false, true, profile).await;
    sub.send_rr().await.unwrap();
    publisher.send_objects(&[head(1, 1.0)]).await.unwrap();
    sub.recv_objects(WAIT)
        .await
        .unwrap()
        .expect("the stream's first packet");
    h.t.handle.leave(publisher.session()).await.unwrap();
    let Some(Received::Rtcp(items)) = sub.recv(WAIT).await.unwrap() else {
        panic!("no RTCP after leave");
    };
    assert!(
        items
            .iter()
            .any(|i| matches!(i, RtcpItem::Bye { ssrcs } if ssrcs.contains(&publisher.ssrc()))),
        "{items:?}"
    );
    assert!(
        h.t.handle
            .room_info("r".into())
            .await
            .unwrap()
            .unwrap()
            .streams
            .is_empty()
    );
}

#[tokio::test]
async fn plain_rtp_only_when_allowed() {
    let h = relay(false).await;
    let request = JoinRequest {
        room: "r".into(),
        publish: true,
        ..JoinRequest::default()
    };
    let refused =
        h.t.handle
            .join(JoinCommand {
                request,
                generation: 0,
                metadata: None,
                transport: TransportRequest::Rtp(None),
            })
            .await;
    assert_eq!(refused, Err(CommandError::PlainRtpDisabled));

    let h = relay(true).await;
    let answer = h.answer(true, false, None).await;
    assert_eq!(answer.srtp(), None);
    assert_eq!(answer.rtp_addr(), Some(h.t.local_addr));
    let mut publisher = Client::from_answer(answer, Dialect::Draft01).await.unwrap();
    let answer = h.answer(false, true, None).await;
    let mut sub = Client::from_answer(answer, Dialect::Draft01).await.unwrap();
    sub.send_rr().await.unwrap();
    publisher.send_objects(&[head(1, 3.0)]).await.unwrap();
    assert_eq!(
        sub.recv_objects(WAIT).await.unwrap(),
        Some((publisher.ssrc(), vec![head(1, 3.0)]))
    );
    // A plain session cannot prove a move: from another address it is dropped unopened.
    publisher.rebind().unwrap();
    publisher.send_objects(&[head(1, 4.0)]).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while h.dropped("address_mismatch") < 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the moved plain packet was taken"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(moves(&h), 0);
}

#[tokio::test]
async fn srtp_answer_matches_the_asked_profile() {
    let h = relay(false).await;
    let answer = h.answer(true, true, Some(SrtpProfile::AeadAes128Gcm)).await;
    let Some(SrtpKeys {
        profile,
        client_key,
        relay_key,
    }) = answer.srtp().cloned()
    else {
        panic!("no keys");
    };
    assert_eq!(profile, SrtpProfile::AeadAes128Gcm);
    assert_ne!(client_key, relay_key);
    KeyMaterial::from_base64(profile, &client_key).unwrap();
    KeyMaterial::from_base64(profile, &relay_key).unwrap();
    assert_eq!(
        h.t.handle
            .session_owner(answer.joined.session)
            .await
            .unwrap()
            .map(|o| o.room),
        Some("r".to_owned())
    );
    assert_eq!(h.t.handle.drain().await.unwrap(), 1);
}

#[tokio::test]
async fn the_task_ends_when_every_handle_is_dropped() {
    let h = relay(false).await;
    drop(h.t.handle);
    tokio::time::timeout(WAIT, h.t.task).await.unwrap().unwrap();
}
