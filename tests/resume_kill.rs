//! Resume across a crash (`docs/api.md`, "Resume"): the `gsrelay` binary in a child
//! process is killed with SIGKILL (`kill -9`: no drain, no BYE) and a new one is started on
//! the same ports with the same token secret. The clients notice the silence and resume
//! with the credential of their join: the new relay opens their sessions again with their
//! SSRCs, the subscriber receives the publisher's stream again under the same SSRC, and
//! the spent credential is refused when replayed. (The same with a relay stopped in
//! process: `tests/resume.rs`.)

mod support;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use gsrelay::client::{Client, JoinOptions};
use gsrelay::format_session_id;
use gsrelay::token::Rights;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;
use support::restart::Relay;
use support::server::{ADMIN, PUBLISH, SUBSCRIBE, token};
use support::transports::{Over, assert_forwarded};
use tokio::time::Instant;

/// Silence from the relay after which the clients take it for gone.
const SILENCE: Duration = Duration::from_secs(1);

/// How long a client may take to notice the silence and resume.
const RESUMED: Duration = Duration::from_secs(10);

impl Relay {
    /// The value of the sample `series` on `/metrics`.
    async fn metric(&self, series: &str) -> Option<f64> {
        let text = reqwest::get(format!("{}/metrics", self.base()))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// Room `r`'s sessions as the relay lists them: (session id, SSRC), sorted.
    async fn sessions(&self) -> Vec<(String, u64)> {
        let room: Value = reqwest::Client::new()
            .get(format!("{}/v1/rooms/r", self.base()))
            .bearer_auth(token("r", ADMIN))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let mut sessions: Vec<(String, u64)> = room["sessions"]
            .as_array()
            .unwrap_or_else(|| panic!("no sessions in {room}"))
            .iter()
            .map(|s| {
                let id = s["session_id"].as_str().unwrap().to_owned();
                (id, s["ssrc"].as_u64().unwrap())
            })
            .collect();
        sessions.sort();
        sessions
    }

    /// Posts a resume of room `r` with `credential` and a token with `rights`.
    async fn post_resume(&self, rights: Rights, credential: &str) -> (StatusCode, Value) {
        let resp = reqwest::Client::new()
            .post(format!("{}/v1/rooms/r/sessions", self.base()))
            .bearer_auth(token("r", rights))
            .json(&json!({"transport": "rtp", "resume": credential}))
            .send()
            .await
            .unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap_or(Value::Null))
    }
}

/// A client of room `r` with `rights` over `over`, taking the relay for gone after
/// [`SILENCE`].
async fn join(relay: &Relay, rights: Rights, over: Over) -> Client {
    let opts = JoinOptions {
        quic: over == Over::Quic,
        silence: Some(SILENCE),
        ..JoinOptions::default()
    };
    let mut c = Client::join(&relay.base(), &token("r", rights), "r", opts)
        .await
        .unwrap();
    if over == Over::Udp {
        // A UDP session's address is latched by its first packet.
        c.send_rr().await.unwrap();
    }
    c
}

/// What the client's resume credential says (its payload, which is not secret; only its
/// signature needs the key).
fn credential_claims(c: &Client) -> Value {
    let credential = c.resume_credential().expect("a resume credential");
    let payload = credential.split('.').nth(1).expect("a JWT");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

/// Reads from the relay, as an app does, until the client finds it silent and comes back
/// ([`Client::rejoin_if_silent`]).
async fn until_back(c: &mut Client, who: &str) {
    let deadline = Instant::now() + RESUMED;
    loop {
        match c.rejoin_if_silent().await {
            Ok(true) => return,
            Ok(false) => {}
            Err(e) => eprintln!("{who}: not back yet: {e}"),
        }
        assert!(
            Instant::now() < deadline,
            "{who} not back within {RESUMED:?}"
        );
        // Nothing the old session receives counts: the relay that knew it is gone. A
        // closed link (QUIC) makes the client silent at once.
        let _ = c.recv(Duration::from_millis(50)).await;
    }
}

async fn resumes_after_kill_9(over: Over) {
    let first = Relay::start().await;
    let mut publisher = join(&first, PUBLISH, over).await;
    let mut sub = join(&first, SUBSCRIBE, Over::Udp).await;
    assert_forwarded(&mut publisher, &mut sub).await;
    let (ssrc, sub_ssrc) = (publisher.ssrc(), sub.ssrc());
    let spent = publisher.resume_credential().unwrap().to_owned();
    assert_eq!(credential_claims(&publisher)["generation"], 0);

    let ports = first.kill_9();
    let second = Relay::restart_on(ports).await;
    until_back(&mut publisher, "the publisher").await;
    until_back(&mut sub, "the subscriber").await;

    // Resumed, not joined afresh: the new relay took each credential (a refused one
    // would have made the client join anew, and its next credential would be of
    // generation 0), and the sessions it opened have the old SSRCs.
    for (c, old_ssrc, who) in [
        (&publisher, ssrc, "publisher"),
        (&sub, sub_ssrc, "subscriber"),
    ] {
        let claims = credential_claims(c);
        assert_eq!(claims["generation"], 1, "the {who} resumed: {claims}");
        assert_eq!(c.ssrc(), old_ssrc, "the {who} keeps its SSRC");
        assert_eq!(claims["ssrc"], old_ssrc);
    }
    let mut reopened = vec![
        (format_session_id(publisher.session()), u64::from(ssrc)),
        (format_session_id(sub.session()), u64::from(sub_ssrc)),
    ];
    reopened.sort();
    assert_eq!(
        second.sessions().await,
        reopened,
        "the new relay holds both sessions again, with their SSRCs"
    );
    let refused = "gsrelay_joins_refused_total{reason=\"resume_stale\"}";
    assert_eq!(second.metric(refused).await, Some(0.0));

    // The subscriber receives the publisher's objects again, from the same SSRC.
    assert_forwarded(&mut publisher, &mut sub).await;

    // The credential the restart found is spent: its SSRC is taken now.
    let (status, body) = second.post_resume(PUBLISH, &spent).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("resume_stale")),
        "{body}"
    );
    assert_eq!(second.metric(refused).await, Some(1.0));
    // The replay took nothing from the resumed session: its objects still come through.
    assert_forwarded(&mut publisher, &mut sub).await;
}

#[tokio::test]
async fn udp_clients_resume_with_their_ssrcs_once_only_after_the_relay_was_killed_and_restarted() {
    resumes_after_kill_9(Over::Udp).await;
}

#[tokio::test]
async fn a_quic_publisher_resumes_with_its_ssrc_once_only_after_the_relay_was_killed_and_restarted()
{
    resumes_after_kill_9(Over::Quic).await;
}
