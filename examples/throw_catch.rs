//! A two-player scene with a third who comes late (`docs/relay.md`, "Room objects and
//! ownership"): Alice throws a ball she published on her room stream, Bob asks for it
//! and catches it (a handover), Alice leaves, and Carol, who joins last, still finds the
//! ball where Bob holds it. Exits non-zero if any step fails.
//!
//! ```sh
//! cargo run --example throw_catch -- --http http://127.0.0.1:8080 --token TOKEN [--room dev]
//! ```
//!
//! The token needs the publish and subscribe rights (`gsrelay token --room dev
//! --publish --subscribe`).

mod common;

use anyhow::{Context, bail};
use clap::Parser;
use gsrelay::client::{Client, JoinOptions, Received};
use gsrelay::wire::{Object, Object1, Vec3};
use std::time::Duration;
use tokio::time::Instant;

/// The ball's objectID.
const BALL: u64 = 100;
/// How long a step may wait for the relay.
const WAIT: Duration = Duration::from_secs(5);

/// Plays the scene.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    connection: common::Connection,
}

/// The ball at `(x, y)`.
fn ball(x: f32, y: f32) -> Object {
    Object::Object1(Object1 {
        id: BALL,
        position: Vec3 { x, y, z: 0.0 },
        active: true,
        ..Object1::default()
    })
}

/// Receives until `done` says so, or fails after [`WAIT`].
async fn until(
    c: &mut Client,
    what: &str,
    mut done: impl FnMut(&Client, &Received) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if let Some(r) = c.recv(Duration::from_millis(50)).await?
            && done(c, &r)
        {
            return Ok(());
        }
    }
    bail!("{what}: nothing within {WAIT:?}")
}

/// Where Bob holds the ball.
const HAND: (f32, f32) = (4.0, 1.25);

/// Whether the ball is in Bob's hand (positions travel as 16-bit floats).
fn in_hand((x, y): (f32, f32)) -> bool {
    (x - HAND.0).abs() < 0.01 && (y - HAND.1).abs() < 0.01
}

/// The ball's position in a packet of stream `ssrc`, if it is there.
fn ball_in(r: &Received, ssrc: u32, c: &Client) -> Option<(f32, f32)> {
    let Received::Rtp {
        ssrc: s, payload, ..
    } = r
    else {
        return None;
    };
    if *s != ssrc {
        return None;
    }
    gsrelay::wire::decode(payload, c.dialect())
        .ok()?
        .into_iter()
        .find_map(|o| match o {
            Object::Object1(b) if b.id == BALL => Some((b.position.x, b.position.y)),
            _ => None,
        })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let conn = &args.connection;
    let mut alice = conn
        .join(JoinOptions {
            room_stream: true,
            ..JoinOptions::default()
        })
        .await?;
    let mut bob = conn.join(JoinOptions::default()).await?;
    // A UDP session's address is known to the relay from its first packet.
    alice.send_rr().await?;
    bob.send_rr().await?;
    let room = alice.room_ssrc().context("the relay gave no room stream")?;
    println!("alice publishes the ball on her room stream {room}");

    // Alice throws: the ball flies in an arc towards Bob, and Bob sees it fly.
    for i in 0..=10 {
        let x = i as f32 * 0.4;
        alice
            .send_room_objects(&[ball(x, 1.5 + x * (4.0 - x) / 4.0)])
            .await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    until(&mut bob, "bob sees the ball", |c, r| {
        ball_in(r, room, c).is_some()
    })
    .await?;

    // Bob catches: he asks for the ball and, once granted, moves it himself.
    bob.request_objects(&[(room, BALL)]).await?;
    until(&mut bob, "bob is granted the ball", |c, _| {
        c.holds(room, BALL)
    })
    .await?;
    println!("bob holds the ball");
    bob.send_objects(&[ball(HAND.0, HAND.1)]).await?;
    until(&mut alice, "alice sees bob's catch", |c, r| {
        ball_in(r, room, c).is_some_and(in_hand)
    })
    .await?;

    // Alice leaves; the ball is the room's and stays.
    alice.leave().await?;
    println!("alice left");
    let mut carol = conn.join(JoinOptions::default()).await?;
    carol.send_rr().await?;
    carol.send_fir(room).await?;
    until(&mut carol, "carol finds the ball", |c, r| {
        ball_in(r, room, c).is_some_and(in_hand)
    })
    .await?;
    println!("carol, who came last, sees the ball in bob's hands");
    bob.leave().await?;
    carol.leave().await?;
    Ok(())
}
