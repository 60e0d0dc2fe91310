//! The interest union a replica sends each of its links (`docs/relay.md`, "Links"): where
//! its own subscribers look, so that the peer sends at full rate only the objects inside
//! and leaves the others to the link's refresh. This module is the value and its codec;
//! [`super::replica`] makes, sends and takes it.
//!
//! It travels as an RTCP APP packet (RFC 3550 §6.7) named [`NAME`], subtype 0, from the
//! sending replica's relay SSRC (the link's own SSRC on the peer). Its data, big-endian:
//!
//! | octets | field |
//! |---|---|
//! | 1 | version, 1 |
//! | 1 | kind: 0 everything (a subscriber without an area), 1 regions |
//! | 2 | number of regions *n*, at most [`MAX_REGIONS`]; 0 with kind 0 |
//! | 28 × *n* | regions: shape (0 sphere, 1 box), 3 zero octets, centre (3 × f32), size (3 × f32: a sphere's radius then two zeros, a box's half extents) |
//!
//! A region is a subscriber's area at its current centre, at its exit size times
//! [`MARGIN`], so an object is sent at full rate before it can enter the area. More
//! subscribers than [`MAX_REGIONS`] make one box around them all. A union that does not
//! decode is dropped and counted (`union_malformed`); a peer that never sent one gets
//! everything.

use super::area::{Area, DEFAULT_EXIT_SCALE};
use super::limits::{MAX_COORD, MAX_EXIT_SCALE, MAX_SIZE};

/// The APP packet's name.
pub const NAME: [u8; 4] = *b"GSIU";

/// The APP packet's subtype.
pub const SUBTYPE: u8 = 0;

/// Regions a union holds; more subscribers are covered by one box.
pub const MAX_REGIONS: usize = 32;

/// A region's size over its subscriber's exit size: room for the centre's motion until
/// the next union.
pub const MARGIN: f32 = 1.5;

const VERSION: u8 = 1;
const HEADER: usize = 4;
const REGION: usize = 28;

/// The largest size a region may have: an area's at its largest exit, with the margin.
const MAX_REGION: f32 = MAX_SIZE * MAX_EXIT_SCALE * MARGIN;

/// Where a replica's subscribers look.
#[derive(Debug, Clone, PartialEq)]
pub enum Union {
    /// Somewhere a subscriber sees everything.
    Everything,
    /// Only these regions (none: no subscriber looks anywhere).
    Regions(Vec<Region>),
}

/// One region of a union.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Region {
    /// Its centre.
    pub center: [f32; 3],
    /// Its shape and size.
    pub shape: Shape,
}

/// A region's shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// A sphere of this radius.
    Sphere(f32),
    /// An axis-aligned box of these half extents.
    Box([f32; 3]),
}

impl Region {
    fn contains(&self, p: [f32; 3]) -> bool {
        let d = [0, 1, 2].map(|i| p[i] - self.center[i]);
        match self.shape {
            Shape::Sphere(r) => d.iter().map(|v| v * v).sum::<f32>() <= r * r,
            Shape::Box(h) => (0..3).all(|i| d[i].abs() <= h[i]),
        }
    }

    /// Whether a peer takes it: a centre within the world's bounds, sizes positive and
    /// within an area's largest (with the margin).
    pub(super) fn encodable(&self) -> bool {
        let size = |v: f32| v.is_finite() && v > 0.0 && v <= MAX_REGION;
        self.center
            .iter()
            .all(|v| v.is_finite() && v.abs() <= MAX_COORD)
            && match self.shape {
                Shape::Sphere(r) => size(r),
                Shape::Box(h) => h.into_iter().all(size),
            }
    }

    /// Half extents of the box around it.
    fn half_extents(&self) -> [f32; 3] {
        match self.shape {
            Shape::Sphere(r) => [r; 3],
            Shape::Box(h) => h,
        }
    }

    /// The region of a subscriber's area around `center`, at its exit size with the margin.
    pub(super) fn of_area(area: &Area, center: [f32; 3]) -> Self {
        let shape = match (area.radius, area.half_extents) {
            (Some(r), _) => {
                Shape::Sphere(area.exit_radius.unwrap_or(r * DEFAULT_EXIT_SCALE) * MARGIN)
            }
            (None, Some(h)) => {
                let exit = area
                    .exit_half_extents
                    .unwrap_or(h.map(|v| v * DEFAULT_EXIT_SCALE));
                Shape::Box(exit.map(|v| v * MARGIN))
            }
            // A validated area has one of the two; without either it holds no object.
            (None, None) => Shape::Box([0.0; 3]),
        };
        Self { center, shape }
    }
}

impl Union {
    /// Whether an object at `p` is inside.
    pub fn contains(&self, p: [f32; 3]) -> bool {
        match self {
            Self::Everything => true,
            Self::Regions(r) => r.iter().any(|r| r.contains(p)),
        }
    }

