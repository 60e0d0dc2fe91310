//! A whole relay from `server::start` on loopback, every address on port 0 so tests run in
//! parallel, and access tokens for it.

use gsrelay::serve::ServeConfig;
use gsrelay::serve::{self as server, Server};
use gsrelay::token::{Rights, Tokens};
use std::time::{SystemTime, UNIX_EPOCH};

/// The token secret of every server started here.
pub const SECRET: &str = "gsrelay-test-secret-0123456789abcdef";

pub const PUBLISH: Rights = Rights {
    publish: true,
    subscribe: false,
    admin: false,
};
pub const SUBSCRIBE: Rights = Rights {
    publish: false,
    subscribe: true,
    admin: false,
};
pub const ADMIN: Rights = Rights {
    publish: false,
    subscribe: false,
    admin: true,
};
pub const PUBLISH_SUBSCRIBE: Rights = Rights {
    publish: true,
    subscribe: true,
    admin: false,
};
pub const ALL: Rights = Rights {
    publish: true,
    subscribe: true,
    admin: true,
};

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A config on loopback port 0 that accepts tokens signed with [`SECRET`], whose drain
/// waits at most `drain_grace_secs` for the last session.
pub fn config(drain_grace_secs: u64) -> ServeConfig {
    let local = "127.0.0.1:0".parse().unwrap();
    ServeConfig {
        http_addr: local,
        rtp_addr: local,
        quic_addr: local,
        webrtc_addr: local,
        token_secret: Some(SECRET.into()),
        drain_grace_secs,
        // The tests share a loaded machine, where a woken shard may wait for a CPU longer
        // than the default 5 ms: shedding the only update a test waits for would fail it
        // for the machine's sake. tests/udp_queue.rs tests the shedding itself.
        udp_max_queue_delay_ms: 250,
        // The default is `recordings/` under the working directory, which for a test is
        // the checkout: a test (or a generated request of schemathesis) that starts a
        // recording would leave files there. One directory per test process under the
        // system's temporary one keeps the checkout clean and parallel test binaries
        // apart; it is made only when a recording starts.
        recording_dir: std::env::temp_dir()
            .join(format!("gsrelay-test-recordings-{}", std::process::id())),
        ..ServeConfig::default()
    }
}

/// A started server with [`config`] and a drain grace of one second.
pub async fn start() -> Server {
    server::start(config(1)).await.unwrap()
}

/// The base URL of the server's HTTP API.
pub fn base(server: &Server) -> String {
    format!("http://{}", server.http_addr)
}

/// The value of the sample `series` (a name, with its labels if it has any) on the
/// server's `/metrics`; `None` when it is not there.
pub async fn metric(server: &Server, series: &str) -> Option<f64> {
    let text = reqwest::get(format!("{}/metrics", base(server)))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// `GET /v1/rooms/{room}` with an admin token: the room as the server shows it.
pub async fn room_info(server: &Server, room: &str) -> serde_json::Value {
    reqwest::Client::new()
        .get(format!("{}/v1/rooms/{room}", base(server)))
        .bearer_auth(token(room, ADMIN))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A token for `room` with `rights`, issued now for ten minutes to the identity `tester`.
pub fn token(room: &str, rights: Rights) -> String {
    token_at(room, rights, now(), 600)
}

/// A token for `room` with `rights`, issued at `iat` for `ttl` seconds.
pub fn token_at(room: &str, rights: Rights, iat: u64, ttl: u64) -> String {
    token_as(room, "tester", rights, iat, ttl)
}

/// A token for `room` with `rights`, issued to `identity` at `iat` for `ttl` seconds.
pub fn token_as(room: &str, identity: &str, rights: Rights, iat: u64, ttl: u64) -> String {
    Tokens::new(SECRET.as_bytes())
        .unwrap()
        .issue(room, identity, rights, ttl, iat)
        .unwrap()
}

/// Serves the HTTP API alone, in front of `shards`, on a loopback port; returns its base
/// URL.
pub async fn serve_api(shards: gsrelay::internal::shards::Shards) -> String {
    use gsrelay::internal::http::{self, ApiState};
    let state = ApiState::new(
        shards,
        Tokens::new(SECRET.as_bytes()).unwrap(),
        gsrelay::internal::Metrics::new(),
        gsrelay::rtp::SrtpProfile::default(),
        gsrelay::internal::limits::HttpLimits::default(),
        Default::default(),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, http::router(state)).await });
    format!("http://{addr}")
}
