//! Full aggregated packets held until their view's deadline, so that a subscriber's
//! packets of one flush leave together: as a *train* of packets padded to one size, which
//! a UDP transport sends as one GSO buffer (`gsrelay_net::udp::batch`) and a receiver with GRO
//! takes in one read. The kernel's cost follows the buffers, not the datagrams, and the
//! deadline is the one the partial packet already had: no update waits longer than its
//! view's `max_delay_ms` (`docs/relay.md`, "Delivery modes").

use super::builder::{Builder, Segment};
use super::member::History;
use std::ops::Range;
use std::time::Instant;

/// Most packets a train holds before it goes early. A GSO buffer takes at most 64
/// segments and 65 000 bytes; a held packet is at most a path's payload budget (1 200
/// bytes by default) plus its RTP header, SRTP tag and padding.
const MAX_CARS: usize = 32;

/// Most payload bytes a train holds before it goes early (see [`MAX_CARS`]).
const MAX_BYTES: usize = 40 * 1024;

/// One held packet: its payload and containers in the train's buffers.
#[derive(Debug, Clone)]
struct Car {
    payload: Range<usize>,
    /// Its containers, with ranges relative to its payload.
    segments: Range<usize>,
    /// The view packet's serial (`History`).
    serial: u64,
}

/// A view's packets that wait for its deadline.
#[derive(Debug, Default)]
pub struct Train {
    payload: Vec<u8>,
    segments: Vec<Segment>,
    cars: Vec<Car>,
    /// When the oldest update it holds arrived.
    since: Option<Instant>,
}

impl Train {
    /// True when it holds no packet.
    pub fn is_empty(&self) -> bool {
        self.cars.is_empty()
    }

    /// When the oldest update it holds arrived.
    pub fn since(&self) -> Option<Instant> {
        self.since
    }

    /// True when it must go now, to fit one GSO buffer.
    pub fn is_full(&self) -> bool {
        self.cars.len() >= MAX_CARS || self.payload.len() >= MAX_BYTES
    }

    /// Takes the builder's pending packet as its last car, recorded in the view's
    /// `history` (`carried` is scratch), and empties the builder.
    pub fn hold(
        &mut self,
        pending: &mut Builder,
        carried: &mut Vec<(u32, u64)>,
        history: &mut History,
    ) {
        self.since = self.since.or(pending.since());
        let (start, first) = (self.payload.len(), self.segments.len());
        carried.clear();
        pending.write(&mut self.payload, &mut self.segments, carried);
        pending.clear();
        for s in &mut self.segments[first..] {
            s.range = s.range.start - start..s.range.end - start;
        }
        self.cars.push(Car {
            payload: start..self.payload.len(),
            segments: first..self.segments.len(),
            serial: history.record(carried),
        });
    }

    /// Its packets in order: payload, containers and serial.
    pub fn cars(&self) -> impl Iterator<Item = (&[u8], &[Segment], u64)> + Clone + '_ {
        self.cars.iter().map(|c| {
            (
                self.payload.get(c.payload.clone()).unwrap_or_default(),
                self.segments.get(c.segments.clone()).unwrap_or_default(),
                c.serial,
            )
        })
    }

    /// Empties it, keeping its buffers.
    pub fn clear(&mut self) {
        self.payload.clear();
        self.segments.clear();
        self.cars.clear();
        self.since = None;
    }

    /// Takes `ssrc`'s containers out of the held packets (the sender left: nothing may
    /// revive it after its BYE). Rare, so it rebuilds the buffers.
    pub fn remove_sender(&mut self, ssrc: u32) {
        if !self.segments.iter().any(|s| s.ssrc == ssrc) {
            return;
        }
        let (payload, segments, cars) = (
            std::mem::take(&mut self.payload),
            std::mem::take(&mut self.segments),
            std::mem::take(&mut self.cars),
        );
        for car in cars {
            let (start, first) = (self.payload.len(), self.segments.len());
            let body = payload.get(car.payload.clone()).unwrap_or_default();
            for s in segments.get(car.segments.clone()).unwrap_or_default() {
                if s.ssrc == ssrc {
                    continue;
                }
                let at = self.payload.len() - start;
                self.payload
                    .extend_from_slice(body.get(s.range.clone()).unwrap_or_default());
                self.segments.push(Segment {
                    ssrc: s.ssrc,
                    range: at..self.payload.len() - start,
                });
            }
            if self.segments.len() > first {
                self.cars.push(Car {
                    payload: start..self.payload.len(),
                    segments: first..self.segments.len(),
                    serial: car.serial,
                });
            }
        }
        if self.cars.is_empty() {
            self.since = None;
        }
    }
}
