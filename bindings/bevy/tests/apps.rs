//! Headless Bevy apps (`MinimalPlugins`, `App::update` in a loop until a condition holds
//! or a deadline passes) against a real relay started in this process on loopback: two
//! apps see each other's entities move, predicted between updates; a late app gets the
//! whole room from the relay's cache; a stream that ends despawns its entities; garbage
//! settings and a refused join are told, not panicked on.

use bevy::prelude::*;
use gsrelay_bevy::*;
use gsrelay_server::serve::{self, ServeConfig, Server};
use gsrelay_server::token::{Rights, Tokens};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SECRET: &str = "gsrelay-bevy-test-secret-0123456789abcdef";

/// How long any one condition may take on a loaded 2-core machine.
const DEADLINE: Duration = Duration::from_secs(30);

/// A relay on loopback port 0, on a runtime of its own that lives as long as it does.
struct Relay {
    base: String,
    server: Option<Server>,
    runtime: tokio::runtime::Runtime,
}

fn config(http_addr: std::net::SocketAddr) -> ServeConfig {
    let local = "127.0.0.1:0".parse().expect("an address");
    ServeConfig {
        http_addr,
        rtp_addr: local,
        quic_addr: local,
        webrtc_addr: local,
        token_secret: Some(SECRET.into()),
        drain_grace_secs: 0,
        // A shard descheduled on a busy test machine must not shed the test's packets.
        udp_max_queue_delay_ms: 250,
        ..ServeConfig::default()
    }
}

fn relay() -> Relay {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime for the relay");
    let local = "127.0.0.1:0".parse().expect("an address");
    let server = runtime
        .block_on(serve::start(config(local)))
        .expect("the relay starts");
    Relay {
        base: format!("http://{}", server.http_addr),
        server: Some(server),
        runtime,
    }
}

impl Relay {
    /// Stops the relay (it forgets every session and object) and starts a new one on the
    /// same HTTP address, as a restarted process or another node behind a Service.
    fn restart(&mut self) {
        let old = self.server.take().expect("running");
        let http = old.http_addr;
        self.runtime
            .block_on(old.shutdown())
            .expect("the relay stops");
        let new = self
            .runtime
            .block_on(serve::start(config(http)))
            .expect("the relay starts again");
        self.server = Some(new);
    }
}

fn token(room: &str, identity: &str, publish: bool) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    let rights = Rights {
        publish,
        subscribe: true,
        admin: false,
    };
    Tokens::new(SECRET.as_bytes())
        .expect("a long secret")
        .issue(room, identity, rights, 600, now)
        .expect("a token")
}

/// Moves its entity round a circle of `radius` about the origin, `phase` radians on.
#[derive(Component)]
struct Orbit {
    radius: f32,
    phase: f32,
}

fn orbit(time: Res<Time>, mut movers: Query<(&Orbit, &mut Transform)>) {
    for (o, mut t) in &mut movers {
        let a = o.phase + time.elapsed_secs();
        t.translation = Vec3::new(o.radius * a.cos(), 0.5, o.radius * a.sin());
        t.rotation = Quat::from_rotation_y(a);
    }
}

/// What an app's messages said.
#[derive(Resource, Default)]
struct Seen {
    joined: Vec<Joined>,
    removed: Vec<ObjectRemoved>,
    streams_ended: Vec<u32>,
    ownership: Vec<Ownership>,
    reconnected: Vec<(Reconnected, Instant)>,
    ended: Vec<SessionEnded>,
}

fn record(
    mut joined: MessageReader<Joined>,
    mut removed: MessageReader<ObjectRemoved>,
    mut streams: MessageReader<StreamEnded>,
    mut ownership: MessageReader<Ownership>,
    mut reconnected: MessageReader<Reconnected>,
    mut ended: MessageReader<SessionEnded>,
    mut seen: ResMut<Seen>,
) {
    seen.joined.extend(joined.read().cloned());
    seen.removed.extend(removed.read().copied());
    seen.streams_ended.extend(streams.read().map(|s| s.ssrc));
    seen.ownership.extend(ownership.read().copied());
    let now = Instant::now();
    seen.reconnected
        .extend(reconnected.read().map(|r| (*r, now)));
    seen.ended.extend(ended.read().cloned());
}

