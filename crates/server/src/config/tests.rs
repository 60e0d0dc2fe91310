//! The configuration's layers, its file's errors, its secrets in `Debug`, and its one
//! declaration per setting as clap and the reference see it.

use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cmd {
    #[command(flatten)]
    args: ServeArgs,
}

fn args(flags: &[&str]) -> ServeArgs {
    Cmd::try_parse_from(std::iter::once("serve").chain(flags.iter().copied()))
        .unwrap()
        .args
}

#[test]
fn defaults_match_the_design() {
    let c = ServeConfig::default();
    assert_eq!(c.http_addr.to_string(), "0.0.0.0:8080");
    assert_eq!(c.rtp_addr.to_string(), "0.0.0.0:5004");
    assert_eq!(c.quic_addr.to_string(), "0.0.0.0:4433");
    assert_eq!(c.srtp_profile, SrtpProfile::AesCm128HmacSha1_80);
    assert!(!c.insecure_plain_rtp);
    assert_eq!(ServeConfig::from_toml("").unwrap(), c);
}

#[test]
fn file_sets_keys_and_relay_table() {
    let c = ServeConfig::from_toml(
        r#"
        http_addr = "127.0.0.1:9000"
        srtp_profile = "AEAD_AES_128_GCM"
        log_format = "json"
        insecure_plain_rtp = true
        token_max_ttl_secs = 600
        [relay]
        max_sessions_per_room = 3
        max_rooms = 7
        object_ttl = 2.5
        [http]
        header_timeout = 0.5
        max_in_flight = 4
        cors_allowed_origins = ["https://game.example.com"]
        "#,
    )
    .unwrap();
    assert_eq!(c.http_addr.to_string(), "127.0.0.1:9000");
    assert_eq!(c.srtp_profile, SrtpProfile::AeadAes128Gcm);
    assert_eq!(c.log_format, LogFormat::Json);
    assert!(c.insecure_plain_rtp);
    assert_eq!(c.relay.max_sessions_per_room, 3);
    assert_eq!(c.relay.max_rooms, 7);
    assert_eq!(c.token_max_ttl_secs, 600);
    assert_eq!(c.http.header_timeout, Duration::from_millis(500));
    assert_eq!(c.http.max_in_flight, 4);
    assert_eq!(
        c.http.cors_allowed_origins,
        AllowedOrigins::new(["https://game.example.com"])
    );
    assert_eq!(c.http.body_timeout, HttpLimits::default().body_timeout);
    assert_eq!(c.relay.object_ttl, Duration::from_millis(2500));
    assert_eq!(
        c.relay.payload_budget,
        RelayConfig::default().payload_budget
    );
}

#[test]
fn unknown_keys_are_named() {
    let top = ServeConfig::from_toml("http_adr = \"127.0.0.1:1\"").unwrap_err();
    assert!(format!("{top:#}").contains("http_adr"), "{top:#}");
    let relay = ServeConfig::from_toml("[relay]\nmax_sesions = 1").unwrap_err();
    assert!(format!("{relay:#}").contains("max_sesions"), "{relay:#}");
    let http = ServeConfig::from_toml("[http]\nheader_timout = 1").unwrap_err();
    assert!(format!("{http:#}").contains("header_timout"), "{http:#}");
}

