//! The replay clock, driven by a virtual clock (the player is sans-I/O: it is told the
//! time, so these tests never sleep): speed, pause, seek, the end.

mod common;

use common::{Generated, MS, SEC, T0, generate, state_at};
use gsrelay_record::{Event, FormatError, Meta, Output, PlayError, Player, Recording};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What the player gave, owned, with the virtual time it gave it at.
#[derive(Debug, Clone, PartialEq)]
enum Got {
    Rtp(u32, u16),
    Event(Event),
    State(Vec<(u32, Vec<u8>)>),
    Ended,
}

struct Rig {
    rec: Recording,
    player: Player,
    t0: Instant,
    now: Instant,
    dir: PathBuf,
    fed: usize,
}

impl Rig {
    fn new(name: &str, g: &Generated) -> Rig {
        Rig::compressed(name, g, &[])
    }

    /// A rig whose segments `gz` are compressed (`.pcapng.gz`).
    fn compressed(name: &str, g: &Generated, gz: &[usize]) -> Rig {
        let dir =
            std::env::temp_dir().join(format!("gsrelay-record-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("recording.json"),
            Meta::new("rec-1", "arena", "n", T0, 1).to_json(),
        )
        .unwrap();
        for (i, s) in g.segments.iter().enumerate() {
            let path = dir.join(format!("{i:06}.pcapng"));
            std::fs::write(&path, s).unwrap();
            if gz.contains(&i) {
                gsrelay_record::compress_segment(&path).unwrap();
            }
        }
        let rec = Recording::open(&dir).unwrap();
        let t0 = Instant::now();
        let player = Player::new(rec.segments.clone(), t0);
        Rig {
            rec,
            player,
            t0,
            now: t0,
            dir,
            fed: 0,
        }
    }

    /// Feeds what the player asks for, then polls until nothing is due.
    fn poll(&mut self) -> Vec<(Duration, Got)> {
        let mut out = Vec::new();
        loop {
            while let Some(i) = self.player.wants_segment() {
                let bytes = self.rec.read_segment(i).unwrap();
                self.player.feed_segment(i, bytes).unwrap();
                self.fed += 1;
            }
            let Some(o) = self.player.poll(self.now) else {
                if self.player.wants_segment().is_some() {
                    continue;
                }
                return out;
            };
            let got = match o {
                Output::Rtp { ssrc, packet } => {
                    Got::Rtp(ssrc, u16::from_be_bytes([packet[2], packet[3]]))
                }
                Output::Event(e) => Got::Event(e.clone()),
                Output::State { streams } => Got::State(
                    streams
                        .iter()
                        .map(|s| (s.ssrc, s.objects.clone()))
                        .collect(),
                ),
                Output::Ended => Got::Ended,
            };
            out.push((self.now - self.t0, got));
        }
    }

    /// Runs the clock from wake-up to wake-up until `until` (or the end).
    fn run_until(&mut self, until: Duration) -> Vec<(Duration, Got)> {
        let mut out = self.poll();
        let mut idle_wakeups = 0;
        while let Some(t) = self.player.poll_timeout() {
            if t - self.t0 > until {
                break;
            }
            self.now = self.now.max(t);
            let got = self.poll();
            // A wake-up at poll_timeout must find something due; a few empty ones in a
            // row would be a clock that never gets there.
            idle_wakeups = if got.is_empty() { idle_wakeups + 1 } else { 0 };
            assert!(idle_wakeups < 3, "stalled at {:?}", self.now - self.t0);
            out.extend(got);
        }
        self.now = self.now.max(self.t0 + until);
        out.extend(self.poll());
        out
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The live packets given, with when.
fn rtp_times(out: &[(Duration, Got)]) -> Vec<(Duration, u32, u16)> {
    out.iter()
        .filter_map(|(t, g)| match g {
            Got::Rtp(ssrc, seq) => Some((*t, *ssrc, *seq)),
            _ => None,
        })
        .collect()
}

/// Checks that every live packet came out in order, at its time divided by `speed`
/// (to the nanosecond the clock rounds up to), offset by `shift`.
fn check_timing(g: &Generated, out: &[(Duration, Got)], speed: f64, from: usize, shift: Duration) {
    let rtp = rtp_times(out);
    assert_eq!(rtp.len(), g.live.len() - from);
    for ((t, ssrc, seq), (pos, want_ssrc, want_seq)) in rtp.iter().zip(&g.live[from..]) {
        assert_eq!((ssrc, seq), (want_ssrc, want_seq));
        let due = Duration::from_nanos((*pos as f64 / speed).ceil() as u64) + shift;
        let late = t
            .checked_sub(due)
            .unwrap_or_else(|| panic!("{ssrc}/{seq} early: {t:?} < {due:?}"));
        assert!(
            late <= Duration::from_micros(1),
            "{ssrc}/{seq} late by {late:?}"
        );
    }
}

#[test]
fn plays_everything_in_time_at_1x_and_ends() {
    let g = generate(3, 5, 2);
    // The middle segment compressed: the shell inflates it (read_segment) before feeding.
    let mut rig = Rig::compressed("play", &g, &[1]);
    assert!(
        rig.rec.segments[1]
            .path
            .to_string_lossy()
            .ends_with(".pcapng.gz")
    );
    assert_eq!(rig.player.duration_ns(), g.end_ns);
    let out = rig.run_until(Duration::from_secs(60));
    check_timing(&g, &out, 1.0, 0, Duration::ZERO);
    // The room's events, in order; the format's own (segments, checkpoints) not.
    let events: Vec<Event> = out
        .iter()
        .filter_map(|(_, o)| match o {
            Got::Event(e) => Some(e.clone()),
            _ => None,
        })
        .collect();
    let want: Vec<Event> = g.events.iter().map(|(_, e)| e.clone()).collect();
    assert_eq!(events, want);
    assert_eq!(out.last().unwrap().1, Got::Ended);
    assert_eq!(out.iter().filter(|(_, o)| *o == Got::Ended).count(), 1);
    assert_eq!(rig.player.position_ns(rig.now), g.end_ns);
    assert_eq!(rig.player.wants_segment(), None);
    assert_eq!(rig.fed, 3, "each segment read once");
}

#[test]
fn speeds_scale_the_clock() {
    for speed in [0.25, 0.3, 1.7, 2.0, 8.0] {
        let g = generate(2, 3, 10);
        let mut rig = Rig::new(&format!("speed{speed}"), &g);
        rig.player.set_speed(rig.t0, speed).unwrap();
        assert_eq!(rig.player.speed(), speed);
        let out = rig.run_until(Duration::from_secs(60));
        check_timing(&g, &out, speed, 0, Duration::ZERO);
    }
}

#[test]
fn a_speed_change_midway_keeps_the_position() {
    let g = generate(2, 4, 10);
    let mut rig = Rig::new("speed-change", &g);
    let first = rig.run_until(Duration::from_secs(1));
    let done = rtp_times(&first).len();
    assert_eq!(rig.player.position_ns(rig.now), SEC);
    rig.player.set_speed(rig.now, 2.0).unwrap();
    assert_eq!(rig.player.position_ns(rig.now), SEC);
    let rest = rig.run_until(Duration::from_secs(60));
    // After 1 s at 1x, the rest at 2x: a packet at p is due at 1 s + (p - 1 s) / 2.
    for ((t, ..), (pos, ..)) in rtp_times(&rest).iter().zip(&g.live[done..]) {
        let due = SEC + (pos - SEC).div_ceil(2);
        assert!(
            t.as_nanos() as u64 >= due && t.as_nanos() as u64 <= due + 1_000,
            "{t:?} vs {due}"
        );
    }
    assert_eq!(rtp_times(&rest).len(), g.live.len() - done);
}

#[test]
fn pause_stops_the_clock() {
    let g = generate(2, 3, 10);
    let mut rig = Rig::new("pause", &g);
    let before = rig.run_until(Duration::from_millis(1500));
    let done = rtp_times(&before).len();
    rig.player.pause(rig.now);
    assert!(rig.player.paused());
    assert_eq!(rig.player.poll_timeout(), None);
    let pos = rig.player.position_ns(rig.now);
    rig.now += Duration::from_secs(10);
    assert!(rig.poll().is_empty(), "nothing while paused");
    assert_eq!(rig.player.position_ns(rig.now), pos);
    rig.player.resume(rig.now);
    let rest = rig.run_until(Duration::from_secs(60));
    check_timing(&g, &rest, 1.0, done, Duration::from_secs(10));
}

#[test]
fn seek_gives_the_state_applying_every_packet_gives() {
    let g = generate(3, 6, 2);
    // Before the first live packet, between checkpoints, exactly on one, in another
    // segment, just after a stream ended, and at the very end.
    let targets = [
        0,
        700 * MS,
        2 * SEC,
        2 * SEC + 30 * MS,
        3 * SEC + 5 * MS,
        5 * SEC + 999 * MS,
        g.end_ns,
    ];
    for &to in &targets {
        let mut rig = Rig::new(&format!("seek{to}"), &g);
        rig.now += Duration::from_millis(250);
        rig.player.seek(rig.now, to).unwrap();
        assert_eq!(rig.player.position_ns(rig.now), to);
        let out = rig.poll();
        let Some((_, Got::State(state))) = out.first() else {
            panic!("seek to {to}: no state first: {out:?}")
        };
        assert_eq!(*state, state_at(&g, to), "seek to {to}");
        if to == g.end_ns {
            assert_eq!(out.get(1).map(|o| &o.1), Some(&Got::Ended));
            continue;
        }
        // Then what follows the target, in time from there.
        let from = g
            .live
            .iter()
            .position(|(p, ..)| *p > to)
            .unwrap_or(g.live.len());
        let rest = rig.run_until(Duration::from_secs(60));
        assert_eq!(rest.last().map(|o| &o.1), Some(&Got::Ended));
        let rtp = rtp_times(&rest);
        assert_eq!(rtp.len(), g.live.len() - from, "seek to {to}");
        let Some(&(t, ssrc, seq)) = rtp.first() else {
            continue;
        };
        assert_eq!((ssrc, seq), (g.live[from].1, g.live[from].2));
        let due = Duration::from_millis(250) + Duration::from_nanos(g.live[from].0 - to);
        assert!(
            t >= due && t - due <= Duration::from_micros(1),
            "{t:?} vs {due:?}"
        );
    }
}

#[test]
fn seeks_back_and_forth_while_playing_and_paused() {
    let g = generate(2, 6, 2);
    let mut rig = Rig::new("seek-around", &g);
    rig.run_until(Duration::from_secs(4));
    for to in [500 * MS, 5 * SEC, SEC + 1, 4 * SEC + 50 * MS] {
        rig.player.seek(rig.now, to).unwrap();
        let out = rig.poll();
        assert_eq!(out[0].1, Got::State(state_at(&g, to)), "seek to {to}");
    }
    rig.player.pause(rig.now);
    rig.player.seek(rig.now, 3 * SEC).unwrap();
    let out = rig.poll();
    assert_eq!(out.len(), 1, "paused: the state, nothing after");
    assert_eq!(out[0].1, Got::State(state_at(&g, 3 * SEC)));
    assert_eq!(
        rig.player.position_ns(rig.now + Duration::from_secs(5)),
        3 * SEC
    );
}

#[test]
fn refuses_bad_requests() {
    let g = generate(2, 2, 10);
    let mut rig = Rig::new("refuse", &g);
    let now = rig.now;
    assert_eq!(
        rig.player.seek(now, g.end_ns + 1),
        Err(PlayError::PastEnd { end_ns: g.end_ns })
    );
    for bad in [0.0, 0.24, 8.5, -1.0, f64::NAN, f64::INFINITY] {
        assert!(
            matches!(rig.player.set_speed(now, bad), Err(PlayError::Speed(_))),
            "{bad}"
        );
    }
    assert_eq!(rig.player.speed(), 1.0);
    assert_eq!(
        rig.player.feed_segment(9, Vec::new()),
        Err(FormatError::UnknownSegment(9))
    );
    assert_eq!(
        rig.player.feed_segment(0, b"garbage!".to_vec()),
        Err(FormatError::Foreign)
    );
    // Nothing fed: nothing due, and it says what it needs.
    assert_eq!(rig.player.wants_segment(), Some(0));
    assert!(rig.player.poll(now + Duration::from_secs(1)).is_none());
}

#[test]
fn an_empty_recording_just_ends() {
    let mut p = Player::new(Vec::new(), Instant::now());
    assert_eq!(p.wants_segment(), None);
    assert_eq!(p.poll(Instant::now()), Some(Output::Ended));
    assert_eq!(p.poll(Instant::now()), None);
    assert_eq!(
        p.seek(Instant::now(), 1),
        Err(PlayError::PastEnd { end_ns: 0 })
    );
}

#[test]
fn a_recording_started_mid_game_seeks_from_its_checkpoints() {
    // The room held objects before the recording started: only the first checkpoint
    // has them, no live packet does.
    let before = common::objects(&[(40, 4.0), (41, 4.1)]);
    let mut model = common::Model::default();
    model.apply(9, &[(40, before[0].clone()), (41, before[1].clone())]);
    let mut w = gsrelay_record::SegmentWriter::new("rec-1", "arena", 0);
    w.event(T0, &Event::SegmentStarted { segment: 0 });
    common::write_checkpoint(&mut w, T0, &model);
    let mut live = Vec::new();
    for i in 0..20u16 {
        let at = T0 + u64::from(i) * 100 * MS + MS;
        let tlv = common::objects(&[(41, f32::from(i))]);
        w.rtp(at, false, &common::rtp(9, i, 0, &tlv[0])).unwrap();
        model.apply(9, &[(41, tlv[0].clone())]);
        live.push((at - T0, model.clone()));
        if i == 9 {
            common::write_checkpoint(&mut w, T0 + SEC + 50 * MS, &model);
        }
    }
    w.finish(T0 + 2 * SEC);
    let g = Generated {
        segments: vec![w.pending().to_vec()],
        states: live,
        end_ns: 2 * SEC,
        live: Vec::new(),
        events: Vec::new(),
    };
    let mut rig = Rig::new("mid-game", &g);
    assert_eq!(rig.rec.segments[0].checkpoints, [T0, T0 + SEC + 50 * MS]);
    for to in [0, 450 * MS, SEC + 60 * MS, 2 * SEC] {
        rig.player.seek(rig.now, to).unwrap();
        let out = rig.poll();
        let Got::State(state) = &out[0].1 else {
            panic!("no state: {out:?}")
        };
        let want = match to {
            0 => common::Model {
                streams: [(9, vec![(40, before[0].clone()), (41, before[1].clone())])].into(),
            }
            .flat(),
            _ => state_at(&g, to),
        };
        assert_eq!(*state, want, "seek to {to}");
        assert_eq!(
            state[0].1[..before[0].len()],
            before[0],
            "object 40 from the checkpoint"
        );
    }
}

#[test]
fn a_checkpoint_stamped_after_its_event_still_counts() {
    let tlv = common::objects(&[(1, 1.0)]);
    let mut w = gsrelay_record::SegmentWriter::new("rec-1", "arena", 0);
    w.event(T0, &Event::SegmentStarted { segment: 0 });
    w.event(T0 + SEC, &Event::Checkpoint { packets: 1 });
    // The snapshot's packet reached the writer 2 ms after the event.
    w.rtp(T0 + SEC + 2 * MS, true, &common::rtp(5, 0, 0, &tlv[0]))
        .unwrap();
    w.finish(T0 + 2 * SEC);
    let g = Generated {
        segments: vec![w.pending().to_vec()],
        states: Vec::new(),
        end_ns: 2 * SEC,
        live: Vec::new(),
        events: Vec::new(),
    };
    let mut rig = Rig::new("late-checkpoint", &g);
    rig.player.seek(rig.now, SEC + MS).unwrap();
    let out = rig.poll();
    assert_eq!(out[0].1, Got::State(vec![(5, tlv[0].clone())]));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Any speed in range: every packet on time, and no wake-up that finds nothing due.
    #[test]
    fn any_speed_plays_on_time(speed in 0.25f64..=8.0) {
        let g = generate(2, 1, 10);
        let mut rig = Rig::new(&format!("any-speed-{}", speed.to_bits()), &g);
        rig.player.set_speed(rig.t0, speed).unwrap();
        let out = rig.run_until(Duration::from_secs(60));
        check_timing(&g, &out, speed, 0, Duration::ZERO);
    }
}