/// Frames run while joined (a system under the `relay_joined` run condition).
#[derive(Resource, Default)]
struct JoinedFrames(u64);

/// A join of `room` at `base` as `identity`, allowed to publish or not.
fn connect(base: &str, room: &str, identity: &str, publish: bool) -> Connect {
    Connect::new(base, token(room, identity, publish), room)
}

/// A headless app joined to `room` at `base`, publishing an orbiting object `publish`
/// (objectID, phase) if given.
fn app(base: &str, room: &str, identity: &str, publish: Option<(u64, f32)>) -> App {
    app_with(connect(base, room, identity, publish.is_some()), publish)
}

/// A headless app joined with `connect`, publishing an orbiting object `publish`
/// (objectID, phase) if given.
fn app_with(connect: Connect, publish: Option<(u64, f32)>) -> App {
    let settings = SyncSettings {
        publish_hz: 30.0,
        ..SyncSettings::default()
    };
    let mut app = App::new();
    app.add_plugins((
        MinimalPlugins,
        GsRelayPlugin::new(settings).expect("valid settings"),
    ))
    .insert_resource(RelayClient::connect(connect).expect("valid settings"))
    .init_resource::<Seen>()
    .init_resource::<JoinedFrames>()
    .add_systems(Update, (orbit, record))
    .add_systems(
        Update,
        (|mut n: ResMut<JoinedFrames>| n.0 += 1).run_if(relay_joined),
    );
    if let Some((object_id, phase)) = publish {
        app.world_mut().spawn((
            Publish::object(object_id),
            Transform::default(),
            Orbit { radius: 2.0, phase },
        ));
    }
    app
}

