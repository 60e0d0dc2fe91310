//! `docs/openapi.json`, the OpenAPI description a relay serves at `/v1/openapi.json`, held
//! to the code so that it cannot drift:
//!
//! - the router's routes and methods are exactly the described operations, both ways
//!   (`every_route_is_described_and_every_described_route_is_served`);
//! - real requests to a live relay, successes and refusals, get a status, headers,
//!   content type and body that the description gives for their operation, and every
//!   operation succeeds at least once among them (`live_answers_match_the_description`);
//! - the error codes of `docs/api.md`'s table are the description's, status by status,
//!   and every described error answer uses the error body of its status
//!   (`the_error_codes_are_those_of_the_docs_table`);
//! - every example in the description is valid against its schema
//!   (`every_example_is_valid`);
//! - schemathesis generates requests from the description, valid and invalid, against a
//!   live relay and checks every answer (`schemathesis_finds_nothing`).
//!
//! Adding a route: describe it under `paths` in `docs/openapi.json` (its error answers by
//! `$ref` to `components/responses`), and add a request that succeeds on it to
//! `live_answers_match_the_description`. The tests name whatever is missing.
//!
//! schemathesis is a Python tool that `scripts/test.sh` installs into `.venv`. Where it
//! cannot be, `GSRELAY_SKIP_SCHEMATHESIS=1` skips that one test (it says so on stderr);
//! otherwise a missing schemathesis fails it.

mod support;

use gsrelay::client::{Received, WebRtcPeer};
use gsrelay::internal::command::RelayHandle;
use gsrelay::internal::http::{self, ApiState};
use gsrelay::internal::limits::HttpLimits;
use gsrelay::internal::shards::Shards;
use gsrelay::serve as server;
use gsrelay::token::Tokens;
use reqwest::Method;
use reqwest::header::{self, HeaderMap};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use support::moving_head;
use support::recording::TempDir;
use support::server::{
    ADMIN, ALL, PUBLISH, PUBLISH_SUBSCRIBE, SECRET, SUBSCRIBE, base, config, serve_api, token,
    token_as,
};
use support::transports::{WAIT, player, until_flowing};

/// Where the description lives in the repository.
const FILE: &str = "docs/openapi.json";

/// The methods an OpenAPI path item may describe, as its keys spell them.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `docs/openapi.json`, parsed.
fn description() -> Value {
    let text = std::fs::read_to_string(root().join(FILE)).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{FILE} is not JSON: {e}"))
}

/// What the description says of one answer.
struct Description(Value);

impl Description {
    fn load() -> Self {
        Self(description())
    }

    /// `v` with its `$ref` (a local JSON pointer) followed, as often as it takes.
    fn resolve<'a>(&'a self, mut v: &'a Value) -> &'a Value {
        while let Some(r) = v.get("$ref").and_then(Value::as_str) {
            let pointer = r
                .strip_prefix('#')
                .unwrap_or_else(|| panic!("{FILE}: only local references, not {r}"));
            v = self
                .0
                .pointer(pointer)
                .unwrap_or_else(|| panic!("{FILE}: {r} leads nowhere"));
        }
        v
    }

    /// The operation `method` `template` (`"get"`, `"/v1/rooms/{room}"`).
    fn operation(&self, method: &str, template: &str) -> Option<&Value> {
        self.0["paths"].get(template)?.get(method)
    }

    /// Every described operation, as `("GET", "/v1/rooms/{room}")`.
    fn operations(&self) -> BTreeSet<(String, String)> {
        let paths = self.0["paths"].as_object().expect("paths");
        paths
            .iter()
            .flat_map(|(path, item)| {
                METHODS
                    .iter()
                    .filter(|m| item.get(**m).is_some())
                    .map(move |m| (m.to_uppercase(), path.clone()))
            })
            .collect()
    }

    /// A validator of `schema`, whose references reach into the description's components.
    fn validator(&self, schema: &Value) -> jsonschema::Validator {
        // References are JSON pointers from the document's root (`#/components/...`): a
        // schema document with the components beside it resolves them as they are.
        let root = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "components": self.0["components"],
            "allOf": [schema],
        });
        jsonschema::draft202012::new(&root)
            .unwrap_or_else(|e| panic!("{FILE}: invalid schema {schema}: {e}"))
    }

    /// Whether `instance` is valid against `schema`: `Err` with every reason when not.
    fn validate(&self, schema: &Value, instance: &Value) -> Result<(), String> {
        let validator = self.validator(schema);
        let errors: Vec<String> = validator
            .iter_errors(instance)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// Checks `answer` to `method template` against the response the description gives
    /// for its status.
    fn check(&self, method: &str, template: &str, answer: &Answer) -> Result<(), String> {
        let op = self
            .operation(&method.to_lowercase(), template)
            .ok_or_else(|| format!("{FILE} has no operation {method} {template}"))?;
        let status = answer.status.to_string();
        let response = op["responses"]
            .get(&status)
            .or_else(|| op["responses"].get("default"))
            .ok_or_else(|| {
                format!(
                    "{FILE} gives no {status} answer for {method} {template}, which answered \
                     it: {}",
                    answer.text()
                )
            })?;
        self.check_response(response, answer)
    }

    /// Checks `answer` against one response object of the description.
    fn check_response(&self, response: &Value, answer: &Answer) -> Result<(), String> {
        let response = self.resolve(response);
        let empty = serde_json::Map::new();
        let headers = response
            .get("headers")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        for (name, h) in headers {
            let h = self.resolve(h);
            let Some(value) = answer.headers.get(name.as_str()) else {
                if h["required"] == true {
                    return Err(format!("header {name} is required but absent"));
                }
                continue;
            };
            let value = value.to_str().map_err(|e| format!("header {name}: {e}"))?;
            let schema = &h["schema"];
            let instance = if self.resolve(schema)["type"] == "integer" {
                value
                    .parse::<u64>()
                    .map(Value::from)
                    .map_err(|e| format!("header {name}: {value:?} is not an integer: {e}"))?
            } else {
                Value::from(value)
            };
            self.validate(schema, &instance)
                .map_err(|e| format!("header {name}: {value:?}: {e}"))?;
        }
        let Some(content) = response.get("content").and_then(Value::as_object) else {
            return if answer.body.is_empty() {
                Ok(())
            } else {
                Err(format!("no body is described, got {}", answer.text()))
            };
        };
        let content_type = answer
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .ok_or("a body is described, the answer has no Content-Type")?;
        let got = essence(content_type);
        let (_, media) = content
            .iter()
            .find(|(m, _)| essence(m) == got)
            .ok_or_else(|| {
                format!(
                    "Content-Type {content_type} is none of the described {:?}",
                    content.keys().collect::<Vec<_>>()
                )
            })?;
        let Some(schema) = media.get("schema") else {
            return Ok(());
        };
        if got == "text/event-stream" {
            // The schema is each event's, as event stream readers check it.
            for event in sse_events(&answer.text()) {
                self.validate(schema, &event)
                    .map_err(|e| format!("an event does not match its schema: {e}: {event}"))?;
            }
            return Ok(());
        }
        let instance = if got == "application/json" {
            serde_json::from_slice(&answer.body)
                .map_err(|e| format!("the body is not JSON ({e}): {}", answer.text()))?
        } else {
            Value::from(answer.text())
        };
        self.validate(schema, &instance)
            .map_err(|e| format!("the body does not match its schema: {e}\nbody: {instance}"))
    }
}

