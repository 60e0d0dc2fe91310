//! What the tests share: real game-state packets (encoded by the codec), and a room
//! recorded into segments with a model of its state kept beside it.
#![allow(dead_code)] // each test binary uses part of it

use gsrelay_core::wire::{self, Dialect, Object, Object1, Vec3};
use gsrelay_record::{Event, SegmentWriter};
use std::collections::BTreeMap;

/// Nanoseconds since the epoch of the recordings' first record (2026-11-28).
pub const T0: u64 = 1_795_000_000_000_000_000;
pub const MS: u64 = 1_000_000;
pub const SEC: u64 = 1_000_000_000;

/// An RTP packet: version 2, payload type 96, no CSRC, no extension.
pub fn rtp(ssrc: u32, seq: u16, ts: u32, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x80, 96];
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&ts.to_be_bytes());
    p.extend_from_slice(&ssrc.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

/// One Object1 TLV per `(objectID, x)`, as the codec encodes it.
pub fn objects(list: &[(u64, f32)]) -> Vec<Vec<u8>> {
    list.iter()
        .map(|&(id, x)| {
            let o = Object::Object1(Object1 {
                id,
                position: Vec3 { x, y: 1.0, z: 2.0 },
                active: true,
                ..Default::default()
            });
            wire::encode(&[o], Dialect::Draft01).expect("Object1 encodes")
        })
        .collect()
}

/// The room as a model: per SSRC, objectID -> latest TLV, in first-seen order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Model {
    pub streams: BTreeMap<u32, Vec<(u64, Vec<u8>)>>,
}

impl Model {
    pub fn apply(&mut self, ssrc: u32, objects: &[(u64, Vec<u8>)]) {
        let s = self.streams.entry(ssrc).or_default();
        for (id, tlv) in objects {
            match s.iter_mut().find(|(i, _)| i == id) {
                Some(slot) => slot.1 = tlv.clone(),
                None => s.push((*id, tlv.clone())),
            }
        }
    }

    /// Each stream's objects concatenated, by SSRC (what `Output::State` gives).
    pub fn flat(&self) -> Vec<(u32, Vec<u8>)> {
        self.streams
            .iter()
            .map(|(&ssrc, objs)| (ssrc, objs.iter().flat_map(|(_, b)| b.clone()).collect()))
            .collect()
    }
}

/// A generated room recording: its segments' bytes, and the model's state after each
/// live record (time from the start, state).
pub struct Generated {
    pub segments: Vec<Vec<u8>>,
    pub states: Vec<(u64, Model)>,
    pub end_ns: u64,
    /// (time from start, ssrc, seq) of every live packet, in order.
    pub live: Vec<(u64, u32, u16)>,
    /// Events as written (time from start, event), bookkeeping left out.
    pub events: Vec<(u64, Event)>,
}

/// Records a room: `streams` streams sending one packet every 50 ms each for `secs`
/// seconds, each packet updating 2 of 5 objects; a checkpoint every second; a new
/// segment every `segment_secs` seconds; stream 2 ends halfway (its objects leave the
/// state). Everything is deterministic.
pub fn generate(streams: u32, secs: u64, segment_secs: u64) -> Generated {
    let mut g = Generated {
        segments: Vec::new(),
        states: Vec::new(),
        end_ns: 0,
        live: Vec::new(),
        events: Vec::new(),
    };
    let mut model = Model::default();
    let mut seq = vec![0u16; streams as usize + 1];
    let mut w = new_segment(0, 0);
    let started = Event::RecordingStarted {
        recording: "rec-1".into(),
        room: "arena".into(),
        node: "node-a".into(),
        checkpoint_secs: 1,
    };
    w.event(T0, &started);
    g.events.push((0, started));
    let mut ended = false;
    let mut segment = 0u32;
    let step = 50 * MS;
    let mut t = 0u64;
    while t < secs * SEC {
        let at = T0 + t;
        if t > 0 && t.is_multiple_of(segment_secs * SEC) {
            w.finish(at);
            g.segments.push(w.pending().to_vec());
            segment += 1;
            w = new_segment(segment, at);
        }
        if t.is_multiple_of(SEC) {
            write_checkpoint(&mut w, at, &model);
        }
        if t == 0 {
            for ssrc in 1..=streams {
                let e = Event::StreamStarted {
                    ssrc,
                    session: u64::from(ssrc) * 100,
                };
                w.event(at, &e);
                g.events.push((t, e));
            }
        }
        if !ended && t >= secs * SEC / 2 && streams >= 2 {
            ended = true;
            let e = Event::StreamEnded {
                ssrc: 2,
                session: 200,
            };
            w.event(at, &e);
            g.events.push((t, e));
            model.streams.remove(&2);
            g.states.push((t, model.clone()));
        }
        for ssrc in 1..=streams {
            if ended && ssrc == 2 {
                continue;
            }
            let n = seq[ssrc as usize];
            seq[ssrc as usize] = n.wrapping_add(1);
            let ids = [u64::from(n) % 5, (u64::from(n) + 2) % 5];
            let x = (t / MS) as f32 + ssrc as f32;
            let tlvs = objects(&[(ids[0], x), (ids[1], -x)]);
            let payload: Vec<u8> = tlvs.concat();
            let at_s = at + u64::from(ssrc) * MS; // streams a little apart
            w.rtp(at_s, false, &rtp(ssrc, n, (t / MS) as u32 * 90, &payload))
                .expect("fits");
            model.apply(
                ssrc,
                &[(ids[0], tlvs[0].clone()), (ids[1], tlvs[1].clone())],
            );
            g.live.push((at_s - T0, ssrc, n));
            g.states.push((at_s - T0, model.clone()));
        }
        t += step;
    }
    let stop = Event::RecordingStopped {
        reason: "api".into(),
    };
    w.event(T0 + t, &stop);
    g.events.push((t, stop));
    w.finish(T0 + t);
    g.segments.push(w.pending().to_vec());
    g.end_ns = t;
    g
}

fn new_segment(segment: u32, at: u64) -> SegmentWriter {
    let mut w = SegmentWriter::new("rec-1", "arena", segment);
    w.event(T0.max(at), &Event::SegmentStarted { segment });
    w
}

/// The room's checkpoint: one packet per stream holding every object's latest TLV.
pub fn write_checkpoint(w: &mut SegmentWriter, at: u64, model: &Model) {
    w.event(
        at,
        &Event::Checkpoint {
            packets: model.streams.len() as u32,
        },
    );
    for (&ssrc, objs) in &model.streams {
        let payload: Vec<u8> = objs.iter().flat_map(|(_, b)| b.clone()).collect();
        w.rtp(at, true, &rtp(ssrc, 0, 0, &payload)).expect("fits");
    }
}

/// The model's state at `pos` ns from the start: after every live packet up to it.
pub fn state_at(g: &Generated, pos: u64) -> Vec<(u32, Vec<u8>)> {
    g.states
        .iter()
        .rev()
        .find(|(t, _)| *t <= pos)
        .map(|(_, m)| m.flat())
        .unwrap_or_default()
}