/// Updates `apps` frame after frame (at most 200 a second) until `done` holds; fails the
/// test with `what` past the deadline.
fn run_until(apps: &mut [&mut App], what: &str, mut done: impl FnMut(&mut [&mut App]) -> bool) {
    let start = Instant::now();
    loop {
        for app in apps.iter_mut() {
            app.update();
        }
        if done(apps) {
            return;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "{what}: not within {DEADLINE:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn ssrc(app: &App) -> Option<u32> {
    app.world().resource::<RelayClient>().ssrc()
}

/// The entity of object `id` of stream `ssrc` in `app`, with its component and transform.
fn remote(app: &mut App, ssrc: u32, id: u64) -> Option<(RemoteObject, Transform)> {
    let entity = app.world().resource::<RemoteObjects>().get(ssrc, id)?;
    let mut q = app.world_mut().query::<(&RemoteObject, &Transform)>();
    let (r, t) = q.get(app.world(), entity).ok()?;
    Some((r.clone(), *t))
}

/// The transform of the entity `app` publishes.
fn published(app: &mut App) -> Transform {
    let mut q = app
        .world_mut()
        .query_filtered::<&Transform, With<Publish>>();
    *q.single(app.world()).expect("one published entity")
}

fn position(o: &Object) -> Vec3 {
    Vec3::from_array(o.position().expect("a positioned object"))
}

#[test]
fn two_apps_see_each_other_move_and_a_late_app_gets_the_room() {
    let relay = relay();
    let room = "bevy-two";
    let mut a = app(&relay.base, room, "alice", Some((1, 0.0)));
    let mut b = app(&relay.base, room, "bob", Some((2, std::f32::consts::PI)));

    run_until(&mut [&mut a, &mut b], "both joined", |apps| {
        apps.iter().all(|app| ssrc(app).is_some())
    });
    let (sa, sb) = (ssrc(&a).unwrap_or(0), ssrc(&b).unwrap_or(0));
    assert_ne!(sa, sb);
    assert_eq!(a.world().resource::<Seen>().joined[0].ssrc, sa);

    // Each sees the other's object move, where the other has it, and between two
    // updates the prediction moves it on.
    let mut moved = [Vec::new(), Vec::new()];
    let mut predicted = [0, 0];
    let mut last: [Option<(u64, Vec3)>; 2] = [None, None];
    run_until(&mut [&mut a, &mut b], "each sees the other move", |apps| {
        for (k, (viewer, other, id)) in [(0, 1, 2), (1, 0, 1)].into_iter().enumerate() {
            let other_ssrc = if other == 1 { sb } else { sa };
            let truth = published(apps[other]).translation;
            let Some((r, t)) = remote(apps[viewer], other_ssrc, id) else {
                continue;
            };
            if let Some((updates, at)) = last[k]
                && updates == r.updates
                && at.distance(t.translation) > 1e-4
            {
                predicted[k] += 1;
            }
            last[k] = Some((r.updates, t.translation));
            // At 1 rad/s on a 2 m circle, an update 1/30 s old is 7 cm behind: the
            // prediction keeps the view much closer than that; a loaded machine less so.
            if t.translation.distance(truth) < 0.25 {
                moved[k].push(t.translation);
            }
        }
        moved.iter().all(|m| {
            m.len() >= 2
                && m.first()
                    .zip(m.last())
                    .is_some_and(|(f, l)| f.distance(*l) > 0.5)
        }) && predicted.iter().all(|&p| p >= 3)
    });
    // Nobody gets its own object back.
    assert!(remote(&mut a, sa, 1).is_none() && remote(&mut b, sb, 2).is_none());

    // A late app, while the two publish nothing (their apps are not updated): only the
    // relay's cache can give it both objects, where their publishers left them.
    let mut c = app(&relay.base, room, "carol", None);
    run_until(&mut [&mut c], "the late app has the room", |apps| {
        remote(apps[0], sa, 1).is_some() && remote(apps[0], sb, 2).is_some()
    });
    for (app, ssrc, id) in [(&mut a, sa, 1), (&mut b, sb, 2)] {
        let (r, _) = remote(&mut c, ssrc, id).expect("in the room");
        let at = published(app).translation;
        // The last publish was at most one publish interval (and a frame) before the
        // publisher's last frame.
        assert!(
            position(&r.object).distance(at) < 0.2,
            "{:?} vs {at}",
            r.object
        );
        assert_eq!(r.updates, 1, "one snapshot, nothing live");
    }

    // Bob leaves: his stream ends, and Alice's and Carol's entities of it go.
    b.world().resource::<RelayClient>().leave().expect("joined");
    run_until(&mut [&mut a, &mut b, &mut c], "bob's object gone", |apps| {
        apps[1].world().resource::<Seen>().ended.len() == 1
            && [0, 2].iter().all(|&k| {
                let seen = apps[k].world().resource::<Seen>();
                seen.streams_ended.contains(&sb)
                    && apps[k]
                        .world()
                        .resource::<RemoteObjects>()
                        .get(sb, 2)
                        .is_none()
            })
    });
    // Bob's frames since he left do not count as joined.
    let frames = b.world().resource::<JoinedFrames>().0;
    b.update();
    assert_eq!(b.world().resource::<JoinedFrames>().0, frames);
    assert!(a.world().resource::<JoinedFrames>().0 > 0);
    let bob = &b.world().resource::<Seen>().ended[0];
    assert_eq!(bob.reason, EndReason::Left, "{bob:?}");
    for app in [&a, &c] {
        let seen = app.world().resource::<Seen>();
        let gone = seen.removed.iter().find(|r| r.ssrc == sb).expect("removed");
        assert_eq!((gone.object_id, gone.why), (2, Removal::StreamEnded));
        assert!(app.world().get_entity(gone.entity).is_err(), "despawned");
    }
    assert!(remote(&mut a, sa, 1).is_none());
    assert!(remote(&mut c, sa, 1).is_some(), "alice's object stays");
    assert!(matches!(
        b.world()
            .resource::<RelayClient>()
            .publish_objects(Vec::new()),
        Err(SendError::Ended)
    ));
}

#[test]
fn garbage_settings_and_a_refused_join_are_told_not_panicked_on() {
    let bad = Connect::new("ftp://relay", "t", "dev");
    assert!(matches!(
        RelayClient::connect(bad),
        Err(ConnectError::Config(ConfigError::Http(_)))
    ));
    let bad = Connect::new("http://127.0.0.1:1", "t", "no/slash");
    assert!(matches!(
        RelayClient::connect(bad),
        Err(ConnectError::Config(ConfigError::Room(_)))
    ));
    assert!(
        GsRelayPlugin::new(SyncSettings {
            publish_hz: f64::NAN,
            ..SyncSettings::default()
        })
        .is_err()
    );

    // A token the relay did not sign: the join is refused, and the app hears why.
    let relay = relay();
    let connect = Connect::new(&relay.base, "not.a.token", "bevy-refused");
    let mut app = App::new();
    app.add_plugins((MinimalPlugins, GsRelayPlugin::default()))
        .insert_resource(RelayClient::connect(connect).expect("well-formed settings"))
        .init_resource::<Seen>()
        .add_systems(Update, record);
    assert!(matches!(
        app.world()
            .resource::<RelayClient>()
            .publish_objects(Vec::new()),
        Err(SendError::NotJoined)
    ));
    run_until(&mut [&mut app], "the refusal", |apps| {
        !apps[0].world().resource::<Seen>().ended.is_empty()
    });
    let ended = &app.world().resource::<Seen>().ended[0];
    assert_eq!(ended.reason, EndReason::JoinFailed);
    assert!(ended.message.contains("401"), "{}", ended.message);
    assert!(matches!(
        app.world().resource::<RelayClient>().state(),
        ConnectionState::Ended { .. }
    ));
}

#[test]
fn an_object_handed_over_is_told_to_both_sides() {
    let relay = relay();
    let room = "bevy-handover";
    let mut a = app(&relay.base, room, "alice", Some((1, 0.0)));
    let mut b = app_with(connect(&relay.base, room, "bob", true), None);
    let mut sa = 0;
    run_until(&mut [&mut a, &mut b], "bob sees alice's object", |apps| {
        sa = ssrc(apps[0]).unwrap_or(0);
        sa != 0 && ssrc(apps[1]).is_some() && remote(apps[1], sa, 1).is_some()
    });
    b.world()
        .resource::<RelayClient>()
        .request_objects(&[(sa, 1)])
        .expect("joined");
    let told = |app: &App, kind: OwnershipKind| {
        app.world()
            .resource::<Seen>()
            .ownership
            .iter()
            .any(|o| (o.ssrc, o.object_id, o.kind) == (sa, 1, kind))
    };
    run_until(&mut [&mut a, &mut b], "the handover told", |apps| {
        told(apps[1], OwnershipKind::Granted) && told(apps[0], OwnershipKind::Lost)
    });
    let lost = a.world().resource::<Seen>().ownership[0];
    assert_eq!(lost.reason, OwnershipReason::Contended, "{lost:?}");

    // Bob, its holder now, moves it by publishing its objectID; Alice's updates of it are
    // dropped by the relay. Everyone else sees Bob's: the object stays Alice's stream's.
    let spot = Vec3::new(10.0, 0.0, 0.0);
    b.world_mut()
        .spawn((Publish::object(1), Transform::from_translation(spot)));
    let mut c = app(&relay.base, room, "carol", None);
    run_until(
        &mut [&mut a, &mut b, &mut c],
        "carol sees bob's move",
        |apps| {
            remote(apps[2], sa, 1).is_some_and(|(r, _)| position(&r.object).distance(spot) < 1e-3)
        },
    );
}

#[test]
fn apps_come_back_by_themselves_when_their_relay_restarts() {
    let mut relay = relay();
    let room = "bevy-restart";
    // A short silence: the relay's reports come every few seconds, and both publish.
    let quick = |identity, publish| {
        connect(&relay.base, room, identity, publish).with_options(JoinOptions {
            silence: Some(Duration::from_secs(1)),
            ..JoinOptions::default()
        })
    };
    let mut a = app_with(quick("alice", true), Some((1, 0.0)));
    let mut b = app_with(quick("bob", true), Some((2, 1.0)));
    let mut sa = 0;
    run_until(&mut [&mut a, &mut b], "bob sees alice's object", |apps| {
        sa = ssrc(apps[0]).unwrap_or(0);
        sa != 0 && remote(apps[1], sa, 1).is_some()
    });
    let sb = ssrc(&b).unwrap_or(0);

    relay.restart();
    let restarted = Instant::now();
    // Both resume on the new relay with their SSRCs, and Bob's entity of Alice's object
    // is updated again from there: only Alice's coming back can have sent it.
    run_until(
        &mut [&mut a, &mut b],
        "both back, alice's object live",
        |apps| {
            let back = |app: &App| !app.world().resource::<Seen>().reconnected.is_empty();
            back(apps[0])
                && back(apps[1])
                && remote(apps[1], sa, 1).is_some_and(|(r, _)| r.updated_at > restarted)
        },
    );
    for (app, ssrc) in [(&a, sa), (&b, sb)] {
        let (back, _) = app.world().resource::<Seen>().reconnected[0];
        assert_eq!(back.how, Reconnect::Resumed, "{back:?}");
        assert_eq!(back.ssrc, ssrc);
        assert!(app.world().resource::<RelayClient>().is_joined());
    }
}

#[test]
fn an_object_nobody_updates_times_out_and_a_removed_connection_takes_its_entities() {
    let relay = relay();
    let room = "bevy-timeout";
    let mut a = app(&relay.base, room, "alice", Some((1, 0.0)));
    let mut b = app(&relay.base, room, "bob", None);
    b.insert_resource(RelaySync(SyncSettings {
        object_timeout: Some(Duration::from_secs(1)),
        ..SyncSettings::default()
    }));
    let mut c = app(&relay.base, room, "carol", None);
    let mut sa = 0;
    run_until(&mut [&mut a, &mut b, &mut c], "both see alice's", |apps| {
        sa = ssrc(apps[0]).unwrap_or(0);
        sa != 0 && remote(apps[1], sa, 1).is_some() && remote(apps[2], sa, 1).is_some()
    });

    // Alice's app stops (her session stays): Bob's timeout despawns her object, Carol's
    // 30 s one keeps it.
    let stopped = Instant::now();
    run_until(&mut [&mut b, &mut c], "bob's timeout", |apps| {
        apps[0]
            .world()
            .resource::<Seen>()
            .removed
            .iter()
            .any(|r| (r.ssrc, r.object_id, r.why) == (sa, 1, Removal::TimedOut))
    });
    // Its last update came at most a frame before the stop (a loaded machine's frame).
    assert!(stopped.elapsed() >= Duration::from_millis(500));
    assert!(remote(&mut b, sa, 1).is_none() && remote(&mut c, sa, 1).is_some());

    // Carol's game drops its connection: it leaves, and its entities go with it.
    c.world_mut().remove_resource::<RelayClient>();
    c.update();
    let seen = c.world().resource::<Seen>();
    assert_eq!(seen.ended.len(), 1);
    assert_eq!(seen.ended[0].reason, EndReason::Left);
    let gone = seen.removed.last().copied().expect("removed");
    assert_eq!((gone.ssrc, gone.why), (sa, Removal::SessionEnded));
    assert!(c.world().resource::<RemoteObjects>().is_empty());
    assert!(c.world().get_entity(gone.entity).is_err());
}
