//! A page of another origin using the relay in headless Chromium, driven by Playwright
//! (`web/test/cors.mjs`): it imports `/client/gsrelay.js` from the relay and joins,
//! changes its interest and leaves with a bearer token. Two relays, the built binary as
//! an operator runs it: one with the default policy (any origin), one started with
//! `--http-cors-allowed-origins` naming only one of the page's two origins, which refuses
//! the other. Needs Debian's `chromium` and `playwright-core` in `.tools`
//! (scripts/test.sh installs both).

mod support;

use support::browser;
use support::serve::Serve;
use support::server::PUBLISH_SUBSCRIBE;

#[test]
fn a_page_of_another_origin_imports_the_client_and_joins() {
    let mut cmd = browser::node("cors.mjs");
    // A free loopback port for the page, known before the relay that lists it starts.
    let page_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let open = Serve::dev(&[]);
    let listed_origin = format!("http://127.0.0.1:{page_port}");
    let listed = Serve::dev(&["--http-cors-allowed-origins", &listed_origin]);

    cmd.env("GSRELAY_PAGE_PORT", page_port.to_string())
        .env("GSRELAY_OPEN_BASE", &open.base)
        .env(
            "GSRELAY_OPEN_TOKEN",
            open.token("dev", "player", PUBLISH_SUBSCRIBE),
        )
        .env("GSRELAY_LISTED_BASE", &listed.base)
        .env(
            "GSRELAY_LISTED_TOKEN",
            listed.token("dev", "player", PUBLISH_SUBSCRIBE),
        );
    let out = browser::output(&mut cmd);
    browser::assert_passed("cors.mjs", &out);
}
