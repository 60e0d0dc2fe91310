//! What a connection and the plugin are configured with, and the checks that refuse
//! garbage before anything reaches the network thread.

use gsrelay_client::JoinOptions;
use std::time::Duration;

/// The longest room name the relay accepts (`gsrelay token`, `docs/api.md`).
const MAX_ROOM_LEN: usize = 64;

/// The longest token taken: a relay's tokens are a few hundred bytes; anything near this
/// is not one.
const MAX_TOKEN_LEN: usize = 8 * 1024;

/// The fastest publish rate taken: more than a frame's worth of packets per frame at any
/// sane frame rate is a mistake, and the relay paces senders anyway.
pub const MAX_PUBLISH_HZ: f64 = 240.0;

/// The longest prediction horizon taken: the draft's rates describe the next second or so,
/// and beyond a few seconds an extrapolation only drifts away.
pub const MAX_PREDICTION: Duration = Duration::from_secs(10);

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The relay's HTTP address does not parse or is not http(s).
    #[error("the relay's HTTP address {0:?} is not an http:// or https:// URL with a host")]
    Http(String),
    /// The token is empty, too long or holds characters no token has.
    #[error("the token must be 1 to {MAX_TOKEN_LEN} printable ASCII characters without spaces")]
    Token,
    /// The room name breaks the relay's rule.
    #[error("the room name {0:?} must be 1 to 64 characters of A-Z, a-z, 0-9, '_', '.' and '-'")]
    Room(String),
    /// The publish rate is not a number in range.
    #[error("the publish rate must be above 0 and at most {MAX_PUBLISH_HZ} per second (got {0})")]
    PublishRate(f64),
    /// The prediction horizon is too long.
    #[error("the prediction horizon must be at most {MAX_PREDICTION:?} (got {0:?})")]
    Prediction(Duration),
    /// The object timeout is zero.
    #[error("the object timeout must be longer than zero")]
    ObjectTimeout,
}

/// Where and how to join: the relay, the token, the room, the client's options.
#[derive(Debug, Clone)]
pub struct Connect {
    /// The relay's HTTP API, e.g. `http://127.0.0.1:8080`.
    pub http: String,
    /// An access token for `room` (`gsrelay token`, or the game's backend).
    pub token: String,
    /// The room.
    pub room: String,
    /// The client's options: transport, dialect, interest, room stream, silence.
    pub options: JoinOptions,
    /// Ask for the whole room once joined (a FIR naming the relay), so that a late joiner
    /// gets every object at once rather than at each sender's next update. On by default.
    pub snapshot: bool,
}

impl Connect {
    /// A join of `room` at `http` with `token`, default options, asking for the room.
    pub fn new(http: impl Into<String>, token: impl Into<String>, room: impl Into<String>) -> Self {
        Self {
            http: http.into(),
            token: token.into(),
            room: room.into(),
            options: JoinOptions::default(),
            snapshot: true,
        }
    }

    /// The same with `options`.
    pub fn with_options(self, options: JoinOptions) -> Self {
        Self { options, ..self }
    }

    /// Refuses what the relay would refuse anyway, before a thread or socket is used.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let url = url::Url::parse(&self.http).map_err(|_| ConfigError::Http(self.http.clone()))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(ConfigError::Http(self.http.clone()));
        }
        let token_ok = (1..=MAX_TOKEN_LEN).contains(&self.token.len())
            && self.token.bytes().all(|b| b.is_ascii_graphic());
        if !token_ok {
            return Err(ConfigError::Token);
        }
        let room_ok = (1..=MAX_ROOM_LEN).contains(&self.room.len())
            && self
                .room
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if !room_ok {
            return Err(ConfigError::Room(self.room.clone()));
        }
        Ok(())
    }
}

/// How the plugin keeps entities and the room in step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyncSettings {
    /// How often the entities marked [`Publish`](crate::Publish) are sent, per second.
    pub publish_hz: f64,
    /// How far past an object's last update its prediction goes; past that it stays where
    /// the prediction put it (a sender that stopped does not drift away forever). The
    /// viewer's choice: one second.
    pub max_prediction: Duration,
    /// An object not updated for this long is taken as gone and its entity despawned:
    /// the relay drops such an object (`object_ttl`, 30 s by default) and tells nobody.
    /// `None` keeps objects until their stream ends (room objects live 600 s at the
    /// relay: a game that uses them sets this to that, or `None`).
    pub object_timeout: Option<Duration>,
}

impl Default for SyncSettings {
    fn default() -> Self {
        Self {
            publish_hz: 20.0,
            max_prediction: Duration::from_secs(1),
            object_timeout: Some(Duration::from_secs(30)),
        }
    }
}

impl SyncSettings {
    /// Refuses a rate that is not a number in range, a horizon past
    /// [`MAX_PREDICTION`] and a zero timeout.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.publish_hz > 0.0 && self.publish_hz <= MAX_PUBLISH_HZ) {
            return Err(ConfigError::PublishRate(self.publish_hz));
        }
        if self.max_prediction > MAX_PREDICTION {
            return Err(ConfigError::Prediction(self.max_prediction));
        }
        if self.object_timeout == Some(Duration::ZERO) {
            return Err(ConfigError::ObjectTimeout);
        }
        Ok(())
    }

    /// The time between two publishes.
    pub fn publish_interval(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.publish_hz)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_refused_with_what_is_wrong() {
        let ok = Connect::new("http://127.0.0.1:8080", "a.b.c", "dev");
        assert_eq!(ok.validate(), Ok(()));
        for http in ["", "127.0.0.1:8080", "ftp://x", "http://", "not a url"] {
            let c = Connect::new(http, "a.b.c", "dev");
            assert_eq!(c.validate(), Err(ConfigError::Http(http.into())), "{http}");
        }
        for token in ["", "a b", "tok\n", "é"] {
            let c = Connect::new("http://h", token, "dev");
            assert_eq!(c.validate(), Err(ConfigError::Token), "{token:?}");
        }
        let long = "r".repeat(65);
        for room in ["", "a/b", "a b", "é", long.as_str()] {
            let c = Connect::new("http://h", "t", room);
            assert_eq!(
                c.validate(),
                Err(ConfigError::Room(room.into())),
                "{room:?}"
            );
        }
        let bad = |s: SyncSettings| s.validate().unwrap_err();
        let d = SyncSettings::default();
        assert_eq!(d.validate(), Ok(()));
        for hz in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e6] {
            let got = bad(SyncSettings {
                publish_hz: hz,
                ..d
            });
            assert!(matches!(got, ConfigError::PublishRate(_)), "{hz}");
        }
        let far = Duration::from_secs(11);
        assert_eq!(
            bad(SyncSettings {
                max_prediction: far,
                ..d
            }),
            ConfigError::Prediction(far)
        );
        assert_eq!(
            bad(SyncSettings {
                object_timeout: Some(Duration::ZERO),
                ..d
            }),
            ConfigError::ObjectTimeout
        );
    }
}