/// The events of a server-sent event stream, each as `{"event", "data"}`; comments
/// (keep-alives) left out.
fn sse_events(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut event = serde_json::Map::new();
            for line in block.lines() {
                if let Some((name, value)) = line.split_once(": ")
                    && !line.starts_with(':')
                {
                    event.insert(name.to_owned(), Value::from(value));
                }
            }
            (!event.is_empty()).then_some(Value::Object(event))
        })
        .collect()
}

/// A media type without its parameters, in lower case.
fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// One answer of a live relay.
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: bytes::Bytes,
}

impl Answer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// Sends a request and reads its whole answer.
async fn send(req: reqwest::RequestBuilder) -> Answer {
    let resp = req.send().await.unwrap();
    Answer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.bytes().await.unwrap(),
    }
}

/// The concrete path of `template` with each `{parameter}` replaced by `value(name)`.
fn fill(template: &str, value: impl Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let close = rest[open..].find('}').expect("a closed parameter") + open;
        out.push_str(&rest[..open]);
        out.push_str(&value(rest[open + 1..close].trim_start_matches('*')));
        rest = &rest[close + 1..];
    }
    out + rest
}

/// The path templates the relay's router registers, read from its `Debug` form (axum
/// lists every route's path there; it has no other way to enumerate them).
fn router_paths() -> BTreeSet<String> {
    let (handle, _commands) = RelayHandle::channel(1);
    let state = ApiState::new(
        Shards::single(handle),
        Tokens::new(SECRET.as_bytes()).unwrap(),
        gsrelay::internal::Metrics::new(),
        gsrelay::rtp::SrtpProfile::default(),
        HttpLimits::default(),
        Default::default(),
    )
    .unwrap();
    let debug = format!("{:?}", http::router(state));
    // The routes are the path router's; the fallback router after it holds axum's own.
    let routes = debug
        .split_once("path_router:")
        .and_then(|(_, s)| s.split_once("fallback_router:"))
        .map_or("", |(s, _)| s);
    let paths: BTreeSet<String> = routes
        .split("RouteId(")
        .skip(1)
        .filter_map(|s| {
            let s = s.split_once("): \"")?.1;
            Some(s[..s.find('"')?].to_owned())
        })
        .collect();
    assert!(
        paths.contains("/healthz") && paths.contains("/v1/rooms/{room}/sessions"),
        "the router's paths could not be read from its Debug form (did axum change it? \
         update router_paths): {debug}"
    );
    paths
}

#[tokio::test]
async fn every_route_is_described_and_every_described_route_is_served() {
    let desc = Description::load();
    // A relay whose shards are gone still routes: every handler answers (401, 503, ...)
    // but 405 for a method its path does not serve.
    let (handle, _commands) = RelayHandle::channel(1);
    let url = serve_api(Shards::single(handle)).await;
    let client = reqwest::Client::new();
    let mut served = BTreeSet::new();
    for path in router_paths() {
        let concrete = fill(&path, |name| match name {
            "id" => "s0000000000000000".to_owned(),
            _ => "probe".to_owned(),
        });
        for method in ["GET", "POST", "PUT", "DELETE", "PATCH"] {
            let m = Method::from_bytes(method.as_bytes()).unwrap();
            let answer = send(client.request(m, format!("{url}{concrete}"))).await;
            if answer.status != 405 {
                served.insert((method.to_owned(), path.clone()));
            }
        }
    }
    let described = desc.operations();
    let undescribed: Vec<_> = served.difference(&described).collect();
    let unserved: Vec<_> = described.difference(&served).collect();
    assert!(
        undescribed.is_empty(),
        "the relay serves routes that {FILE} does not describe: {undescribed:?}. Describe \
         each under `paths` (an operationId, its parameters and body, and every status it \
         answers, error answers by $ref to components/responses), then add a request that \
         succeeds on it to live_answers_match_the_description in tests/openapi.rs"
    );
    assert!(
        unserved.is_empty(),
        "{FILE} describes operations that the relay does not serve: {unserved:?}. Remove \
         them, or fix their path or method"
    );
}

/// Every `(status, code)` of `docs/api.md`'s error table.
fn docs_error_codes() -> BTreeSet<(u16, String)> {
    let text = std::fs::read_to_string(root().join("docs/api.md")).unwrap();
    let section = text
        .split("\n## Errors\n")
        .nth(1)
        .expect("docs/api.md has an Errors section");
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut codes = BTreeSet::new();
    for line in section.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(status) = cells.get(1).and_then(|s| s.parse::<u16>().ok()) else {
            continue;
        };
        for code in cells[2].split(',') {
            codes.insert((status, code.trim().trim_matches('`').to_owned()));
        }
    }
    assert!(codes.len() > 20, "docs/api.md's error table: {codes:?}");
    codes
}

