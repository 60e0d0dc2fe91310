//! A Bevy plugin over the gsrelay client (`gsrelay-client`): the room's objects become
//! entities with a `Transform`, predicted between updates; entities the game marks
//! [`Publish`] are sent to the room.
//!
//! It follows the conventions of Bevy's networking crates (bevy_renet, lightyear):
//! **received in `PreUpdate`** ([`GsRelaySet::Receive`], then [`GsRelaySet::Predict`]), so
//! that `Update` sees this frame's room; **sent in `PostUpdate`** ([`GsRelaySet::Publish`]),
//! after the game moved its entities. The connection is a resource ([`RelayClient`]) and
//! what happens to it arrives as messages ([`Joined`], [`ObjectUpdated`],
//! [`ObjectRemoved`], [`StreamEnded`], [`Ownership`], [`Reconnected`], [`SessionEnded`],
//! [`RelayError`]).
//!
//! The network runs on the plugin's own thread (a one-worker tokio runtime): joining,
//! SRTP, RTCP, the codec, resume and rejoin are the Rust client's, and Bevy's systems
//! only drain a channel, never waiting, so a frame never blocks on the network.
//!
//! ```no_run
//! use bevy::prelude::*;
//! use gsrelay_bevy::{Connect, GsRelayPlugin, Publish, RelayClient, RemoteObject};
//!
//! fn main() {
//!     let connect = Connect::new("http://127.0.0.1:8080", "TOKEN", "dev");
//!     let client = RelayClient::connect(connect).expect("valid settings");
//!     App::new()
//!         .add_plugins((MinimalPlugins, GsRelayPlugin::default()))
//!         .insert_resource(client)
//!         .add_systems(Startup, |mut commands: Commands| {
//!             commands.spawn((Publish::object(1), Transform::default()));
//!         })
//!         .add_systems(Update, |others: Query<(&RemoteObject, &Transform)>| {
//!             for (remote, at) in &others {
//!                 println!("{:08x}/{} at {}", remote.ssrc, remote.object_id, at.translation);
//!             }
//!         })
//!         .run();
//! }
//! ```

mod client;
mod messages;
mod net;
mod publish;
mod remote;
mod settings;

pub use client::{ConnectError, ConnectionState, RelayClient, SendError};
pub use gsrelay_client::JoinOptions;
pub use gsrelay_core::relay::handover::{Kind as OwnershipKind, Reason as OwnershipReason};
pub use gsrelay_core::wire::{Dialect, Object};
pub use messages::*;
pub use net::{EndReason, MAX_QUEUED_EVENTS, Reconnect};
pub use publish::{Publish, PublishKind};
pub use remote::{RemoteObject, RemoteObjects};
pub use settings::{ConfigError, Connect, MAX_PREDICTION, MAX_PUBLISH_HZ, SyncSettings};

use bevy::prelude::*;
use std::time::{SystemTime, UNIX_EPOCH};

/// The plugin: its messages, the [`RemoteObjects`] index, and its systems in
/// [`GsRelaySet`]. It does nothing until a [`RelayClient`] resource is inserted.
#[derive(Debug, Clone, Default)]
pub struct GsRelayPlugin {
    settings: SyncSettings,
}

impl GsRelayPlugin {
    /// The plugin with `settings`, refused when they are out of range.
    pub fn new(settings: SyncSettings) -> Result<Self, ConfigError> {
        settings.validate()?;
        Ok(Self { settings })
    }
}

/// The plugin's settings, as a resource (replace it to change them while running; the
/// systems take it as it is, so set it through [`SyncSettings::validate`]).
#[derive(Resource, Debug, Clone, Copy)]
pub struct RelaySync(pub SyncSettings);

/// The plugin's systems, to order a game's own against.
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GsRelaySet {
    /// `PreUpdate`: the network's events become entities and messages.
    Receive,
    /// `PreUpdate`, after `Receive`: remote objects' `Transform`s are predicted for now.
    Predict,
    /// `PostUpdate`: entities marked [`Publish`] are sent.
    Publish,
}

impl Plugin for GsRelayPlugin {
    fn build(&self, app: &mut App) {
        app.insert_resource(RelaySync(self.settings))
            .init_resource::<RemoteObjects>()
            .init_resource::<remote::Receiver>()
            .add_message::<Joined>()
            .add_message::<ObjectUpdated>()
            .add_message::<ObjectRemoved>()
            .add_message::<StreamEnded>()
            .add_message::<Ownership>()
            .add_message::<Reconnected>()
            .add_message::<SessionEnded>()
            .add_message::<RelayError>()
            .configure_sets(
                PreUpdate,
                (GsRelaySet::Receive, GsRelaySet::Predict).chain(),
            )
            .add_systems(PreUpdate, remote::receive.in_set(GsRelaySet::Receive))
            .add_systems(
                PreUpdate,
                remote::predict_transforms.in_set(GsRelaySet::Predict),
            )
            .add_systems(PostUpdate, publish::publish.in_set(GsRelaySet::Publish));
    }
}

/// A run condition: a [`RelayClient`] is there and joined (`.run_if(relay_joined)`, as
/// bevy_renet's `client_connected`).
pub fn relay_joined(client: Option<Res<RelayClient>>) -> bool {
    client.is_some_and(|c| c.is_joined())
}

/// Now as a Time1: the low 16 bits of milliseconds since the Unix epoch (the draft's
/// clock: prediction assumes the sender's clock and ours agree, as NTP keeps them).
pub(crate) fn time1_now() -> u16 {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    // Time1 is those low 16 bits by definition.
    (ms & 0xffff) as u16
}
