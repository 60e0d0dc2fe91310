//! What one subscriber wants to receive. Set at join and replaced with
//! `PUT /v1/sessions/{id}/interest`; every field is validated with a message naming it.

use super::area::Area;
use super::delivery::Delivery;
use super::limits::BITRATE;
use super::pacing::{PredictionGate, RateTier, validate_tiers};
use crate::wire::ObjectKind;
use serde::{Deserialize, Serialize};

/// A subscriber's interest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Interest {
    /// Receive one's own stream too (off by default).
    pub echo: bool,
    /// Streams (SSRCs) to allow or deny.
    pub streams: Filter<u32>,
    /// Object types to allow or deny: type names (`"Head1"`, case-insensitive) or tag numbers.
    pub types: Filter<TypeSel>,
    /// Area of interest; everything when absent.
    pub area: Option<Area>,
    /// Update-rate tiers by distance from the area's centre (needs `area`).
    pub rates: Vec<RateTier>,
    /// Bandwidth cap for what this subscriber receives, in bits per second.
    pub max_bitrate_bps: Option<u64>,
    /// Skip updates the subscriber can extrapolate (opt-in).
    pub prediction: Option<PredictionGate>,
    /// Per-stream (default) or aggregated delivery.
    #[serde(skip_serializing_if = "Delivery::is_default")]
    pub delivery: Delivery,
}

/// An allow list (everything when absent) and a deny list (applied after it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Filter<T> {
    /// Only these, when present.
    pub allow: Option<Vec<T>>,
    /// Never these.
    pub deny: Vec<T>,
}

impl<T> Default for Filter<T> {
    fn default() -> Self {
        Self {
            allow: None,
            deny: Vec::new(),
        }
    }
}

impl<T> Filter<T> {
    fn admits(&self, matches: impl Fn(&T) -> bool) -> bool {
        self.allow.as_ref().is_none_or(|a| a.iter().any(&matches)) && !self.deny.iter().any(matches)
    }
}

/// An object type by name or by tag number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TypeSel {
    /// A tag number, as sent.
    Tag(u64),
    /// A type name.
    Name(String),
}

impl TypeSel {
    fn matches(&self, tag: u64, kind: ObjectKind) -> bool {
        match self {
            TypeSel::Tag(t) => *t == tag,
            TypeSel::Name(n) => n.eq_ignore_ascii_case(kind.name()),
        }
    }
}

/// The largest list the relay accepts in one filter.
pub const MAX_LIST: usize = 1024;

impl Interest {
    /// Checks the interest, naming the offending field.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(area) = &self.area {
            area.validate()?;
        }
        if !self.rates.is_empty() && self.area.is_none() {
            return Err("interest.rates: needs an area (distances are from its centre)".into());
        }
        validate_tiers(&self.rates)?;
        if let Some(g) = &self.prediction {
            g.validate()?;
        }
        self.delivery.validate()?;
        if let Some(bps) = self.max_bitrate_bps
            && !(BITRATE.0..=BITRATE.1).contains(&bps)
        {
            return Err(format!(
                "interest.max_bitrate_bps: must be between {} and {}",
                BITRATE.0, BITRATE.1
            ));
        }
        for (field, n) in [
            (
                "streams.allow",
                self.streams.allow.as_ref().map_or(0, Vec::len),
            ),
            ("streams.deny", self.streams.deny.len()),
            ("types.allow", self.types.allow.as_ref().map_or(0, Vec::len)),
            ("types.deny", self.types.deny.len()),
        ] {
            if n > MAX_LIST {
                return Err(format!("interest.{field}: more than {MAX_LIST} entries"));
            }
        }
        let lists = [
            (
                "types.allow",
                self.types.allow.as_deref().unwrap_or_default(),
            ),
            ("types.deny", &self.types.deny),
        ];
        for (field, list) in lists {
            for (i, sel) in list.iter().enumerate() {
                if let TypeSel::Name(n) = sel
                    && !ObjectKind::ALL
                        .iter()
                        .any(|k| n.eq_ignore_ascii_case(k.name()))
                {
                    return Err(format!("interest.{field}[{i}]: unknown object type {n:?}"));
                }
            }
        }
        Ok(())
    }

    /// Whether stream `ssrc` is wanted at all (`own` is the subscriber's own stream).
    pub fn admits_stream(&self, ssrc: u32, own: bool) -> bool {
        (!own || self.echo) && self.streams.admits(|s| *s == ssrc)
    }

    /// Whether an object of this tag and kind is wanted.
    pub fn admits_object(&self, tag: u64, kind: ObjectKind) -> bool {
        self.types.admits(|t| t.matches(tag, kind))
    }

    /// True when every object of an admitted stream passes (the fast path forwards the
    /// payload as it came).
    pub fn admits_all_objects(&self) -> bool {
        self.types.allow.is_none()
            && self.types.deny.is_empty()
            && self.area.is_none()
            && self.rates.is_empty()
            && self.prediction.is_none()
    }
}