#[test]
fn the_error_codes_are_those_of_the_docs_table() {
    let desc = Description::load();
    let schemas = desc.0["components"]["schemas"].as_object().unwrap();
    let mut described = BTreeSet::new();
    for (name, schema) in schemas {
        let Some(status) = name
            .strip_prefix("Error")
            .and_then(|s| s.parse::<u16>().ok())
        else {
            continue;
        };
        let codes = schema["properties"]["error"]["properties"]["code"]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{FILE}: {name} lists no codes"));
        for code in codes {
            described.insert((status, code.as_str().unwrap().to_owned()));
        }
    }
    let docs = docs_error_codes();
    let missing: Vec<_> = docs.difference(&described).collect();
    let extra: Vec<_> = described.difference(&docs).collect();
    assert!(
        missing.is_empty(),
        "error codes of docs/api.md's table that {FILE} lacks (add each to the enum of \
         components/schemas/Error<status>): {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "error codes in {FILE} that docs/api.md's table lacks: {extra:?}"
    );

    // Every error answer of every operation carries the error body of its status.
    for (method, path) in desc.operations() {
        let op = desc.operation(&method.to_lowercase(), &path).unwrap();
        for (status, response) in op["responses"].as_object().unwrap() {
            if !status.starts_with('4') && !status.starts_with('5') {
                continue;
            }
            let schema = &desc.resolve(response)["content"]["application/json"]["schema"];
            assert_eq!(
                schema["$ref"],
                format!("#/components/schemas/Error{status}"),
                "{method} {path}: its {status} answer is not an Error{status} body"
            );
        }
    }
}

#[test]
fn every_operation_is_described_whole() {
    let desc = Description::load();
    let mut ids = BTreeSet::new();
    for (method, path) in desc.operations() {
        let op = desc.operation(&method.to_lowercase(), &path).unwrap();
        let what = format!("{method} {path}");
        let id = op["operationId"].as_str();
        assert!(
            id.is_some_and(|id| ids.insert(id.to_owned())),
            "{what}: no operationId, or one already used"
        );
        let responses = op["responses"].as_object().unwrap();
        let has = |s: &str| responses.contains_key(s);
        assert!(
            responses.keys().any(|s| s.starts_with('2')),
            "{what}: no success"
        );
        let open = op.get("security").is_some_and(|s| s == &json!([]));
        // What the handlers share: a token is checked before anything else, a body is read
        // within a time and a size, and the /v1 routes but this description's are under the
        // in-flight limit.
        assert_eq!(
            has("401"),
            !open,
            "{what}: a route with a token answers 401, one without does not"
        );
        if op.get("requestBody").is_some() {
            for s in ["400", "408", "413", "422"] {
                assert!(has(s), "{what}: reads a body, so answers {s}");
            }
        }
        // This description and presence streams (which last as long as their watcher) are
        // outside the in-flight limit.
        if path.starts_with("/v1/") && path != "/v1/openapi.json" && path != PRESENCE {
            assert!(
                has("503"),
                "{what}: under the in-flight limit, so answers 503"
            );
        }
        let params = op["parameters"].as_array().cloned().unwrap_or_default();
        let names: BTreeSet<String> = params
            .iter()
            .map(|p| desc.resolve(p))
            .filter(|p| p["in"] == "path")
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .collect();
        let in_template: BTreeSet<String> = path
            .split('{')
            .skip(1)
            .filter_map(|s| s.split_once('}').map(|(n, _)| n.to_owned()))
            .collect();
        assert_eq!(names, in_template, "{what}: its path parameters");
    }
}

#[test]
fn every_example_is_valid() {
    let desc = Description::load();
    let mut seen = 0;
    let mut walk = vec![(String::new(), &desc.0)];
    while let Some((at, v)) = walk.pop() {
        match v {
            Value::Object(map) => {
                if let Some(schema) = map.get("schema") {
                    let examples = map.get("example").into_iter().chain(
                        map.get("examples")
                            .and_then(Value::as_object)
                            .into_iter()
                            .flat_map(|e| e.values())
                            .map(|e| &desc.resolve(e)["value"]),
                    );
                    for example in examples {
                        seen += 1;
                        desc.validate(schema, example)
                            .unwrap_or_else(|e| panic!("{FILE}{at}: example {example}: {e}"));
                    }
                }
                for (k, child) in map {
                    walk.push((format!("{at}/{k}"), child));
                }
            }
            Value::Array(list) => {
                for (i, child) in list.iter().enumerate() {
                    walk.push((format!("{at}/{i}"), child));
                }
            }
            _ => {}
        }
    }
    assert!(seen >= 8, "only {seen} examples found");
}

/// Checks answers against the description and remembers which operations succeeded.
struct Checker {
    desc: Description,
    succeeded: BTreeSet<(String, String)>,
}

impl Checker {
    /// Checks that `answer` to `method template` has `status` and conforms.
    fn expect(&mut self, method: &str, template: &str, status: u16, answer: &Answer) {
        assert_eq!(
            answer.status,
            status,
            "{method} {template}: {}",
            answer.text()
        );
        if let Err(e) = self.desc.check(method, template, answer) {
            panic!("{method} {template} answered {status}: {e}");
        }
        if (200..400).contains(&status) {
            self.succeeded
                .insert((method.to_owned(), template.to_owned()));
        }
    }

    /// Checks an error answer against a described response (of no operation: a path or a
    /// method no route serves).
    fn expect_component(&self, response: &str, status: u16, answer: &Answer) {
        assert_eq!(answer.status, status, "{response}: {}", answer.text());
        let r = json!({"$ref": format!("#/components/responses/{response}")});
        if let Err(e) = self.desc.check_response(&r, answer) {
            panic!("{response}: {e}");
        }
    }
}

const JOIN: &str = "/v1/rooms/{room}/sessions";
const ROOM: &str = "/v1/rooms/{room}";
const INTEREST: &str = "/v1/sessions/{id}/interest";
const SESSION: &str = "/v1/sessions/{id}";
const ROOMS: &str = "/v1/rooms";
const PARTICIPANTS: &str = "/v1/rooms/{room}/participants";
const PARTICIPANT: &str = "/v1/rooms/{room}/participants/{identity}";
const METADATA: &str = "/v1/rooms/{room}/metadata";
const PRESENCE: &str = "/v1/rooms/{room}/presence";
const ROOM_RECORDING: &str = "/v1/rooms/{room}/recording";
const RECORDINGS: &str = "/v1/recordings";
const RECORDING: &str = "/v1/recordings/{id}";
const RECORDING_PCAPNG: &str = "/v1/recordings/{id}/pcapng";
const REPLAYS: &str = "/v1/replays";
const REPLAY: &str = "/v1/replays/{room}";
const MIRROR: &str = "/v1/rooms/{room}/mirror";

