//! `gsrelay serve` and `gsrelay token` as a user runs them: the built binary. (SIGTERM
//! and the drain: `tests/drain.rs`.)

mod support;

use gsrelay::token::{Claims, Tokens};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::serve::{BIN, Serve};

const SECRET: &str = "cli-test-secret-0123456789abcdef";

fn gsrelay(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("GSRELAY_TOKEN_SECRET")
        .output()
        .unwrap()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The claims of the token that a successful `gsrelay token` printed, verified with
/// [`SECRET`].
fn verified_claims(out: Output) -> Claims {
    assert!(out.status.success(), "{out:?}");
    let token = String::from_utf8(out.stdout).unwrap();
    Tokens::new(SECRET.as_bytes())
        .unwrap()
        .verify(token.trim(), now())
        .unwrap()
}

#[test]
fn token_output_verifies() {
    let out = gsrelay(&[
        "token",
        "--room",
        "arena-1",
        "--identity",
        "alice",
        "--publish",
        "--ttl",
        "120",
        "--secret",
        SECRET,
    ]);
    let claims = verified_claims(out);
    assert_eq!(claims.room, "arena-1");
    assert_eq!(claims.sub, "alice");
    assert!(claims.publish && !claims.subscribe && !claims.admin);
    assert!(claims.exp.abs_diff(now() + 120) <= 5, "{claims:?}");
}

#[test]
fn token_secret_comes_from_the_environment() {
    let out = Command::new(BIN)
        .args(["token", "--room", "r", "--identity", "bob", "--admin"])
        .env("GSRELAY_TOKEN_SECRET", SECRET)
        .output()
        .unwrap();
    let claims = verified_claims(out);
    assert!(claims.admin && !claims.publish && !claims.subscribe);
}

#[test]
fn token_refuses_no_rights_and_short_secrets() {
    let none = gsrelay(&[
        "token",
        "--room",
        "r",
        "--identity",
        "i",
        "--secret",
        SECRET,
    ]);
    assert!(!none.status.success());
    assert!(String::from_utf8_lossy(&none.stderr).contains("--publish"));
    let short = gsrelay(&[
        "token",
        "--room",
        "r",
        "--identity",
        "i",
        "--publish",
        "--secret",
        "short",
    ]);
    assert!(!short.status.success());
    assert!(String::from_utf8_lossy(&short.stderr).contains("at least 16 bytes"));
}

#[test]
fn help_lists_every_setting_with_its_variable() {
    let out = gsrelay(&["serve", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--config",
        "--http-addr",
        "--rtp-addr",
        "--quic-addr",
        "--webrtc-addr",
        "--webrtc-advertise-addr",
        "--rtp-advertise-addr",
        "--token-secret",
        "--insecure-plain-rtp",
        "--srtp-profile",
        "--log-format",
        "--drain-grace-secs",
        "--payload-budget",
        "--max-sessions-per-room",
        "--max-rooms",
        "--max-sessions",
        "--object-ttl",
        "--token-max-ttl-secs",
        "--http-header-timeout",
        "--http-body-timeout",
        "--http-idle-timeout",
        "--http-max-in-flight",
        "--http-rate-per-sec",
        "--http-rate-burst",
        "--webhook-urls",
        "--webhook-key",
        "--webhook-queue",
        "--webhook-timeout-secs",
        "--webhook-attempts",
    ] {
        assert!(help.contains(flag), "serve --help lacks {flag}");
        let var = format!(
            "GSRELAY_{}",
            flag[2..].replace('-', "_").to_ascii_uppercase()
        );
        assert!(help.contains(&var), "serve --help lacks {var}");
    }
    let out = gsrelay(&["token", "--help"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("GSRELAY_TOKEN_SECRET")
    );
}

#[test]
fn serve_refuses_an_unknown_config_key() {
    let path = std::env::temp_dir().join(format!("gsrelay-bad-config-{}.toml", std::process::id()));
    std::fs::write(
        &path,
        "http_addr = \"127.0.0.1:0\"\n[relay]\nmax_sesions = 3\n",
    )
    .unwrap();
    let out = gsrelay(&["serve", "--config", path.to_str().unwrap()]);
    std::fs::remove_file(&path).unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("max_sesions"), "{stderr}");
}

#[test]
fn serve_on_embedded_defaults_prints_a_working_example_token() {
    // needs the UDP transport
    let relay = Serve::spawn(
        Command::new(BIN)
            .args([
                "serve",
                "--quic-addr",
                "127.0.0.1:0",
                "--webrtc-addr",
                "127.0.0.1:0",
            ])
            // Port 0 through the environment, to cover that path too.
            .env("GSRELAY_HTTP_ADDR", "127.0.0.1:0")
            .env("GSRELAY_RTP_ADDR", "127.0.0.1:0")
            .env_remove("GSRELAY_TOKEN_SECRET")
            .env_remove("GSRELAY_CONFIG"),
    );
    let wait = Duration::from_secs(30);
    let secret = relay.line("dev token secret: ", wait);
    let secret = secret.trim_start_matches("dev token secret: ");
    let example = relay.line("example token ", wait);
    let token = example.rsplit(' ').next().unwrap();
    let claims = Tokens::new(secret.as_bytes())
        .unwrap()
        .verify(token, now())
        .unwrap();
    assert!(claims.publish && claims.subscribe && claims.admin);

    // The printed curl command works as printed.
    let curl = relay.line("try: curl ", wait);
    let url = curl
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let status = runtime.block_on(async {
        reqwest::Client::new()
            .post(url)
            .bearer_auth(token)
            .json(&serde_json::json!({"transport": "rtp"}))
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(status, reqwest::StatusCode::CREATED);

    // The printed viewer address carries the same token in its fragment, and loads.
    let viewer = relay.line("viewer: ", wait);
    let url = viewer.trim_start_matches("viewer: ");
    let (page, fragment) = url.split_once('#').unwrap();
    assert_eq!(fragment, format!("token={token}&room=dev"));
    let resp = runtime.block_on(async { reqwest::get(page).await.unwrap() });
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    assert_eq!(
        resp.headers()["content-type"],
        "text/html; charset=utf-8",
        "{page}"
    );
}
