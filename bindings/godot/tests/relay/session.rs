//! The rest of the node's life against a real relay, without Godot: ownership answers,
//! the session coming back after the relay restarted, and garbage refused with a clear
//! message at every entry a script reaches.

use crate::common::{Player, Relay, update_of};
use godot::builtin::{Quaternion, Vector3};
use gsrelay_ffi::{GSR_ERR_ARGUMENT, GSR_ERR_STATE};
use gsrelay_godot::convert::Axes;
use gsrelay_godot::error::BindingError;
use gsrelay_godot::publish::{self, Pose};
use gsrelay_godot::session::{JoinSettings, Session, Transport, interest_arg, u32_arg};
use gsrelay_godot::signals::Signal;

fn still() -> Pose {
    Pose {
        position: Vector3::new(0.0, 1.0, 0.0),
        rotation: Quaternion::IDENTITY,
        velocity: Vector3::ZERO,
        angular_velocity: Vector3::ZERO,
    }
}

#[test]
fn ownership_requests_are_answered_granted_or_refused() {
    let relay = Relay::start();
    let mut alice = Player::join(&relay.settings("yard", "alice"));
    let mut bob = Player::join(&relay.settings("yard", "bob"));
    let alice_ssrc = alice.joined();
    bob.joined();
    let ball = publish::head(Axes::Draft, 5, &still()).unwrap();
    bob.wait_for(
        "Alice's object",
        || alice.session.publish(&[ball]).expect("publish"),
        |s| update_of(s, alice_ssrc, 5),
    );

    bob.session.request_object(alice_ssrc, 5).expect("request");
    let (notice, reason) = bob.wait_for(
        "an answer",
        || {},
        |s| match s {
            Signal::Ownership {
                ssrc,
                object_id: 5,
                notice,
                reason,
            } if *ssrc == alice_ssrc => Some((*notice, *reason)),
            _ => None,
        },
    );
    assert_eq!((notice, reason), ("granted", 0));

    bob.session.request_object(alice_ssrc, 77).expect("request");
    let (notice, reason) = bob.wait_for(
        "an answer",
        || {},
        |s| match s {
            Signal::Ownership {
                object_id: 77,
                notice,
                reason,
                ..
            } => Some((*notice, *reason)),
            _ => None,
        },
    );
    // 2: no_object (docs/relay.md, "Ownership handover").
    assert_eq!((notice, reason), ("refused", 2));
}

#[test]
fn a_session_comes_back_after_the_relay_restarts_and_says_rejoined() {
    let mut relay = Relay::start();
    let mut settings = relay.settings("phoenix", "alice");
    // A quiet relay is taken for gone after 1 s here (15 s by default).
    settings.silence_ms = 1000;
    let mut alice = Player::join(&settings);
    let ssrc = alice.joined();
    relay.restart();
    let (back, same) = alice.wait_for(
        "rejoined",
        || {},
        |s| match s {
            Signal::Rejoined { ssrc, same_ssrc } => Some((*ssrc, *same_ssrc)),
            _ => None,
        },
    );
    // The new relay never saw the session: the library joins again asking for its SSRC,
    // which is free there.
    assert_eq!((back, same), (ssrc, true));
    assert!(alice.session.info().unwrap().is_some(), "joined again");
}

#[test]
fn a_join_that_fails_ends_with_failed_and_refuses_commands_after() {
    // A port nobody listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let settings =
        JoinSettings::new(&format!("http://127.0.0.1:{port}"), "a-token", "nowhere").unwrap();
    let mut lost = Player::join(&settings);
    let message = lost.wait_for(
        "the failed join",
        || {},
        |s| match s {
            Signal::Ended {
                reason: "failed",
                message,
            } => Some(message.clone()),
            _ => None,
        },
    );
    assert!(!message.is_empty(), "the end says why");
    let e = lost
        .session
        .publish(&[publish::head(Axes::Draft, 1, &still()).unwrap()]);
    assert_eq!(e.unwrap_err().status, GSR_ERR_STATE);
    assert_eq!(lost.session.leave().unwrap_err().status, GSR_ERR_STATE);
    assert_eq!(
        lost.session.request_snapshot().unwrap_err().status,
        GSR_ERR_STATE
    );
    assert_eq!(
        lost.session.request_object(1, 1).unwrap_err().status,
        GSR_ERR_STATE
    );
}

#[test]
fn garbage_from_a_script_is_refused_with_the_reason() {
    let refused = |r: Result<JoinSettings, BindingError>, says: &str| {
        let e = r.expect_err("refused");
        assert_eq!(e.status, GSR_ERR_ARGUMENT);
        assert!(e.message.contains(says), "{e} says {says}");
    };
    refused(
        JoinSettings::new("ftp://relay", "t", "r"),
        "http:// or https://",
    );
    refused(JoinSettings::new("", "t", "r"), "http:// or https://");
    refused(
        JoinSettings::new("http://relay", "", "r"),
        "token must not be empty",
    );
    refused(
        JoinSettings::new("http://relay", "t", ""),
        "room must not be empty",
    );
    refused(
        JoinSettings::new("http://relay", "t\0x", "r"),
        "token must not contain a NUL",
    );
    assert!(
        Transport::parse("tcp")
            .unwrap_err()
            .message
            .contains("\"udp\" or \"quic\"")
    );
    assert_eq!(Transport::parse("QUIC").unwrap(), Transport::Quic);
    assert!(
        u32_arg("ssrc", -1)
            .unwrap_err()
            .message
            .contains("between 0 and")
    );
    assert!(u32_arg("silence_ms", 1 << 40).is_err());
    assert_eq!(interest_arg("  ").unwrap(), None);

    // Interest JSON that does not parse as an interest is refused by the library at once.
    let relay = Relay::start();
    let settings = relay.settings("r", "x").interest("{\"areas\": 1}").unwrap();
    let e = Session::join(&settings).unwrap_err();
    assert_eq!(e.status, GSR_ERR_ARGUMENT);
    assert!(e.message.contains("interest_json"), "{e}");
    let settings = relay.settings("r", "x").interest("not json").unwrap();
    assert_eq!(
        Session::join(&settings).unwrap_err().status,
        GSR_ERR_ARGUMENT
    );
    // One out of range is the relay's to refuse: the join ends, saying why.
    let settings = relay
        .settings("r", "x")
        .interest("{\"area\": {\"radius\": -1}}")
        .unwrap();
    let mut refused = Player::join(&settings);
    let message = refused.wait_for(
        "the refused join",
        || {},
        |s| match s {
            Signal::Ended {
                reason: "failed",
                message,
            } => Some(message.clone()),
            _ => None,
        },
    );
    assert!(message.contains("radius"), "{message}");

    // And on a joined session, at once.
    let mut p = Player::join(&relay.settings("r", "x"));
    p.joined();
    let bad = interest_arg("{\"echo\": 3}").unwrap();
    let e = p.session.set_interest(bad.as_deref()).unwrap_err();
    assert_eq!(e.status, GSR_ERR_ARGUMENT, "{e}");
    p.session.set_interest(None).expect("the default interest");
}