#[tokio::test]
async fn live_answers_match_the_description() {
    let mut cfg = config(1);
    cfg.insecure_plain_rtp = true;
    // Room for the requests below from one identity; the limit is reached on purpose
    // further down.
    cfg.http.rate_burst = 100;
    let recordings = TempDir::new("openapi-recordings");
    cfg.recording_dir = recordings.0.clone();
    let server = server::start(cfg).await.unwrap();
    let url = base(&server);
    let c = reqwest::Client::new();
    let mut check = Checker {
        desc: Description::load(),
        succeeded: BTreeSet::new(),
    };
    let room = "described";
    let all = token(room, ALL);
    let join = |body: Value| {
        c.post(format!("{url}/v1/rooms/{room}/sessions"))
            .bearer_auth(&all)
            .json(&body)
    };

    // Joins over every transport, and every join example of the description.
    let mut sessions = Vec::new();
    let offer = WebRtcPeer::offer().unwrap().offer_sdp().unwrap();
    let mut bodies = vec![
        json!({"transport": "rtp"}),
        json!({"transport": "rtp", "srtp_profile": "AEAD_AES_128_GCM", "dialect": "gse"}),
        json!({"transport": "rtp", "srtp_profile": "none"}),
        json!({"transport": "quic"}),
        json!({"transport": "webtransport"}),
        json!({"transport": "webrtc", "sdp_offer": offer}),
    ];
    let join_examples = check.desc.0["paths"][JOIN]["post"]["requestBody"]["content"]
        ["application/json"]["examples"]
        .as_object()
        .unwrap()
        .values()
        .map(|e| e["value"].clone());
    bodies.extend(join_examples);
    for body in bodies {
        let answer = send(join(body.clone())).await;
        check.expect("POST", JOIN, 201, &answer);
        let id = answer.json()["session_id"].as_str().unwrap().to_owned();
        sessions.push(id);
    }
    let id = sessions[0].clone();

    // Every interest example of the description is taken.
    let examples: Vec<Value> = check.desc.0["paths"][INTEREST]["put"]["requestBody"]["content"]
        ["application/json"]["examples"]
        .as_object()
        .unwrap()
        .values()
        .map(|e| e["value"].clone())
        .collect();
    for body in examples {
        let answer = send(
            c.put(format!("{url}/v1/sessions/{id}/interest"))
                .bearer_auth(&all)
                .json(&body),
        )
        .await;
        check.expect("PUT", INTEREST, 204, &answer);
    }

    let admin = token(room, ADMIN);
    let answer = send(c.get(format!("{url}/v1/rooms/{room}")).bearer_auth(&admin)).await;
    check.expect("GET", ROOM, 200, &answer);
    assert_eq!(
        answer.json()["sessions"].as_array().map(Vec::len),
        Some(sessions.len())
    );

    // Refusals, one of each kind a request can draw here.
    let post = |room: &str, token: Option<&str>, body: &str| {
        let req = c
            .post(format!("{url}/v1/rooms/{room}/sessions"))
            .body(body.to_owned());
        match token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    };
    let rtp = r#"{"transport":"rtp"}"#;
    let refusals = [
        (post(room, None, rtp), 401, "token_missing"),
        (post(room, Some("not.a.jwt"), rtp), 401, "token_malformed"),
        (
            post(room, Some(&token("elsewhere", ALL)), rtp),
            403,
            "forbidden_room",
        ),
        (post(room, Some(&admin), rtp), 403, "forbidden_right"),
        (post("bad%20room", Some(&all), rtp), 400, "invalid_room"),
        (post(room, Some(&all), "{"), 400, "malformed_json"),
        (
            post(room, Some(&all), r#"{"transport":"rtp","colour":1}"#),
            422,
            "invalid_request",
        ),
        (
            post(room, Some(&all), r#"{"transport":"carrier-pigeon"}"#),
            422,
            "unsupported_transport",
        ),
        (
            post(
                room,
                Some(&all),
                r#"{"transport":"rtp","interest":{"types":{"allow":["Head9"]}}}"#,
            ),
            422,
            "invalid_interest",
        ),
        (
            post(
                room,
                Some(&all),
                r#"{"transport":"webrtc","sdp_offer":"not sdp"}"#,
            ),
            422,
            "invalid_sdp_offer",
        ),
        (
            post(
                room,
                Some(&all),
                &format!(
                    r#"{{"transport":"rtp","ssrc":{},"require_ssrc":true}}"#,
                    answer.json()["sessions"][0]["ssrc"]
                ),
            ),
            409,
            "ssrc_taken",
        ),
        (
            post(room, Some(&all), &" ".repeat(70 * 1024)),
            413,
            "body_too_large",
        ),
    ];
    for (req, status, code) in refusals {
        let answer = send(req).await;
        check.expect("POST", JOIN, status, &answer);
        assert_eq!(answer.code(), code, "{}", answer.text());
    }

    let other = token_as(
        room,
        "someone-else",
        PUBLISH_SUBSCRIBE,
        support::server::now(),
        600,
    );
    let interest = |id: &str, token: &str, body: &str| {
        c.put(format!("{url}/v1/sessions/{id}/interest"))
            .bearer_auth(token)
            .body(body.to_owned())
    };
    let refusals = [
        (interest(&id, &other, "{}"), 403, "forbidden_session"),
        (interest(&id, &all, "{"), 400, "malformed_json"),
        (
            interest(&id, &all, r#"{"area":{"radius":-1}}"#),
            422,
            "invalid_interest",
        ),
        (
            interest("s00000000000000ff", &all, "{}"),
            404,
            "session_not_found",
        ),
        (
            interest(&id, &token("elsewhere", ALL), "{}"),
            404,
            "session_not_found",
        ),
    ];
    for (req, status, code) in refusals {
        let answer = send(req).await;
        check.expect("PUT", INTEREST, status, &answer);
        assert_eq!(answer.code(), code, "{}", answer.text());
    }
    let answer = send(
        c.get(format!("{url}/v1/rooms/empty"))
            .bearer_auth(token("empty", ADMIN)),
    )
    .await;
    check.expect("GET", ROOM, 404, &answer);
    assert_eq!(answer.code(), "room_not_found");

    // The server API, and presence.
    let relay_admin = Tokens::new(SECRET.as_bytes())
        .unwrap()
        .issue("*", "backend", ADMIN, 600, support::server::now())
        .unwrap();
    let answer = send(c.get(format!("{url}/v1/rooms")).bearer_auth(&relay_admin)).await;
    check.expect("GET", ROOMS, 200, &answer);
    let answer = send(c.get(format!("{url}/v1/rooms")).bearer_auth(&admin)).await;
    check.expect("GET", ROOMS, 403, &answer);
    let answer = send(
        c.put(format!("{url}/v1/rooms/{room}/metadata"))
            .bearer_auth(&admin)
            .json(&json!({"map": "dust"})),
    )
    .await;
    check.expect("PUT", METADATA, 204, &answer);
    let answer = send(
        c.get(format!("{url}/v1/rooms/{room}/participants"))
            .bearer_auth(&admin),
    )
    .await;
    check.expect("GET", PARTICIPANTS, 200, &answer);
    let me = format!("{url}/v1/rooms/{room}/participants/tester");
    let answer = send(c.get(&me).bearer_auth(&admin)).await;
    check.expect("GET", PARTICIPANT, 200, &answer);
    for body in [
        json!({"metadata": {"team": "red"}}),
        json!({"publish": false}),
        json!({"publish": true}),
    ] {
        let answer = send(c.patch(&me).bearer_auth(&admin).json(&body)).await;
        check.expect("PATCH", PARTICIPANT, 200, &answer);
    }
    let refusals = [
        (
            c.patch(&me)
                .bearer_auth(&admin)
                .json(&json!({"metadata": "x".repeat(5000)})),
            422,
            "metadata_too_large",
        ),
        (
            c.patch(format!("{url}/v1/rooms/{room}/participants/nobody"))
                .bearer_auth(&admin)
                .json(&json!({})),
            404,
            "participant_not_found",
        ),
    ];
    for (req, status, code) in refusals {
        let answer = send(req).await;
        check.expect("PATCH", PARTICIPANT, status, &answer);
        assert_eq!(answer.code(), code, "{}", answer.text());
    }
    // A presence stream's head; its body goes on as long as the room.
    let head = c
        .get(format!("{url}/v1/rooms/{room}/presence"))
        .bearer_auth(&all)
        .send()
        .await
        .unwrap();
    let answer = Answer {
        status: head.status().as_u16(),
        headers: head.headers().clone(),
        body: bytes::Bytes::new(),
    };
    check.expect("GET", PRESENCE, 200, &answer);
    drop(head);
    // A removed identity, and a closed room, are refused.
    let gone = "/v1/rooms/described/participants/someone-else";
    let answer = send(c.delete(format!("{url}{gone}")).bearer_auth(&admin)).await;
    check.expect("DELETE", PARTICIPANT, 204, &answer);
    let answer = send(
        c.post(format!("{url}/v1/rooms/{room}/sessions"))
            .bearer_auth(&other)
            .body(rtp),
    )
    .await;
    check.expect("POST", JOIN, 403, &answer);
    assert_eq!(answer.code(), "removed");
    let closed = "closed";
    let _closing = send(
        c.post(format!("{url}/v1/rooms/{closed}/sessions"))
            .bearer_auth(token(closed, ALL))
            .body(rtp),
    )
    .await;
    let answer = send(
        c.delete(format!("{url}/v1/rooms/{closed}"))
            .bearer_auth(token(closed, ADMIN)),
    )
    .await;
    check.expect("DELETE", ROOM, 204, &answer);
    let answer = send(
        c.post(format!("{url}/v1/rooms/{closed}/sessions"))
            .bearer_auth(token(closed, ALL))
            .body(rtp),
    )
    .await;
    check.expect("POST", JOIN, 409, &answer);
    assert_eq!(answer.code(), "room_closed");

    // Leaving, twice.
    for (status, code) in [(204, ""), (404, "session_not_found")] {
        let answer = send(
            c.delete(format!("{url}/v1/sessions/{id}"))
                .bearer_auth(&all),
        )
        .await;
        check.expect("DELETE", SESSION, status, &answer);
        assert_eq!(answer.code(), code);
    }

    recordings_and_replays(&server, &mut check, &relay_admin, &recordings.0).await;

    // The identity's rate of joins and interest changes runs out.
    let limited = token_as(
        room,
        "hasty",
        PUBLISH_SUBSCRIBE,
        support::server::now(),
        600,
    );
    let mut refused = None;
    for _ in 0..1000 {
        let answer = send(interest("s00000000000000ff", &limited, "{}")).await;
        if answer.status == 429 {
            refused = Some(answer);
            break;
        }
    }
    let answer = refused.expect("the rate limit never refused");
    check.expect("PUT", INTEREST, 429, &answer);
    assert_eq!(answer.code(), "rate_limited");

    // Probes, metrics, this description, the browser files (and their 304).
    for (path, status) in [
        ("/healthz", 200),
        ("/readyz", 200),
        ("/metrics", 200),
        ("/v1/openapi.json", 200),
    ] {
        let answer = send(c.get(format!("{url}{path}"))).await;
        check.expect("GET", path, status, &answer);
    }
    let served = send(c.get(format!("{url}/v1/openapi.json"))).await.json();
    assert_eq!(
        served, check.desc.0,
        "the relay serves {FILE} as it is in the repository"
    );
    // Other origins' pages may read it, as the other /v1 routes.
    let answer = send(
        c.get(format!("{url}/v1/openapi.json"))
            .header(header::ORIGIN, "https://game.example.com"),
    )
    .await;
    assert_eq!(
        answer.headers[header::ACCESS_CONTROL_ALLOW_ORIGIN],
        "*",
        "CORS on /v1/openapi.json"
    );
    for path in [
        "/client/gsrelay.js",
        "/viewer",
        "/viewer/",
        "/viewer/viewer.js",
        "/viewer/viewer.css",
    ] {
        let answer = send(c.get(format!("{url}{path}"))).await;
        check.expect("GET", path, 200, &answer);
        let etag = answer.headers[header::ETAG].clone();
        let answer = send(
            c.get(format!("{url}{path}"))
                .header(header::IF_NONE_MATCH, etag),
        )
        .await;
        check.expect("GET", path, 304, &answer);
    }

    // No such path, no such method.
    let answer = send(c.get(format!("{url}/v2/nothing"))).await;
    check.expect_component("NotFound", 404, &answer);
    assert_eq!(answer.code(), "not_found");
    let answer = send(
        c.patch(format!("{url}/v1/rooms/{room}"))
            .bearer_auth(&admin),
    )
    .await;
    check.expect_component("MethodNotAllowed", 405, &answer);

    // A draining relay: not ready, and refusing joins.
    server.begin_drain().await.unwrap();
    let answer = send(c.get(format!("{url}/readyz"))).await;
    check.expect("GET", "/readyz", 503, &answer);
    assert_eq!(answer.code(), "draining");
    let answer = send(post(room, Some(&all), rtp)).await;
    check.expect("POST", JOIN, 503, &answer);
    assert_eq!(answer.code(), "draining");
    for id in &sessions[1..] {
        let answer = send(
            c.delete(format!("{url}/v1/sessions/{id}"))
                .bearer_auth(&all),
        )
        .await;
        check.expect("DELETE", SESSION, 204, &answer);
    }

    // A relay whose shards have stopped: not alive.
    let (handle, commands) = RelayHandle::channel(1);
    drop(commands);
    let stopped = serve_api(Shards::single(handle)).await;
    let answer = send(c.get(format!("{stopped}/healthz"))).await;
    check.expect("GET", "/healthz", 503, &answer);
    assert_eq!(answer.code(), "relay_stopped");

    let untried: Vec<_> = check
        .desc
        .operations()
        .difference(&check.succeeded)
        .cloned()
        .collect();
    assert!(
        untried.is_empty(),
        "operations no request of this test succeeded on: {untried:?}. Add one for each \
         (a new route needs a request here, so that its answers are checked against {FILE})"
    );
    server.shutdown().await.unwrap();
}

/// Records a room through the server API and replays the recording into a room of its
/// own, checking each answer (successes and refusals) against the description. The
/// relay's `recording_dir` is `dir`.
async fn recordings_and_replays(
    server: &server::Server,
    check: &mut Checker,
    relay_admin: &str,
    dir: &Path,
) {
    let url = base(server);
    let c = reqwest::Client::new();
    let room = "recorded";
    let admin = token(room, ADMIN);
    let mut alice = player(server, room, "alice", PUBLISH).await;
    let mut bob = player(server, room, "bob", SUBSCRIBE).await;
    until_flowing(&mut alice, &mut bob).await;
    let recording = format!("{url}/v1/rooms/{room}/recording");

    let answer = send(c.post(&recording).bearer_auth(&admin)).await;
    check.expect("POST", ROOM_RECORDING, 201, &answer);
    let id = answer.json()["id"].as_str().unwrap().to_owned();
    assert!(
        dir.join(&id).is_dir(),
        "{id} is not under {}",
        dir.display()
    );
    let answer = send(c.get(&recording).bearer_auth(&admin)).await;
    check.expect("GET", ROOM_RECORDING, 200, &answer);
    assert_eq!(answer.json()["state"], "recording");
    let answer = send(c.post(&recording).bearer_auth(&admin)).await;
    check.expect("POST", ROOM_RECORDING, 409, &answer);
    assert_eq!(answer.code(), "already_recording");
    let answer = send(
        c.delete(format!("{url}/v1/recordings/{id}"))
            .bearer_auth(&admin),
    )
    .await;
    check.expect("DELETE", RECORDING, 409, &answer);
    assert_eq!(answer.code(), "recording_running");
    for x in 1..=10 {
        alice
            .send_objects(&[moving_head(7, x as f32)])
            .await
            .unwrap();
    }
    // Each update is recorded once bob, behind the recorder in the room, has it: the
    // room accepted it.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let got = bob.recv(left).await.unwrap();
        let Some(Received::Rtp { payload, .. }) = got else {
            assert!(got.is_some(), "bob never got the last update");
            continue;
        };
        let objects = gsrelay::wire::decode(&payload, gsrelay::wire::Dialect::Draft01).unwrap();
        if objects
            .iter()
            .any(|o| o.position().map(|p| p[0]) == Some(10.0))
        {
            break;
        }
    }
    let answer = send(c.delete(&recording).bearer_auth(&admin)).await;
    check.expect("DELETE", ROOM_RECORDING, 200, &answer);
    assert_eq!(answer.json()["state"], "stopped", "{}", answer.text());
    for (method, req) in [("GET", c.get(&recording)), ("DELETE", c.delete(&recording))] {
        let answer = send(req.bearer_auth(&admin)).await;
        check.expect(method, ROOM_RECORDING, 404, &answer);
        assert_eq!(answer.code(), "not_recording");
    }
    let answer = send(
        c.post(format!("{url}/v1/rooms/nobody-here/recording"))
            .bearer_auth(token("nobody-here", ADMIN)),
    )
    .await;
    check.expect("POST", ROOM_RECORDING, 404, &answer);
    assert_eq!(answer.code(), "room_not_found");

    let answer = send(
        c.get(format!("{url}/v1/recordings"))
            .bearer_auth(relay_admin),
    )
    .await;
    check.expect("GET", RECORDINGS, 200, &answer);
    assert!(answer.text().contains(&id), "{}", answer.text());
    let answer = send(c.get(format!("{url}/v1/recordings")).bearer_auth(&admin)).await;
    check.expect("GET", RECORDINGS, 403, &answer);
    let answer = send(
        c.get(format!("{url}/v1/recordings/{id}"))
            .bearer_auth(&admin),
    )
    .await;
    check.expect("GET", RECORDING, 200, &answer);
    let answer = send(
        c.get(format!("{url}/v1/recordings/{id}"))
            .bearer_auth(token("elsewhere", ADMIN)),
    )
    .await;
    check.expect("GET", RECORDING, 403, &answer);
    let answer = send(
        c.get(format!("{url}/v1/recordings/{id}/pcapng"))
            .bearer_auth(&admin),
    )
    .await;
    check.expect("GET", RECORDING_PCAPNG, 200, &answer);
    // A pcapng file starts with a Section Header Block.
    assert_eq!(answer.body.get(..4), Some(&[0x0a, 0x0d, 0x0d, 0x0a][..]));
    // Ids that are not the relay's, paths among them, name no recording.
    for bad in [
        "rec-1-00000000",
        "..%2F..%2Fetc",
        "rec-1-ABCDEF12",
        "recordings",
    ] {
        let answer = send(
            c.get(format!("{url}/v1/recordings/{bad}"))
                .bearer_auth(relay_admin),
        )
        .await;
        check.expect("GET", RECORDING, 404, &answer);
        assert_eq!(answer.code(), "recording_not_found");
    }

    // Its replay, into a room of its own.
    let replays = format!("{url}/v1/replays");
    let start = |body: Value| c.post(&replays).bearer_auth(relay_admin).json(&body);
    let into = "replayed";
    let answer = send(start(
        json!({"recording": id, "room": into, "paused": true}),
    ))
    .await;
    check.expect("POST", REPLAYS, 201, &answer);
    assert_eq!(answer.json()["recording"], id.as_str());
    let refusals = [
        (
            start(json!({"recording": id, "room": into})),
            409,
            "room_live",
        ),
        (
            start(json!({"recording": id, "room": room})),
            409,
            "room_live",
        ),
        (
            start(json!({"recording": "rec-1-00000000", "room": "other"})),
            404,
            "recording_not_found",
        ),
        (
            start(json!({"recording": id, "room": "other", "speed": 9})),
            422,
            "invalid_speed",
        ),
        (
            start(json!({"recording": id, "room": "other", "from_ms": 1_000_000_000u64})),
            422,
            "invalid_replay",
        ),
        (start(json!({"recording": id})), 422, "invalid_request"),
        (
            start(json!({"recording": id, "room": "bad room"})),
            400,
            "invalid_room",
        ),
        (
            c.post(&replays)
                .bearer_auth(token("other", ADMIN))
                .json(&json!({"recording": id, "room": "other"})),
            403,
            "forbidden_room",
        ),
    ];
    for (req, status, code) in refusals {
        let answer = send(req).await;
        check.expect("POST", REPLAYS, status, &answer);
        assert_eq!(answer.code(), code, "{}", answer.text());
    }
    let answer = send(c.get(&replays).bearer_auth(relay_admin)).await;
    check.expect("GET", REPLAYS, 200, &answer);
    let answer = send(c.get(&replays).bearer_auth(&admin)).await;
    check.expect("GET", REPLAYS, 403, &answer);
    let replay = format!("{url}/v1/replays/{into}");
    let into_admin = token(into, ADMIN);
    let answer = send(c.get(&replay).bearer_auth(&into_admin)).await;
    check.expect("GET", REPLAY, 200, &answer);
    assert_eq!(answer.json()["paused"], true);
    // The replay's room is a room as any other, for spectators: it says what it plays.
    let answer = send(
        c.get(format!("{url}/v1/rooms/{into}"))
            .bearer_auth(&into_admin),
    )
    .await;
    check.expect("GET", ROOM, 200, &answer);
    assert_eq!(answer.json()["replay"]["recording"], id.as_str());
    let spectator = spectate(check, &url, into, "replay").await;
    let control = |body: Value| c.patch(&replay).bearer_auth(&into_admin).json(&body);
    for body in [
        json!({"seek_ms": 0, "speed": 2, "paused": false}),
        json!({"paused": true}),
    ] {
        let answer = send(control(body)).await;
        check.expect("PATCH", REPLAY, 200, &answer);
    }
    let refusals = [
        (
            control(json!({"seek_ms": 1_000_000_000u64})),
            422,
            "seek_past_end",
        ),
        (control(json!({"speed": 0.1})), 422, "invalid_speed"),
        (control(json!({})), 422, "invalid_request"),
        (
            c.patch(format!("{url}/v1/replays/{room}"))
                .bearer_auth(&admin)
                .json(&json!({"paused": true})),
            404,
            "replay_not_found",
        ),
    ];
    for (req, status, code) in refusals {
        let answer = send(req).await;
        check.expect("PATCH", REPLAY, status, &answer);
        assert_eq!(answer.code(), code, "{}", answer.text());
    }
    for status in [204, 404] {
        let answer = send(c.delete(&replay).bearer_auth(&into_admin)).await;
        check.expect("DELETE", REPLAY, status, &answer);
    }
    leave(check, &url, into, &spectator).await;
    let answer = send(c.get(&replay).bearer_auth(&into_admin)).await;
    check.expect("GET", REPLAY, 404, &answer);
    assert_eq!(answer.code(), "replay_not_found");

    // Deleted, it is gone, files and all.
    let answer = send(
        c.delete(format!("{url}/v1/recordings/{id}"))
            .bearer_auth(&admin),
    )
    .await;
    check.expect("DELETE", RECORDING, 204, &answer);
    assert!(!dir.join(&id).exists());
    let answer = send(
        c.get(format!("{url}/v1/recordings/{id}"))
            .bearer_auth(&admin),
    )
    .await;
    check.expect("GET", RECORDING, 404, &answer);

    mirrors(server, check, relay_admin, room).await;
    alice.leave().await.unwrap();
    bob.leave().await.unwrap();
}

/// Joins `room`, a replay's or a mirror's, as a spectator (a join that may publish is
/// refused), and checks that the join answer says what the room plays (its `field`).
/// Returns the session's id.
async fn spectate(check: &mut Checker, url: &str, room: &str, field: &str) -> String {
    let c = reqwest::Client::new();
    let join = |rights| {
        c.post(format!("{url}/v1/rooms/{room}/sessions"))
            .bearer_auth(token(room, rights))
            .json(&json!({"transport": "rtp"}))
    };
    let answer = send(join(ALL)).await;
    check.expect("POST", JOIN, 403, &answer);
    assert_eq!(answer.code(), "room_read_only");
    let answer = send(join(SUBSCRIBE)).await;
    check.expect("POST", JOIN, 201, &answer);
    assert!(answer.json()[field].is_object(), "{}", answer.text());
    answer.json()["session_id"].as_str().unwrap().to_owned()
}

/// Ends a session of `room`.
async fn leave(check: &mut Checker, url: &str, room: &str, id: &str) {
    let answer = send(
        reqwest::Client::new()
            .delete(format!("{url}/v1/sessions/{id}"))
            .bearer_auth(token(room, SUBSCRIBE)),
    )
    .await;
    check.expect("DELETE", SESSION, 204, &answer);
}

/// Mirrors live room `source` into a room of its own for spectators, checking each
/// answer against the description.
async fn mirrors(server: &server::Server, check: &mut Checker, relay_admin: &str, source: &str) {
    let url = base(server);
    let c = reqwest::Client::new();
    let mirror = format!("{url}/v1/rooms/{source}/mirror");
    let tv = format!("{source}-tv");
    let start = |body: Value| c.put(&mirror).bearer_auth(relay_admin).json(&body);
    let answer = send(start(json!({"room": tv, "delay_ms": 1000}))).await;
    check.expect("PUT", MIRROR, 201, &answer);
    assert_eq!(answer.json()["mirror"], tv.as_str());
    let refusals = [
        (
            start(json!({"room": "other-tv", "delay_ms": 1000})),
            409,
            "already_mirrored",
        ),
        (
            start(json!({"room": tv, "delay_ms": 1000})),
            409,
            "room_live",
        ),
        (
            start(json!({"room": "other-tv", "delay_ms": 999})),
            422,
            "invalid_delay",
        ),
        (
            start(json!({"room": source, "delay_ms": 1000})),
            422,
            "invalid_request",
        ),
        (start(json!({"room": "other-tv"})), 422, "invalid_request"),
        (
            start(json!({"room": "bad room", "delay_ms": 1000})),
            400,
            "invalid_room",
        ),
        (
            c.put(&mirror)
                .bearer_auth(token(source, ADMIN))
                .json(&json!({"room": "other-tv", "delay_ms": 1000})),
            403,
            "forbidden_room",
        ),
        (
            c.put(format!("{url}/v1/rooms/nobody-here/mirror"))
                .bearer_auth(relay_admin)
                .json(&json!({"room": "other-tv", "delay_ms": 1000})),
            404,
            "room_not_found",
        ),
    ];
    for (req, status, code) in refusals {
        let answer = send(req).await;
        check.expect("PUT", MIRROR, status, &answer);
        assert_eq!(answer.code(), code, "{}", answer.text());
    }
    let answer = send(c.get(&mirror).bearer_auth(token(source, ADMIN))).await;
    check.expect("GET", MIRROR, 200, &answer);
    let spectator = spectate(check, &url, &tv, "delayed").await;
    let answer = send(
        c.get(format!("{url}/v1/rooms/{tv}"))
            .bearer_auth(token(&tv, ADMIN)),
    )
    .await;
    check.expect("GET", ROOM, 200, &answer);
    assert_eq!(answer.json()["delayed"]["source"], source);
    for status in [204, 404] {
        let answer = send(c.delete(&mirror).bearer_auth(token(source, ADMIN))).await;
        check.expect("DELETE", MIRROR, status, &answer);
    }
    let answer = send(c.get(&mirror).bearer_auth(token(source, ADMIN))).await;
    check.expect("GET", MIRROR, 404, &answer);
    assert_eq!(answer.code(), "no_mirror");
    leave(check, &url, &tv, &spectator).await;
}

/// The schemathesis of `scripts/test.sh`: `.venv`'s (or `GSRELAY_TOOLS_VENV`'s), else one
/// on `PATH`.
fn schemathesis() -> Option<std::path::PathBuf> {
    let local = support::tools::venv().join("bin").join("schemathesis");
    if local.is_file() {
        return Some(local);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("schemathesis"))
        .find(|p| p.is_file())
}

/// The environment variable that skips `schemathesis_finds_nothing`.
const SKIP: &str = "GSRELAY_SKIP_SCHEMATHESIS";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_nothing() {
    if std::env::var_os(SKIP).is_some_and(|v| !v.is_empty() && v != "0") {
        eprintln!("schemathesis_finds_nothing: skipped, as {SKIP} asks");
        return;
    }
    let Some(schemathesis) = schemathesis() else {
        panic!(
            "schemathesis is not installed: run scripts/test.sh, which installs it into {} \
             (or set {SKIP}=1 to skip this test)",
            support::tools::venv().display()
        );
    };
    // Rate limits high enough that generated requests reach the handlers rather than
    // mostly drawing 429 (which the description allows, but which tests nothing else).
    let mut cfg = config(1);
    cfg.http.rate_per_sec = 10_000.0;
    cfg.http.rate_burst = 10_000;
    let dir = std::env::temp_dir().join(format!("gsrelay-schemathesis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The generated requests start (and stop, and delete) recordings of the room: they
    // are written here and nowhere else.
    let recordings = dir.join("recordings");
    cfg.recording_dir = recordings.clone();
    let server = server::start(cfg).await.unwrap();
    let room = "fuzzed";
    let bearer = format!("Authorization: Bearer {}", token(room, ALL));
    // A session in the room from the start, so that the generated requests to record it
    // find it live and start recordings (its timeout, a minute without packets, ends
    // it about when the run does).
    let joined = send(
        reqwest::Client::new()
            .post(format!("{}/v1/rooms/{room}/sessions", base(&server)))
            .bearer_auth(token(room, PUBLISH_SUBSCRIBE))
            .json(&json!({"transport": "rtp"})),
    )
    .await;
    assert_eq!(joined.status, 201, "{}", joined.text());
    // The token is for one room: every request names that room, so that joins succeed
    // and the stateful phase follows their links to the session routes. (Invalid room
    // names are among the refusals of live_answers_match_the_description.)
    let config_file = dir.join("schemathesis.toml");
    std::fs::write(
        &config_file,
        format!("[parameters]\n\"path.room\" = \"{room}\"\n"),
    )
    .unwrap();
    let description = format!("{}/v1/openapi.json", base(&server));
    let args: Vec<String> = [
        "--config-file",
        config_file.to_str().unwrap(),
        "run",
        &description,
        "--checks",
        "all",
        // Valid data the relay refuses is not a fault here: an interest's cross-field
        // rules (an area's one shape, increasing tiers, exit sizes from the enter size),
        // object type names and an SDP offer's content are checked beyond what the
        // schemas state (the description says so in prose).
        "--exclude-checks",
        "positive_data_acceptance",
        "-H",
        &bearer,
        "--max-examples",
        "100",
        "--seed",
        "1",
        "--workers",
        "2",
        "--no-color",
        "--generation-database",
        "none",
        // A request the relay never answers fails rather than hangs.
        "--request-timeout",
        "10",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let started = std::time::Instant::now();
    let cwd = dir.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(&schemathesis)
            .args(&args)
            .current_dir(&cwd)
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", schemathesis.display()))
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("schemathesis took {:?}:\n{stdout}", started.elapsed());
    let recorded = support::server::metric(&server, "gsrelay_recordings_started_total").await;
    eprintln!("the generated requests started {recorded:?} recordings");
    assert!(
        out.status.success(),
        "schemathesis found answers that break {FILE} ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    server.shutdown().await.unwrap();
    // No recording a generated request started is left running: the relay's stop closed
    // every one, writing its end.
    let made = std::fs::read_dir(&recordings).map_or(Vec::new(), |d| {
        d.map(|e| e.unwrap().path()).collect::<Vec<_>>()
    });
    eprintln!("schemathesis left {} recordings", made.len());
    for rec in made {
        let meta = std::fs::read(rec.join("recording.json")).unwrap();
        let meta = gsrelay::record::Meta::from_json(&meta).unwrap();
        assert!(
            meta.stopped_ns.is_some(),
            "{} was left running: {meta:?}",
            rec.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