    /// Appends the APP packet's data.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let regions: &[Region] = match self {
            Self::Everything => &[],
            Self::Regions(r) => r,
        };
        let kind = u8::from(matches!(self, Self::Regions(_)));
        // At most MAX_REGIONS by construction; `of_room` merges the rest.
        let n = regions.len().min(MAX_REGIONS);
        out.extend_from_slice(&[VERSION, kind]);
        out.extend_from_slice(&(n as u16).to_be_bytes());
        for r in &regions[..n] {
            let (shape, size) = match r.shape {
                Shape::Sphere(radius) => (0u8, [radius, 0.0, 0.0]),
                Shape::Box(h) => (1, h),
            };
            out.extend_from_slice(&[shape, 0, 0, 0]);
            for v in r.center.iter().chain(&size) {
                out.extend_from_slice(&v.to_be_bytes());
            }
        }
    }

    /// Reads the APP packet's data; a reason when it is not a union this relay sends.
    pub fn decode(data: &[u8]) -> Result<Self, &'static str> {
        const BAD: &str = "union_malformed";
        let (&[version, kind, n0, n1], rest) = data.split_first_chunk::<HEADER>().ok_or(BAD)?;
        let n = usize::from(u16::from_be_bytes([n0, n1]));
        if version != VERSION || n > MAX_REGIONS || rest.len() != n * REGION {
            return Err(BAD);
        }
        match kind {
            0 if n == 0 => return Ok(Self::Everything),
            1 => {}
            _ => return Err(BAD),
        }
        rest.chunks_exact(REGION)
            .map(|c| decode_region(c).ok_or(BAD))
            .collect::<Result<Vec<_>, _>>()
            .map(Self::Regions)
    }
}

/// One region's 28 octets, checked: a known shape, finite coordinates within the world's
/// bounds, sizes positive and within an area's largest.
fn decode_region(c: &[u8]) -> Option<Region> {
    let (&[shape, 0, 0, 0], floats) = c.split_first_chunk::<4>()? else {
        return None;
    };
    let mut v = [0f32; 6];
    for (slot, b) in v.iter_mut().zip(floats.chunks_exact(4)) {
        *slot = f32::from_be_bytes(b.try_into().ok()?);
    }
    let [x, y, z, a, b, c] = v;
    let shape = match shape {
        0 if b == 0.0 && c == 0.0 => Shape::Sphere(a),
        1 => Shape::Box([a, b, c]),
        _ => return None,
    };
    let r = Region {
        center: [x, y, z],
        shape,
    };
    r.encodable().then_some(r)
}

/// The box around every region, if a peer can take it (its centre within the world's
/// bounds, its half extents within a region's largest).
pub(super) fn bounding_box(regions: &[Region]) -> Option<Region> {
    let mut lo = [f32::MAX; 3];
    let mut hi = [f32::MIN; 3];
    for r in regions {
        let h = r.half_extents();
        for i in 0..3 {
            lo[i] = lo[i].min(r.center[i] - h[i]);
            hi[i] = hi[i].max(r.center[i] + h[i]);
        }
    }
    let center = [0, 1, 2].map(|i| (lo[i] + hi[i]) / 2.0);
    let half = [0, 1, 2].map(|i| ((hi[i] - lo[i]) / 2.0).max(f32::MIN_POSITIVE));
    let b = Region {
        center,
        shape: Shape::Box(half),
    };
    b.encodable().then_some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sphere(x: f32, r: f32) -> Region {
        Region {
            center: [x, 0.0, 0.0],
            shape: Shape::Sphere(r),
        }
    }

    #[test]
    fn unions_round_trip() {
        for u in [
            Union::Everything,
            Union::Regions(vec![]),
            Union::Regions(vec![
                sphere(1.0, 2.0),
                Region {
                    center: [-5.0, 6.0, 7.0],
                    shape: Shape::Box([1.0, 2.0, 3.0]),
                },
            ]),
        ] {
            let mut out = Vec::new();
            u.encode(&mut out);
            assert_eq!(out.len() % 4, 0, "whole words for an APP packet");
            assert_eq!(Union::decode(&out), Ok(u));
        }
    }

    #[test]
    fn garbage_is_refused_never_half_read() {
        let mut good = Vec::new();
        Union::Regions(vec![sphere(1.0, 2.0)]).encode(&mut good);
        let mut cases: Vec<Vec<u8>> = vec![vec![], vec![1, 1, 0], vec![2, 1, 0, 0]];
        // A count over the limit, a length that disagrees with the count, an unknown kind.
        cases.push(vec![1, 1, 0, 33]);
        cases.push(good[..good.len() - 4].to_vec());
        let mut kind = good.clone();
        kind[1] = 7;
        cases.push(kind);
        // Everything with regions; an unknown shape; NaN, infinite, negative and huge sizes.
        let mut everything = good.clone();
        everything[1] = 0;
        cases.push(everything);
        let mut shape = good.clone();
        shape[4] = 9;
        cases.push(shape);
        for bad in [f32::NAN, f32::INFINITY, -1.0, 0.0, MAX_REGION * 2.0] {
            let mut c = good.clone();
            c[20..24].copy_from_slice(&bad.to_be_bytes());
            cases.push(c);
        }
        let mut far = good.clone();
        far[8..12].copy_from_slice(&(MAX_COORD * 2.0).to_be_bytes());
        cases.push(far);
        for c in cases {
            assert_eq!(Union::decode(&c), Err("union_malformed"), "{c:?}");
        }
    }

    #[test]
    fn a_region_holds_what_is_inside_it() {
        let u = Union::Regions(vec![sphere(0.0, 10.0)]);
        assert!(u.contains([9.0, 0.0, 0.0]));
        assert!(!u.contains([11.0, 0.0, 0.0]));
        assert!(!Union::Regions(vec![]).contains([0.0; 3]));
        assert!(Union::Everything.contains([1e6, 0.0, 0.0]));
    }

    #[test]
    fn many_regions_become_one_box_around_them_all() {
        let regions: Vec<Region> = (0..40).map(|i| sphere(i as f32 * 10.0, 1.0)).collect();
        let b = bounding_box(&regions).expect("within the bounds");
        let u = Union::Regions(vec![b]);
        for r in &regions {
            assert!(u.contains(r.center));
        }
        assert!(!u.contains([500.0, 0.0, 0.0]));
    }
}
