//! RTP/RTCP over UDP with SRTP: the relay task.

use super::command::RelayHandle;
use crate::metrics::Metrics;
use crate::relay::Relay;
use crate::rtp::SrtpProfile;
use std::net::SocketAddr;
use tokio::task::JoinHandle;

/// How the UDP transport runs.
#[derive(Debug, Clone)]
pub struct UdpConfig {
    /// Address to bind (port 0 picks a free port).
    pub bind: SocketAddr,
    /// Address clients are told to send to (behind NAT / a Kubernetes Service).
    pub advertise: Option<SocketAddr>,
    /// Accept unencrypted RTP from sessions that ask for it (lab interop only).
    pub insecure_plain_rtp: bool,
    /// Profile used when a join names none.
    pub default_profile: SrtpProfile,
}

/// A running UDP transport.
pub struct UdpTransport {
    /// Handle for the control plane.
    pub handle: RelayHandle,
    /// The bound address.
    pub local_addr: SocketAddr,
    /// The relay task; it ends when every handle is dropped.
    pub task: JoinHandle<()>,
}

/// Binds the socket and spawns the relay task that owns `relay`.
pub async fn spawn(
    cfg: UdpConfig,
    relay: Relay,
    metrics: Metrics,
) -> std::io::Result<UdpTransport> {
    let _ = (cfg, relay, metrics);
    todo!("implemented by the UDP transport work")
}