#[test]
fn flags_override_the_file() {
    let file = ServeConfig::from_toml(
        "http_addr = \"127.0.0.1:9000\"\nrtp_addr = \"127.0.0.1:9001\"\n[relay]\npayload_budget = 900",
    )
    .unwrap();
    let c = args(&[
        "--http-addr",
        "127.0.0.1:0",
        "--payload-budget",
        "700",
        "--object-ttl",
        "0.5",
        "--insecure-plain-rtp",
        "--max-sessions",
        "9",
        "--http-idle-timeout",
        "2.5",
        "--http-rate-burst",
        "3",
        "--token-max-ttl-secs",
        "60",
    ])
    .apply(file);
    let off = args(&["--insecure-plain-rtp=no"]).apply(ServeConfig {
        insecure_plain_rtp: true,
        ..ServeConfig::default()
    });
    assert!(!off.insecure_plain_rtp);
    let origins = args(&[
        "--http-cors-allowed-origins",
        "https://a.example,http://b:81",
    ]);
    assert_eq!(
        origins
            .apply(ServeConfig::default())
            .http
            .cors_allowed_origins,
        AllowedOrigins::new(["https://a.example", "http://b:81"])
    );
    let none = args(&["--http-cors-allowed-origins="]).apply(ServeConfig::default());
    assert_eq!(
        none.http.cors_allowed_origins,
        AllowedOrigins::new(Vec::<String>::new())
    );
    assert_eq!(c.http_addr.to_string(), "127.0.0.1:0");
    assert_eq!(c.rtp_addr.to_string(), "127.0.0.1:9001", "file kept");
    assert_eq!(c.relay.payload_budget, 700);
    assert_eq!(c.relay.object_ttl, Duration::from_millis(500));
    assert!(c.insecure_plain_rtp);
    assert_eq!(c.relay.max_sessions, 9);
    assert_eq!(c.http.idle_timeout, Duration::from_millis(2500));
    assert_eq!(c.http.rate_burst, 3);
    assert_eq!(c.token_max_ttl_secs, 60);
}

#[test]
fn bad_flag_values_are_refused() {
    let cmd = |f: &[&str]| Cmd::try_parse_from(std::iter::once("serve").chain(f.iter().copied()));
    assert!(cmd(&["--srtp-profile", "AES_256"]).is_err());
    assert!(cmd(&["--object-ttl", "-1"]).is_err());
    assert!(cmd(&["--http-addr", "nowhere"]).is_err());
    assert!(cmd(&["--log-format", "xml"]).is_err());
}

#[test]
fn debug_hides_the_secret() {
    let c = ServeConfig {
        token_secret: Some("super-secret-value".into()),
        webhook_key: Some("webhook-secret-value".into()),
        webhook_urls: vec!["https://hooks.example.com/in?auth=hook-credential".into()],
        ..ServeConfig::default()
    };
    let s = format!("{c:?}");
    assert!(!s.contains("super-secret-value"), "{s}");
    assert!(!s.contains("webhook-secret-value"), "{s}");
    assert!(!s.contains("hook-credential"), "{s}");
    assert!(s.contains("https://hooks.example.com"), "{s}");
}

const TOKEN_SECRET: &str = "token-secret-0123456789";

/// The error of `cfg`'s webhook configuration, with its context.
fn webhook_error(cfg: ServeConfig) -> String {
    format!("{:#}", cfg.webhooks(TOKEN_SECRET).unwrap_err())
}

fn with_urls(urls: &[&str]) -> ServeConfig {
    ServeConfig {
        webhook_urls: urls.iter().map(|u| (*u).to_owned()).collect(),
        ..ServeConfig::default()
    }
}

#[test]
fn webhooks_are_off_without_urls_and_sign_with_the_token_secret_by_default() {
    assert!(
        ServeConfig::default()
            .webhooks(TOKEN_SECRET)
            .unwrap()
            .is_none()
    );
    let c = with_urls(&["http://127.0.0.1:9000/hooks", "https://hooks.example.com"])
        .webhooks(TOKEN_SECRET)
        .unwrap()
        .unwrap();
    assert_eq!(c.urls.len(), 2);
    assert_eq!(c.key, TOKEN_SECRET.as_bytes());
    assert_eq!(c.issuer, "gsrelay");
    assert_eq!(c.queue, webhooks::DEFAULT_QUEUE);
    assert_eq!(c.attempts, webhooks::DEFAULT_ATTEMPTS);
    let named = ServeConfig {
        webhook_key: Some("webhook-key-0123456789".into()),
        node_name: Some("node-a".into()),
        ..with_urls(&["http://h"])
    };
    let c = named.webhooks(TOKEN_SECRET).unwrap().unwrap();
    assert_eq!(c.key, b"webhook-key-0123456789");
    assert_eq!(c.issuer, "node-a");
}

