//! `gsrelay room` as an operator runs it: the built binary against a relay started in
//! process, with players joined over UDP/SRTP. What the command says it did is checked
//! against the server API itself.

mod support;

use gsrelay::serve::{self as server, Server};
use gsrelay::token::Tokens;
use serde_json::{Value, json};
use std::process::Output;
use std::time::Duration;
use support::moving_head;
use support::server::{ADMIN, PUBLISH_SUBSCRIBE, SECRET, SUBSCRIBE, base, config, now, token};
use support::transports::{WAIT, player};

const BIN: &str = env!("CARGO_BIN_EXE_gsrelay");

/// A relay-wide admin token (`room: "*"`).
fn relay_admin() -> String {
    Tokens::new(SECRET.as_bytes())
        .unwrap()
        .issue("*", "ops", ADMIN, 600, now())
        .unwrap()
}

async fn start() -> Server {
    let cfg = gsrelay::serve::ServeConfig {
        room_closed_secs: 60,
        ..config(1)
    };
    server::start(cfg).await.unwrap()
}

/// `gsrelay room --url <url> [--token <token>] <args>`, with no `GSRELAY_*` variable of
/// the caller's environment.
async fn room_cli(url: &str, token: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(["room", "--url", url]);
    if let Some(t) = token {
        cmd.args(["--token", t]);
    }
    cmd.args(args);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GSRELAY_")) {
        cmd.env_remove(k);
    }
    cmd.output().await.unwrap()
}

/// Runs `gsrelay room` as the relay-wide admin; asserts it succeeded; its stdout.
async fn ok(server: &Server, args: &[&str]) -> String {
    let out = room_cli(&base(server), Some(&relay_admin()), args).await;
    assert!(
        out.status.success(),
        "gsrelay room {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `GET path` on the server API with the relay-wide admin token: status and JSON.
async fn get(server: &Server, path: &str) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .get(format!("{}{path}", base(server)))
        .bearer_auth(relay_admin())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// The cells of the table row whose first cell is `first`.
fn row<'a>(table: &'a str, first: &str) -> Option<Vec<&'a str>> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&first))
}

