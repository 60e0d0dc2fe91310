//! A headless Bevy game on a gsrelay room: it flies a ship round a circle (an entity
//! marked `Publish`), and prints, once a second, every other object of the room as the
//! plugin keeps it: an entity whose `Transform` is predicted between updates. Run two of
//! them in the same room and each shows the other's ship go round; run the relay's
//! `publish` example beside them and its head and hands show up too.
//!
//! Headless (`MinimalPlugins`, a terminal): a window would pull in Bevy's renderer, far
//! heavier to build than the plugin itself (docs/bevy-client.md, "Build cost").
//!
//! ```sh
//! cargo run -p gsrelay-bevy --example orbit -- --http http://127.0.0.1:8080 --token TOKEN [--room dev] [--seconds 30] [--ship 1] [--radius 3]
//! ```

use bevy::app::{AppExit, ScheduleRunnerPlugin};
use bevy::prelude::*;
use clap::Parser;
use gsrelay_bevy::*;
use std::time::Duration;

/// Flies a ship round a circle in a gsrelay room and prints the room's other objects.
#[derive(Parser)]
struct Args {
    /// The relay's HTTP API.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    http: String,
    /// An access token for the room, with the publish and subscribe rights.
    #[arg(long)]
    token: String,
    /// The room.
    #[arg(long, default_value = "dev")]
    room: String,
    /// How long to play, in seconds.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// The ship's objectID.
    #[arg(long, default_value_t = 1)]
    ship: u64,
    /// The circle's radius, in metres.
    #[arg(long, default_value_t = 3.0)]
    radius: f32,
    /// Publishes per second.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
}

/// The ship: round the circle once every ten seconds.
#[derive(Component)]
struct Ship {
    radius: f32,
}

/// When the game stops.
#[derive(Resource)]
struct Until(Duration);

fn main() -> AppExit {
    let args = Args::parse();
    // Garbage in the arguments is refused here, with what is wrong, before anything runs.
    let setup = GsRelayPlugin::new(SyncSettings {
        publish_hz: args.rate,
        ..SyncSettings::default()
    })
    .map_err(ConnectError::from)
    .and_then(|plugin| {
        let connect = Connect::new(&args.http, &args.token, &args.room);
        Ok((plugin, RelayClient::connect(connect)?))
    });
    let (plugin, client) = match setup {
        Ok(ok) => ok,
        Err(e) => {
            eprintln!("orbit: {e}");
            return AppExit::from_code(2);
        }
    };
    let frame = Duration::from_secs_f64(1.0 / 60.0);
    App::new()
        .add_plugins((
            MinimalPlugins.set(ScheduleRunnerPlugin::run_loop(frame)),
            plugin,
        ))
        .insert_resource(client)
        .insert_resource(Until(Duration::from_secs(args.seconds)))
        .add_systems(Startup, move |mut commands: Commands| {
            commands.spawn((
                Publish::object(args.ship),
                Transform::default(),
                Ship {
                    radius: args.radius,
                },
            ));
        })
        .add_systems(Update, (fly, tell, print_room, stop))
        .run()
}

fn fly(time: Res<Time>, mut ships: Query<(&Ship, &mut Transform)>) {
    let angle = time.elapsed_secs() * std::f32::consts::TAU / 10.0;
    for (ship, mut t) in &mut ships {
        t.translation = Vec3::new(ship.radius * angle.cos(), 0.0, ship.radius * angle.sin());
        // Facing along the circle.
        t.rotation = Quat::from_rotation_y(-angle);
    }
}

/// Prints what the session's messages say.
fn tell(
    mut joined: MessageReader<Joined>,
    mut removed: MessageReader<ObjectRemoved>,
    mut reconnected: MessageReader<Reconnected>,
    mut errors: MessageReader<RelayError>,
    mut ended: MessageReader<SessionEnded>,
    mut exit: MessageWriter<AppExit>,
) {
    for j in joined.read() {
        println!("joined as {:08x} (session {})", j.ssrc, j.session);
    }
    for r in removed.read() {
        println!("{:08x}/{} gone ({:?})", r.ssrc, r.object_id, r.why);
    }
    for r in reconnected.read() {
        println!("back as {:08x} ({:?})", r.ssrc, r.how);
    }
    for e in errors.read() {
        eprintln!("error: {}", e.message);
    }
    for e in ended.read() {
        println!("ended ({:?}): {}", e.reason, e.message);
        exit.write(if e.reason == EndReason::Left {
            AppExit::Success
        } else {
            AppExit::from_code(1)
        });
    }
}

/// Once a second: every remote object where the plugin has it now.
fn print_room(time: Res<Time>, mut next: Local<f32>, room: Query<(&RemoteObject, &Transform)>) {
    if time.elapsed_secs() < *next {
        return;
    }
    *next = time.elapsed_secs() + 1.0;
    let mut lines: Vec<String> = room
        .iter()
        .map(|(r, t)| {
            let p = t.translation;
            format!(
                "  {:08x}/{:<3} {:<8} at ({:6.2}, {:6.2}, {:6.2}), {} updates",
                r.ssrc,
                r.object_id,
                kind(&r.object),
                p.x,
                p.y,
                p.z,
                r.updates
            )
        })
        .collect();
    lines.sort();
    println!(
        "t={:.0}s, {} remote objects",
        time.elapsed_secs(),
        lines.len()
    );
    for line in lines {
        println!("{line}");
    }
}

fn kind(o: &Object) -> &'static str {
    match o {
        Object::Head1(_) => "Head1",
        Object::Hand1(_) => "Hand1",
        Object::Hand2(_) => "Hand2",
        Object::Object1(_) => "Object1",
        Object::Object2(_) => "Object2",
        Object::SixDof1(_) => "SixDOF1",
        Object::ThreeDof1(_) => "ThreeDOF1",
        Object::GameControl1(_) => "Control",
        Object::Mesh1(_) | Object::Mesh2(_) => "Mesh",
        _ => "other",
    }
}

/// Leaves when the time is up; the app exits on the session's end.
fn stop(
    time: Res<Time>,
    until: Res<Until>,
    client: Res<RelayClient>,
    mut asked: Local<bool>,
    mut exit: MessageWriter<AppExit>,
) {
    if !*asked && time.elapsed() >= until.0 {
        *asked = true;
        if client.leave().is_err() {
            // Over already: nothing to leave.
            exit.write(AppExit::Success);
        }
    }
}