#[test]
fn bad_webhook_settings_are_refused_naming_the_key() {
    for (urls, want) in [
        (
            &["ftp://hooks.example.com/in"][..],
            "webhook_urls[0]: scheme \"ftp\"",
        ),
        (
            &["http://ok.example", "hooks.example.com/in"][..],
            "webhook_urls[1]: not a URL",
        ),
        (&["http://"][..], "webhook_urls[0]: not a URL"),
        (&["unix:/run/hooks.sock"][..], "webhook_urls[0]: scheme"),
        (
            &["https://user:pw@hooks.example.com"][..],
            "webhook_urls[0]: a user or password",
        ),
    ] {
        let e = webhook_error(with_urls(urls));
        assert!(e.contains(want), "{urls:?}: {e}");
        assert!(!e.contains("pw@"), "the URL is not repeated: {e}");
    }
    let short = ServeConfig {
        webhook_key: Some("short".into()),
        ..with_urls(&["http://h"])
    };
    assert!(webhook_error(short).contains("webhook_key must be at least 16 bytes"));
    for (cfg, want) in [
        (
            ServeConfig {
                webhook_queue: 0,
                ..with_urls(&["http://h"])
            },
            "webhook_queue",
        ),
        (
            ServeConfig {
                webhook_timeout_secs: 0,
                ..with_urls(&["http://h"])
            },
            "webhook_timeout_secs",
        ),
        (
            ServeConfig {
                webhook_attempts: 0,
                ..with_urls(&["http://h"])
            },
            "webhook_attempts",
        ),
    ] {
        assert!(webhook_error(cfg).contains(want), "{want}");
    }
}

#[test]
fn webhook_settings_come_from_file_flags_and_environment_lists() {
    let file = ServeConfig::from_toml(
        r#"
        webhook_urls = ["http://a.example/hooks"]
        webhook_key = "file-webhook-key-0123"
        webhook_queue = 16
        webhook_timeout_secs = 2
        webhook_attempts = 3
        "#,
    )
    .unwrap();
    assert_eq!(file.webhook_urls, ["http://a.example/hooks"]);
    assert_eq!(file.webhook_queue, 16);
    assert_eq!((file.webhook_timeout_secs, file.webhook_attempts), (2, 3));
    let c = args(&[
        "--webhook-urls",
        "http://b.example/x, https://c.example/y",
        "--webhook-queue",
        "2",
    ])
    .apply(file.clone());
    assert_eq!(
        c.webhook_urls,
        ["http://b.example/x", "https://c.example/y"]
    );
    assert_eq!(c.webhook_queue, 2);
    assert_eq!(c.webhook_key.as_deref(), Some("file-webhook-key-0123"));
    let off = args(&["--webhook-urls="]).apply(file);
    assert!(off.webhook_urls.is_empty());
}

#[test]
fn no_flag_keeps_the_file() {
    let file = ServeConfig {
        quic_cert: Some("cert.pem".into()),
        quic_key: Some("key.pem".into()),
        redis_url: Some("redis://r".into()),
        webhook_urls: vec!["http://h".into()],
        udp_max_queue_delay_ms: 9,
        ..ServeConfig::default()
    };
    assert_eq!(args(&[]).apply(file.clone()), file);
}

#[test]
fn flags_set_settings_without_a_default_and_table_keys() {
    let c = args(&[
        "--quic-advertise-addr",
        "192.0.2.1:4433",
        "--quic-cert",
        "c.pem",
        "--quic-key",
        "k.pem",
        "--udp-max-queue-delay-ms",
        "0",
        "--max-rooms",
        "3",
    ])
    .apply(ServeConfig::default());
    assert_eq!(
        c.quic_advertise_addr,
        Some("192.0.2.1:4433".parse().unwrap())
    );
    assert_eq!(c.quic_cert, Some("c.pem".into()));
    assert_eq!(c.quic_key, Some("k.pem".into()));
    assert_eq!(c.udp_max_queue_delay_ms, 0);
    assert_eq!(c.relay.max_rooms, 3);
    let cmd = |f: &[&str]| Cmd::try_parse_from(std::iter::once("serve").chain(f.iter().copied()));
    assert!(
        cmd(&["--quic-cert", "c.pem"]).is_err(),
        "a key goes with it"
    );
    assert!(cmd(&["--rtcp-min-interval", "1"]).is_err(), "file only");
}