#[tokio::test]
async fn an_operator_lists_shows_mutes_sets_metadata_removes_and_closes() {
    let server = start().await;
    let mut alice = player(&server, "arena", "alice", PUBLISH_SUBSCRIBE).await;
    let _bob = player(&server, "arena", "bob", SUBSCRIBE).await;
    let _carol = player(&server, "lobby", "carol", SUBSCRIBE).await;
    alice.send_objects(&[moving_head(1, 0.0)]).await.unwrap();

    // list: the JSON answer once the relay counted alice's object, then the table.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let json: Value = serde_json::from_str(&ok(&server, &["list", "--json"]).await).unwrap();
        let arena = json["rooms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["room"] == "arena")
            .cloned()
            .expect("arena listed");
        if arena["objects"] == 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "objects never counted: {json}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let list = ok(&server, &["list"]).await;
    assert_eq!(
        row(&list, "ROOM").unwrap(),
        ["ROOM", "SESSIONS", "PARTICIPANTS", "STREAMS", "OBJECTS"]
    );
    assert_eq!(
        row(&list, "arena").unwrap(),
        ["arena", "2", "2", "1", "1"],
        "{list}"
    );
    assert_eq!(
        row(&list, "lobby").unwrap(),
        ["lobby", "1", "1", "0", "0"],
        "{list}"
    );

    // show: the room and its participants, by identity.
    let show = ok(&server, &["show", "arena"]).await;
    assert!(show.starts_with("room:      arena\n"), "{show}");
    let a = row(&show, "alice").expect("alice shown");
    let ssrc = alice.ssrc().to_string();
    assert_eq!(a[1..], ["1", ssrc.as_str(), "yes", "yes", "no", "null"]);
    assert!(row(&show, "bob").is_some(), "{show}");
    assert!(row(&show, "carol").is_none(), "{show}");
    let shown: Value =
        serde_json::from_str(&ok(&server, &["show", "arena", "--json"]).await).unwrap();
    assert_eq!(shown["room"]["room"], "arena");
    assert_eq!(shown["participants"].as_array().unwrap().len(), 2);

    // mute and unmute: the relay says so too.
    let path = "/v1/rooms/arena/participants/alice";
    assert_eq!(
        ok(&server, &["mute", "arena", "alice"]).await,
        "alice in arena: muted\n"
    );
    assert_eq!(get(&server, path).await.1["muted"], true);
    let participants = ok(&server, &["participants", "arena"]).await;
    assert_eq!(
        row(&participants, "alice").unwrap()[5],
        "yes",
        "{participants}"
    );
    assert_eq!(
        ok(&server, &["unmute", "arena", "alice"]).await,
        "alice in arena: not muted\n"
    );
    assert_eq!(get(&server, path).await.1["muted"], false);

    // metadata: the room's, then a participant's.
    ok(
        &server,
        &["metadata", "arena", r#"{"map":"dust","round":3}"#],
    )
    .await;
    assert_eq!(
        get(&server, "/v1/rooms/arena").await.1["metadata"],
        json!({"map": "dust", "round": 3})
    );
    let said = ok(&server, &["metadata", "arena", "bob", r#"{"team":"red"}"#]).await;
    assert_eq!(said, "metadata of bob in arena: {\"team\":\"red\"}\n");
    let (_, bob) = get(&server, "/v1/rooms/arena/participants/bob").await;
    assert_eq!(bob["metadata"], json!({"team": "red"}));
    // JSON that is not: refused before anything is sent, the metadata unchanged.
    let bad = room_cli(
        &base(&server),
        Some(&relay_admin()),
        &["metadata", "arena", "{map: dust}"],
    )
    .await;
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).starts_with("error: the metadata is not JSON"),
        "{}",
        stderr(&bad)
    );
    assert_eq!(
        get(&server, "/v1/rooms/arena").await.1["metadata"],
        json!({"map": "dust", "round": 3})
    );

    // remove: bob is gone.
    assert_eq!(
        ok(&server, &["remove", "arena", "bob"]).await,
        "removed bob from arena\n"
    );
    let (status, body) = get(&server, "/v1/rooms/arena/participants/bob").await;
    assert_eq!(status, 404, "{body}");
    assert!(row(&ok(&server, &["show", "arena"]).await, "bob").is_none());
    // An identity that is not there: the relay's refusal, exit status 3.
    let out = room_cli(
        &base(&server),
        Some(&relay_admin()),
        &["mute", "arena", "nobody"],
    )
    .await;
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).starts_with("error: participant_not_found: "),
        "{}",
        stderr(&out)
    );

    // close: the room is gone from the list, and showing it is refused.
    assert_eq!(
        ok(&server, &["close", "arena"]).await,
        "closed room arena\n"
    );
    let (status, _) = get(&server, "/v1/rooms/arena").await;
    assert_eq!(status, 404);
    let list = ok(&server, &["list"]).await;
    assert!(row(&list, "arena").is_none(), "{list}");
    assert!(row(&list, "lobby").is_some(), "{list}");
    let out = room_cli(&base(&server), Some(&relay_admin()), &["show", "arena"]).await;
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).starts_with("error: room_not_found: "),
        "{}",
        stderr(&out)
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn refusals_a_missing_token_and_an_unreachable_relay_are_told_apart() {
    let server = start().await;
    let _carol = player(&server, "lobby", "carol", SUBSCRIBE).await;
    let url = base(&server);

    // A room's admin token administers its room, but cannot list every room.
    let room_admin = token("lobby", ADMIN);
    let out = room_cli(&url, Some(&room_admin), &["participants", "lobby"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let out = room_cli(&url, Some(&room_admin), &["list"]).await;
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).starts_with("error: forbidden_room: "),
        "{}",
        stderr(&out)
    );
    // Nor another room.
    let out = room_cli(&url, Some(&room_admin), &["close", "arena"]).await;
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).starts_with("error: forbidden_room: "));
    // A player's token is no admin's.
    let player_token = token("lobby", PUBLISH_SUBSCRIBE);
    let out = room_cli(&url, Some(&player_token), &["show", "lobby"]).await;
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).starts_with("error: forbidden_right: "),
        "{}",
        stderr(&out)
    );
    // Not a token at all.
    let out = room_cli(&url, Some("not-a-token"), &["list"]).await;
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).starts_with("error: token_malformed: "),
        "{}",
        stderr(&out)
    );
    // No token: said before anything is sent.
    let out = room_cli(&url, None, &["list"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("error: no token: give --token or set GSRELAY_TOKEN"),
        "{}",
        stderr(&out)
    );
    // The token and the address from the environment, as a deployment sets them.
    let out = tokio::process::Command::new(BIN)
        .args(["room", "list"])
        .env("GSRELAY_URL", &url)
        .env("GSRELAY_TOKEN", relay_admin())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(row(&String::from_utf8_lossy(&out.stdout), "lobby").is_some());

    // Nothing listening: exit status 4, saying where it tried.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", free.local_addr().unwrap());
    drop(free);
    let out = room_cli(&dead, Some(&relay_admin()), &["list"]).await;
    assert_eq!(out.status.code(), Some(4));
    assert!(
        stderr(&out).starts_with(&format!(
            "error: cannot reach the relay at {dead}/: Connection refused"
        )),
        "{}",
        stderr(&out)
    );
    // Not a URL: a local error.
    let out = room_cli("relay:8080", Some(&relay_admin()), &["list"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--url"), "{}", stderr(&out));
    server.shutdown().await.unwrap();
}

#[test]
fn a_relay_wide_token_needs_the_admin_right() {
    let run = |extra: &[&str]| {
        std::process::Command::new(BIN)
            .args([
                "token",
                "--room",
                "*",
                "--identity",
                "ops",
                "--secret",
                SECRET,
            ])
            .args(extra)
            .env_remove("GSRELAY_TOKEN_SECRET")
            .output()
            .unwrap()
    };
    let out = run(&["--admin"]);
    assert!(out.status.success(), "{out:?}");
    let claims = Tokens::new(SECRET.as_bytes())
        .unwrap()
        .verify(String::from_utf8(out.stdout).unwrap().trim(), now())
        .unwrap();
    assert_eq!(claims.room, "*");
    assert!(claims.admin);
    let out = run(&["--subscribe"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--admin"));
}
