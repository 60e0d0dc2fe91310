//! Area of interest: a sphere or an axis-aligned box around a fixed point or around the
//! subscriber's own avatar, with separate enter and exit sizes (hysteresis) so an object
//! on the boundary does not flicker in and out.

use super::limits::{MAX_COORD, MAX_EXIT_SCALE, MAX_SIZE, in_range, positive_up_to};
use serde::{Deserialize, Serialize};

/// Exit size as a multiple of the enter size when none is given.
pub const DEFAULT_EXIT_SCALE: f32 = 1.2;

/// The area part of an interest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Area {
    /// A fixed centre; when absent the area follows the subscriber's own avatar.
    pub center: Option<[f32; 3]>,
    /// The objectID of the subscriber's own object that is its avatar (default: its
    /// stream's first Head1, else its first object with a position).
    pub avatar: Option<u64>,
    /// Sphere: an object enters within this distance.
    pub radius: Option<f32>,
    /// Sphere: an object inside leaves beyond this distance (default 1.2 × `radius`).
    pub exit_radius: Option<f32>,
    /// Box: an object enters within these half sizes on x, y and z.
    pub half_extents: Option<[f32; 3]>,
    /// Box: an object inside leaves beyond these (default 1.2 × `half_extents`).
    pub exit_half_extents: Option<[f32; 3]>,
}

impl Area {
    /// Checks the area, naming the offending field and its allowed range.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(c) = self.center {
            for v in c {
                in_range("interest.area.center", v, -MAX_COORD, MAX_COORD)?;
            }
        }
        match (self.radius, self.half_extents) {
            (Some(_), Some(_)) => {
                Err("interest.area: give radius or half_extents, not both".into())
            }
            (None, None) => Err("interest.area: give radius (sphere) or half_extents (box)".into()),
            (Some(r), None) => {
                positive_up_to("interest.area.radius", r, MAX_SIZE)?;
                if self.exit_half_extents.is_some() {
                    return Err("interest.area.exit_half_extents: only with half_extents".into());
                }
                match self.exit_radius {
                    Some(e) => exit_in_range("interest.area.exit_radius", e, r),
                    None => Ok(()),
                }
            }
            (None, Some(h)) => {
                for v in h {
                    positive_up_to("interest.area.half_extents", v, MAX_SIZE)?;
                }
                if self.exit_radius.is_some() {
                    return Err("interest.area.exit_radius: only with radius".into());
                }
                match self.exit_half_extents {
                    Some(e) => e.iter().zip(h).try_for_each(|(e, h)| {
                        exit_in_range("interest.area.exit_half_extents", *e, h)
                    }),
                    None => Ok(()),
                }
            }
        }
    }

    /// The enter size: the radius, or the smallest half extent.
    fn size(&self) -> f32 {
        self.radius
            .or(self.half_extents.map(|h| h[0].min(h[1]).min(h[2])))
            .unwrap_or(0.0)
    }

    /// How far the centre may drift before the room's objects are rescanned.
    pub fn drift_margin(&self) -> f32 {
        self.size() * 0.1
    }

    /// Half extents of a box holding the exit shape plus the drift margin: every object
    /// the area can hold until the next rescan lies within it.
    pub fn reach(&self) -> [f32; 3] {
        let m = self.drift_margin();
        match (self.radius, self.half_extents) {
            (Some(r), _) => [self.exit_radius.unwrap_or(r * DEFAULT_EXIT_SCALE) + m; 3],
            (None, Some(h)) => self
                .exit_half_extents
                .unwrap_or(h.map(|v| v * DEFAULT_EXIT_SCALE))
                .map(|v| v + m),
            (None, None) => [f32::INFINITY; 3],
        }
    }

    /// Whether `p` is inside the area centred at `c`: within the enter size for an
    /// object outside, within the exit size for one already `inside`.
    pub fn contains(&self, c: [f32; 3], p: [f32; 3], inside: bool) -> bool {
        let d = [p[0] - c[0], p[1] - c[1], p[2] - c[2]];
        match (self.radius, self.half_extents) {
            (Some(r), _) => {
                let r = if inside {
                    self.exit_radius.unwrap_or(r * DEFAULT_EXIT_SCALE)
                } else {
                    r
                };
                d[0] * d[0] + d[1] * d[1] + d[2] * d[2] <= r * r
            }
            (None, Some(h)) => {
                let h = if inside {
                    self.exit_half_extents
                        .unwrap_or(h.map(|v| v * DEFAULT_EXIT_SCALE))
                } else {
                    h
                };
                d.iter().zip(h).all(|(d, h)| d.abs() <= h)
            }
            (None, None) => true,
        }
    }
}

/// An exit size: at least the enter size (hysteresis never shrinks the area), at most
/// [`MAX_EXIT_SCALE`] times it and [`MAX_SIZE`].
fn exit_in_range(field: &str, exit: f32, enter: f32) -> Result<(), String> {
    in_range(field, exit, enter, (enter * MAX_EXIT_SCALE).min(MAX_SIZE))
}
