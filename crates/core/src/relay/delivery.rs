//! How a subscriber receives the room: one RTP stream per sender, or one aggregated stream
//! from the relay (the `delivery` field of the interest; `docs/relay.md`, "Delivery modes").

use super::limits::MAX_DELAY_MS;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The delivery mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryMode {
    /// Each sender's stream as its own RTP stream (RFC 7667 §3.7), for any RTP receiver.
    #[default]
    PerStream,
    /// One stream from the relay's SSRC carrying many senders' objects in containers
    /// (RFC 7667 §3.6, the relay as a mixer).
    Aggregated,
}

/// The `delivery` field of an interest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Delivery {
    /// The mode.
    pub mode: DeliveryMode,
    /// Aggregated mode: the longest an update waits for a packet to fill, in milliseconds;
    /// 0 sends what each input batch brought. [`Delivery::DEFAULT_MAX_DELAY_MS`] when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_delay_ms: Option<u32>,
}

impl Delivery {
    /// `max_delay_ms` when the interest does not say.
    pub const DEFAULT_MAX_DELAY_MS: u32 = 10;

    /// Aggregated delivery, waiting at most `max_delay_ms` (the default when `None`).
    pub fn aggregated(max_delay_ms: Option<u32>) -> Self {
        Self {
            mode: DeliveryMode::Aggregated,
            max_delay_ms,
        }
    }

    /// Whether the mode is aggregated.
    pub fn is_aggregated(&self) -> bool {
        self.mode == DeliveryMode::Aggregated
    }

    /// Whether this is the default (per-stream) delivery.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// How long an update may wait before its packet goes.
    pub fn max_delay(&self) -> Duration {
        let ms = self.max_delay_ms.unwrap_or(Self::DEFAULT_MAX_DELAY_MS);
        Duration::from_millis(u64::from(ms))
    }

    /// Checks the field, naming the offending part.
    pub fn validate(&self) -> Result<(), String> {
        match (self.mode, self.max_delay_ms) {
            (DeliveryMode::PerStream, Some(_)) => {
                Err("interest.delivery.max_delay_ms: only with mode \"aggregated\"".into())
            }
            (_, Some(ms)) if ms > MAX_DELAY_MS => Err(format!(
                "interest.delivery.max_delay_ms: must be between 0 and {MAX_DELAY_MS}"
            )),
            _ => Ok(()),
        }
    }
}
