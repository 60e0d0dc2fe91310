//! `gsrelay bench seek`: how long a seek in a long recording takes to give a subscriber
//! the whole room (`docs/recording.md`, "Replay"; `docs/benchmarks.md`, "Recording and
//! replay").
//!
//! It writes a recording as the relay's recorder does, made up rather than recorded so
//! that an hour of a dense room takes seconds to make: `players` streams, each moving
//! one head at `rate_hz`, a checkpoint every `checkpoint_s` and a segment every
//! `segment_s`, through the format's own writer. Head `p`'s x at any time is a known
//! function of `p` and the time, so what a subscriber gets after a seek can be checked
//! against the recording. Then an in-process relay replays it (paused), a subscriber
//! joins the replay's room, and each seek, to random places, is timed from the request
//! to the moment the subscriber holds every stream's head as it was at the target.

use crate::failover::Recovery;
use crate::impair::Rng;
use anyhow::{Context, bail};
use gsrelay_client::{Client, JoinOptions, Received};
use gsrelay_core::rtp::RtpHeader;
use gsrelay_core::wire::{self, Dialect, Head1, Loc2, Object};
use gsrelay_record::{Event, Meta, SegmentWriter};
use gsrelay_server::serve::{self as server, ServeConfig};
use gsrelay_server::token::{Rights, Tokens};
use serde::Serialize;
use std::collections::HashMap;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What to make and measure.
#[derive(Debug, Clone)]
pub struct SeekBench {
    /// Players (streams) in the room.
    pub players: usize,
    /// Updates per second per player.
    pub rate_hz: f64,
    /// The recording's length, seconds.
    pub seconds: u64,
    /// Seconds between checkpoints (the relay's default: 10).
    pub checkpoint_s: u64,
    /// Seconds per segment (the relay's default: 60).
    pub segment_s: u64,
    /// Seeks to time.
    pub seeks: usize,
    /// Where the recordings directory is made.
    pub dir: PathBuf,
}

impl Default for SeekBench {
    fn default() -> Self {
        Self {
            players: 200,
            rate_hz: 20.0,
            seconds: 3600,
            checkpoint_s: 10,
            segment_s: 60,
            seeks: 20,
            dir: std::env::temp_dir().join("gsrelay-bench-seek"),
        }
    }
}

/// The figures.
#[derive(Debug, Clone, Serialize)]
pub struct SeekReport {
    /// Players.
    pub players: usize,
    /// The recording's length, seconds.
    pub seconds: u64,
    /// Its size, bytes.
    pub bytes: u64,
    /// How long making it took, seconds.
    pub made_s: f64,
    /// How long the relay took to open it (scan and check every segment), seconds.
    pub opened_s: f64,
    /// Each seek's time to the whole room at the subscriber, milliseconds, in order.
    pub seek_ms: Vec<f64>,
    /// Their median, 99th percentile (nearest rank) and worst.
    pub seek: Recovery,
}

impl SeekReport {
    /// The report as text.
    pub fn table(&self) -> String {
        format!(
            "recording: {} players, {} s, {:.1} MB (made in {:.1} s; opened by the relay in {:.2} s)\n\
             seek to the whole room at the subscriber, {} seeks: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms\n",
            self.players,
            self.seconds,
            self.bytes as f64 / 1e6,
            self.made_s,
            self.opened_s,
            self.seek_ms.len(),
            self.seek.p50,
            self.seek.p99,
            self.seek.max
        )
    }
}

/// Head `p`'s x at `tick` of the recording.
fn x_at(p: usize, tick: u64) -> f32 {
    (p * 100_000) as f32 + (tick % 100_000) as f32
}

const RECORDING: &str = "rec-1-00000000";

/// Writes the recording under `b.dir`; its size.
fn make(b: &SeekBench) -> anyhow::Result<u64> {
    let dir = b.dir.join(RECORDING);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let start_ns: u64 = 1_800_000_000_000_000_000;
    let tick_ns = (1e9 / b.rate_hz) as u64;
    let ticks = (b.seconds as f64 * b.rate_hz) as u64;
    let per_checkpoint = (b.checkpoint_s as f64 * b.rate_hz) as u64;
    let per_segment = (b.segment_s as f64 * b.rate_hz) as u64;
    let mut meta = Meta::new(RECORDING, "bench", "bench", start_ns, b.checkpoint_s as u32);
    let (mut bytes, mut packet, mut payload) = (0u64, Vec::new(), Vec::new());
    let mut segment: Option<(SegmentWriter, std::io::BufWriter<std::fs::File>)> = None;
    for tick in 0..=ticks {
        let at = start_ns + tick * tick_ns;
        if tick % per_checkpoint == 0 {
            if tick % per_segment == 0 {
                if let Some((mut w, mut f)) = segment.take() {
                    w.finish(at);
                    f.write_all(w.pending())?;
                    bytes += w.bytes();
                }
                let index = (tick / per_segment) as u32;
                let path = dir.join(format!("{index:06}.pcapng"));
                let f = std::io::BufWriter::new(std::fs::File::create(&path)?);
                let mut w = SegmentWriter::new(RECORDING, "bench", index);
                w.event(at, &Event::SegmentStarted { segment: index });
                segment = Some((w, f));
            }
            let Some((w, _)) = &mut segment else {
                bail!("no segment")
            };
            let n = b.players as u32;
            w.event(at, &Event::Checkpoint { packets: n });
            for p in 0..b.players {
                head_packet(&mut packet, &mut payload, p, tick);
                w.rtp(at, true, &packet)?;
            }
        }
        let Some((w, f)) = &mut segment else {
            bail!("no segment")
        };
        for p in 0..b.players {
            head_packet(&mut packet, &mut payload, p, tick);
            w.rtp(at + p as u64, false, &packet)?;
        }
        f.write_all(w.pending())?;
        w.consume();
    }
    if let Some((mut w, mut f)) = segment.take() {
        let at = start_ns + ticks * tick_ns;
        w.event(
            at,
            &Event::RecordingStopped {
                reason: "stopped".into(),
            },
        );
        w.finish(at);
        f.write_all(w.pending())?;
        f.flush()?;
        bytes += w.bytes();
    }
    meta.stopped_ns = Some(start_ns + ticks * tick_ns);
    meta.stop_reason = Some("stopped".into());
    std::fs::write(dir.join("recording.json"), meta.to_json())?;
    Ok(bytes)
}