#[test]
fn every_flag_is_a_declared_setting_named_by_one_rule() {
    let settings = settings();
    let cmd = ServeArgs::augment_args(clap::Command::new("serve"));
    let flags: Vec<_> = cmd
        .get_arguments()
        .filter_map(|a| a.get_long())
        .map(|l| format!("--{l}"))
        .collect();
    let declared: Vec<_> = settings
        .iter()
        .filter_map(|s| s.flag.as_deref())
        .map(|f| f.split('[').next().unwrap().to_owned())
        .collect();
    assert_eq!(flags, declared);
    for s in &settings {
        assert!(!s.help.is_empty(), "{s:?} has no help");
        let (Some(flag), Some(env)) = (&s.flag, &s.env) else {
            assert_eq!((&s.flag, &s.env), (&None, &None), "{s:?}");
            continue;
        };
        let name = flag.trim_start_matches("--").split('[').next().unwrap();
        assert_eq!(
            *env,
            format!("GSRELAY_{}", name.replace('-', "_").to_uppercase())
        );
        // A top-level key is its flag's name; a table's key is the flag's name without the
        // table's prefix (`--http-` for `[http]`, none for `[relay]`).
        let key = s.key.as_deref().unwrap_or("config");
        let key = key.rsplit(' ').next().unwrap().replace('_', "-");
        assert!(name.ends_with(&key), "{name} sets {key}");
    }
}

#[test]
fn every_default_shown_is_the_default_as_the_file_writes_it() {
    for s in settings() {
        let (Some(key), SettingDefault::Value(value)) = (&s.key, &s.default) else {
            continue;
        };
        let (table, key) = match key.split_once(' ') {
            Some((table, key)) => (format!("{table}\n"), key),
            None => (String::new(), key.as_str()),
        };
        // Numbers, booleans and lists as they are, other values as TOML strings.
        let text = format!("{table}{key} = {value}");
        let parsed = ServeConfig::from_toml(&text)
            .or_else(|_| ServeConfig::from_toml(&format!("{table}{key} = {value:?}")))
            .unwrap_or_else(|e| panic!("{key} = {value}: {e:#}"));
        assert_eq!(parsed, ServeConfig::default(), "{key} = {value}");
    }
}

#[test]
fn the_reference_rows_name_every_key_once() {
    let settings = settings();
    let keys: Vec<_> = settings.iter().filter_map(|s| s.key.as_deref()).collect();
    let mut unique = keys.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), keys.len());
    assert!(keys.contains(&"udp_max_queue_delay_ms"));
    assert!(keys.contains(&"[relay] subscriber_max_bitrate_bps"));
    assert!(keys.contains(&"[http] cors_allowed_origins"));
    let udp = settings
        .iter()
        .find(|s| s.key.as_deref() == Some("udp_max_queue_delay_ms"))
        .unwrap();
    assert_eq!(udp.flag.as_deref(), Some("--udp-max-queue-delay-ms"));
    assert_eq!(udp.env.as_deref(), Some("GSRELAY_UDP_MAX_QUEUE_DELAY_MS"));
    assert_eq!(udp.default, SettingDefault::Value("5".into()));
    let plain = settings
        .iter()
        .find(|s| s.key.as_deref() == Some("insecure_plain_rtp"))
        .unwrap();
    assert_eq!(plain.flag.as_deref(), Some("--insecure-plain-rtp[=BOOL]"));
}

#[test]
fn debug_hides_the_redis_url() {
    let c = ServeConfig {
        redis_url: Some("redis://:hunter2@redis:6379/0".into()),
        ..ServeConfig::default()
    };
    let s = format!("{c:?}");
    assert!(!s.contains("hunter2"), "{s}");
    assert!(s.contains("redis_url: Some(\"<set>\")"), "{s}");
    assert!(s.contains("udp_max_queue_delay_ms: 5"), "{s}");
}