/// Player `p`'s packet at `tick`: one head, from SSRC `p + 1`.
fn head_packet(packet: &mut Vec<u8>, payload: &mut Vec<u8>, p: usize, tick: u64) {
    let head = Object::Head1(Head1 {
        id: 1,
        location: Loc2 {
            x: x_at(p, tick),
            ..Loc2::default()
        },
        ..Head1::default()
    });
    payload.clear();
    payload.extend(wire::encode(&[head], Dialect::Draft01).unwrap_or_default());
    packet.clear();
    let header = RtpHeader {
        marker: false,
        payload_type: 96,
        sequence_number: tick as u16,
        timestamp: (tick * 4500) as u32,
        ssrc: p as u32 + 1,
        csrcs: &[],
        extension: None,
    };
    if header.append_to(packet).is_ok() {
        packet.extend_from_slice(payload);
    }
}

/// Makes the recording, replays it in process, times `b.seeks` seeks.
pub fn run(b: &SeekBench) -> anyhow::Result<SeekReport> {
    let made = Instant::now();
    let bytes = make(b)?;
    let made_s = made.elapsed().as_secs_f64();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(measure(b, bytes, made_s))
}

async fn measure(b: &SeekBench, bytes: u64, made_s: f64) -> anyhow::Result<SeekReport> {
    let secret = gsrelay_server::token::dev_secret()?;
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let cfg = ServeConfig {
        http_addr: loopback,
        rtp_addr: loopback,
        quic_addr: loopback,
        webrtc_addr: loopback,
        token_secret: Some(secret.clone()),
        recording_dir: b.dir.clone(),
        shards: 1,
        ..ServeConfig::default()
    };
    let relay = server::start(cfg).await?;
    let base = format!("http://{}", relay.http_addr);
    let tokens = Tokens::new(secret.as_bytes())?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let admin = Rights {
        admin: true,
        ..Rights::default()
    };
    let admin = tokens.issue("*", "bench", admin, 3600, now)?;
    let http = reqwest::Client::new();
    let opened = Instant::now();
    let started = http
        .post(format!("{base}/v1/replays"))
        .bearer_auth(&admin)
        .json(&serde_json::json!({"recording": RECORDING, "room": "seek", "paused": true}))
        .send()
        .await?;
    if !started.status().is_success() {
        bail!("replay refused: {}", started.text().await?);
    }
    let opened_s = opened.elapsed().as_secs_f64();
    let viewer = Rights {
        subscribe: true,
        ..Rights::default()
    };
    let t = tokens.issue("seek", "viewer", viewer, 3600, now)?;
    let mut sub = Client::join(&base, &t, "seek", JoinOptions::default()).await?;
    sub.send_rr().await?;
    let mut rng = Rng::new(7);
    let mut seek_ms = Vec::with_capacity(b.seeks);
    let ticks = (b.seconds as f64 * b.rate_hz) as u64;
    for _ in 0..b.seeks {
        // A tick's time plus half a tick: between two updates, so the state is exact.
        let tick = (rng.unit() * ticks.saturating_sub(1) as f64) as u64;
        let target_ms = ((tick as f64 + 0.5) * 1000.0 / b.rate_hz) as u64;
        let at = Instant::now();
        let answer = http
            .patch(format!("{base}/v1/replays/seek"))
            .bearer_auth(&admin)
            .json(&serde_json::json!({"seek_ms": target_ms}))
            .send()
            .await?;
        if !answer.status().is_success() {
            bail!("seek refused: {}", answer.text().await?);
        }
        whole_room(&mut sub, b.players, tick).await?;
        seek_ms.push(at.elapsed().as_secs_f64() * 1e3);
    }
    relay.shutdown().await?;
    Ok(SeekReport {
        players: b.players,
        seconds: b.seconds,
        bytes,
        made_s,
        opened_s,
        seek: Recovery::of(seek_ms.clone()),
        seek_ms,
    })
}

/// Reads `sub` until it holds every player's head as it was at `tick`.
async fn whole_room(sub: &mut Client, players: usize, tick: u64) -> anyhow::Result<()> {
    let mut held: HashMap<u32, f32> = HashMap::new();
    let right = |held: &HashMap<u32, f32>| {
        held.len() >= players
            && (0..players).all(|p| held.get(&(p as u32 + 1)) == Some(&x_at(p, tick)))
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !right(&held) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match sub.recv(left).await? {
            Some(Received::Rtp { ssrc, payload, .. }) => {
                for o in wire::decode(&payload, Dialect::Draft01).unwrap_or_default() {
                    if let Object::Head1(h) = o {
                        held.insert(ssrc, h.location.x);
                    }
                }
            }
            Some(_) => {}
            None => bail!(
                "the whole room did not come within 30 s ({} streams)",
                held.len()
            ),
        }
    }
    Ok(())
}
