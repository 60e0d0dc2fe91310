//! `gsrelay room`: a game backend's server API (`docs/api.md`, "Server API") from the
//! command line: list rooms, show one, close it, remove, mute or unmute a participant,
//! set metadata, start and stop a room's recording.
//!
//! A refusal of the relay prints `error: <code>: <message>` and exits with
//! [`EXIT_REFUSED`]; a relay that cannot be reached exits with [`EXIT_UNREACHABLE`];
//! anything wrong before a request is sent (no token, metadata that is not JSON) exits
//! with 1.

use anyhow::{Context, anyhow, bail};
use clap::{Args, Subcommand};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::fmt;
use std::io::Read;
use std::time::Duration;
use url::Url;

/// Exit status when the relay answered with an error (4xx, 5xx).
pub const EXIT_REFUSED: u8 = 3;
/// Exit status when the relay could not be reached (connection refused, timeout, DNS).
pub const EXIT_UNREACHABLE: u8 = 4;

/// How long one call may take, and its connection.
const TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Arguments of `gsrelay room`.
#[derive(Debug, Args)]
#[command(
    after_help = "Exit status: 0 done; 1 a local error (no token, bad JSON); \
    2 a usage error; 3 the relay refused (prints `error: <code>: <message>`); \
    4 the relay could not be reached."
)]
pub struct RoomArgs {
    /// The relay's HTTP API.
    #[arg(
        long,
        env = "GSRELAY_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    url: String,
    /// An admin token: of the room for one room's calls, relay-wide (`gsrelay token
    /// --room '*' --admin`) for `list` and any room. Required.
    #[arg(long, env = "GSRELAY_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: RoomCommand,
}

#[derive(Debug, Subcommand)]
enum RoomCommand {
    /// Every room of the relay (of its cluster) with its counts (relay-wide admin token).
    List {
        /// Print the relay's JSON answer instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One room: its metadata, participants and streams.
    Show {
        room: String,
        /// Print `{"room": ..., "participants": [...]}` as JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// A room's participants.
    Participants {
        room: String,
        /// Print the relay's JSON answer instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Close a room: its sessions end (BYE) and joins are refused for a while.
    Close { room: String },
    /// Remove a participant: its sessions end and its tokens issued until now are refused.
    Remove { room: String, identity: String },
    /// Stop forwarding what a participant publishes.
    Mute { room: String, identity: String },
    /// Forward what a participant publishes again.
    Unmute { room: String, identity: String },
    /// Set a room's metadata (`ROOM JSON`) or a participant's (`ROOM IDENTITY JSON`):
    /// any JSON of up to 4096 bytes, `null` to clear; `-` reads it from standard input.
    #[command(override_usage = "gsrelay room metadata [OPTIONS] <ROOM> [IDENTITY] <JSON>")]
    Metadata {
        room: String,
        /// The participant, then its metadata; alone, the room's metadata.
        #[arg(value_name = "IDENTITY|JSON")]
        first: String,
        /// The participant's metadata.
        #[arg(value_name = "JSON")]
        second: Option<String>,
    },
    /// Start, stop or show a room's recording (`docs/recording.md`).
    Record {
        #[command(subcommand)]
        action: RecordAction,
    },
}

#[derive(Debug, Subcommand)]
enum RecordAction {
    /// Start recording a room.
    Start { room: String },
    /// Stop recording a room; prints the recording once its files are closed.
    Stop { room: String },
    /// The room's running recording.
    Status { room: String },
}

/// A failure with its own exit status.
#[derive(Debug)]
pub struct Failure {
    /// The exit status.
    pub exit: u8,
    message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// The relay's `{"error":{"code","message"}}` as `<code>: <message>`; for an answer
/// that is not one (a proxy's page), `http_<status>` and the start of its text.
fn refusal(status: StatusCode, text: &str) -> Failure {
    let json: Option<Value> = serde_json::from_str(text).ok();
    let error = json.as_ref().map(|j| &j["error"]);
    let message = match error.and_then(|e| Some((e["code"].as_str()?, e["message"].as_str()?))) {
        Some((code, message)) => format!("{code}: {message}"),
        None => {
            let text: String = text.trim().chars().take(200).collect();
            let text = if text.is_empty() {
                status.canonical_reason().unwrap_or("").to_owned()
            } else {
                text
            };
            format!("http_{}: {text}", status.as_u16())
        }
    };
    Failure {
        exit: EXIT_REFUSED,
        message,
    }
}

/// The relay's HTTP API with a bearer token.
pub(super) struct Api {
    http: reqwest::Client,
    base: Url,
    token: String,
}

impl Api {
    pub(super) fn new(url: &str, token: String) -> anyhow::Result<Self> {
        let base = Url::parse(url).with_context(|| format!("--url {url:?} is not a URL"))?;
        if base.cannot_be_a_base() || !matches!(base.scheme(), "http" | "https") {
            bail!("--url {url:?}: an http:// or https:// address of the relay's API");
        }
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .context("building the HTTP client")?;
        Ok(Self { http, base, token })
    }

    /// The URL of the API path made of `segments`, each percent-encoded.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    /// Calls the API; the answer's JSON (`Null` for an empty answer), or a [`Failure`].
    pub(super) async fn call(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let url = self.url(segments);
        let mut req = self
            .http
            .request(method, url.clone())
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let unreachable = |e: reqwest::Error| Failure {
            exit: EXIT_UNREACHABLE,
            message: format!("cannot reach the relay at {}: {}", self.base, why(&e)),
        };
        let resp = req.send().await.map_err(unreachable)?;
        let status = resp.status();
        let text = resp.text().await.map_err(unreachable)?;
        if !status.is_success() {
            return Err(refusal(status, &text).into());
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).with_context(|| format!("{url}: the answer is not JSON"))
    }
}

/// Why a request failed: its innermost cause (`Connection refused (os error 111)`, a
/// name that does not resolve), which reqwest's own message hides.
fn why(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return format!("no answer within {} s", TIMEOUT.as_secs());
    }
    let mut cause: &dyn std::error::Error = e;
    while let Some(s) = cause.source() {
        cause = s;
    }
    cause.to_string()
}

/// Runs `gsrelay room`.
pub fn room(a: RoomArgs) -> anyhow::Result<()> {
    let token = required_token(a.token)?;
    // Metadata is checked before anything is sent.
    let metadata = match &a.command {
        RoomCommand::Metadata { first, second, .. } => {
            Some(metadata_json(second.as_ref().unwrap_or(first))?)
        }
        _ => None,
    };
    let api = Api::new(&a.url, token)?;
    runtime()?.block_on(run(&api, a.command, metadata))
}

/// The token given, or why none is: every call needs one.
pub(super) fn required_token(token: Option<String>) -> anyhow::Result<String> {
    let token = token.filter(|t| !t.trim().is_empty()).ok_or_else(|| {
        anyhow!(
            "no token: give --token or set GSRELAY_TOKEN (an admin token of the room, or a \
             relay-wide one: gsrelay token --room '*' --identity ops --admin)"
        )
    })?;
    Ok(token.trim().to_owned())
}

/// The runtime a command's calls run on.
pub(super) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")
}

/// Parses the metadata argument (`-`: standard input) as JSON.
fn metadata_json(arg: &str) -> anyhow::Result<Value> {
    let text = if arg == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading the metadata from standard input")?;
        s
    } else {
        arg.to_owned()
    };
    serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "the metadata is not JSON ({e}): give a JSON value, quoted for the shell, e.g. \
             '{{\"map\":\"dust\"}}' or '\"a string\"'"
        )
    })
}

async fn run(api: &Api, command: RoomCommand, metadata: Option<Value>) -> anyhow::Result<()> {
    match command {
        RoomCommand::List { json } => {
            let list = api.call(Method::GET, &["v1", "rooms"], None).await?;
            if json {
                print_json(&list);
            } else {
                print!("{}", rooms_table(&list));
            }
        }
        RoomCommand::Show { room, json } => {
            let info = api.call(Method::GET, &["v1", "rooms", &room], None).await?;
            // A room whose sessions all left between the two calls shows none.
            let participants = match api
                .call(Method::GET, &["v1", "rooms", &room, "participants"], None)
                .await
            {
                Ok(p) => p["participants"].clone(),
                Err(e) if is_not_found(&e) => Value::Array(Vec::new()),
                Err(e) => return Err(e),
            };
            if json {
                print_json(&serde_json::json!({"room": info, "participants": participants}));
            } else {
                print!("{}", room_text(&info, &participants));
            }
        }
        RoomCommand::Participants { room, json } => {
            let list = api
                .call(Method::GET, &["v1", "rooms", &room, "participants"], None)
                .await?;
            if json {
                print_json(&list);
            } else {
                print!("{}", participants_table(&list["participants"]));
            }
        }
        RoomCommand::Close { room } => {
            api.call(Method::DELETE, &["v1", "rooms", &room], None)
                .await?;
            println!("closed room {room}");
        }
        RoomCommand::Remove { room, identity } => {
            let path = ["v1", "rooms", &room, "participants", &identity];
            api.call(Method::DELETE, &path, None).await?;
            println!("removed {identity} from {room}");
        }
        RoomCommand::Record { action } => {
            let (method, room, done) = match &action {
                RecordAction::Start { room } => (Method::POST, room, "recording"),
                RecordAction::Stop { room } => (Method::DELETE, room, "stopped recording"),
                RecordAction::Status { room } => (Method::GET, room, "recording"),
            };
            let path = ["v1", "rooms", room.as_str(), "recording"];
            let r = api.call(method, &path, None).await?;
            println!(
                "{done} {room}: {} ({}, {} bytes in {} segments)",
                field(&r["id"]),
                field(&r["state"]),
                field(&r["bytes"]),
                field(&r["segments"])
            );
        }
        RoomCommand::Mute { room, identity } => mute(api, &room, &identity, true).await?,
        RoomCommand::Unmute { room, identity } => mute(api, &room, &identity, false).await?,
        RoomCommand::Metadata {
            room,
            first,
            second,
        } => {
            let metadata = metadata.unwrap_or(Value::Null);
            if second.is_some() {
                let identity = &first;
                let path = ["v1", "rooms", &room, "participants", identity.as_str()];
                let body = serde_json::json!({ "metadata": metadata });
                let p = api.call(Method::PATCH, &path, Some(&body)).await?;
                println!(
                    "metadata of {identity} in {room}: {}",
                    compact(&p["metadata"])
                );
            } else {
                let path = ["v1", "rooms", &room, "metadata"];
                api.call(Method::PUT, &path, Some(&metadata)).await?;
                println!("metadata of room {room}: {}", compact(&metadata));
            }
        }
    }
    Ok(())
}

async fn mute(api: &Api, room: &str, identity: &str, muted: bool) -> anyhow::Result<()> {
    let path = ["v1", "rooms", room, "participants", identity];
    let body = serde_json::json!({ "publish": !muted });
    let p = api.call(Method::PATCH, &path, Some(&body)).await?;
    let now = if p["muted"].as_bool() == Some(true) {
        "muted"
    } else {
        "not muted"
    };
    println!("{identity} in {room}: {now}");
    Ok(())
}

fn is_not_found(e: &anyhow::Error) -> bool {
    e.downcast_ref::<Failure>()
        .is_some_and(|f| f.exit == EXIT_REFUSED && f.message.starts_with("room_not_found:"))
}

pub(super) fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}

/// A JSON value on one line.
fn compact(v: &Value) -> String {
    v.to_string()
}

/// A number or string field as text, `-` when absent.
pub(super) fn field(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.to_owned(),
        other => other.to_string(),
    }
}

/// Rows under a header, each column as wide as its widest cell, two spaces apart.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        out.push_str(&line(row.clone()));
    }
    out
}

fn rooms_table(list: &Value) -> String {
    let rooms = list["rooms"].as_array().cloned().unwrap_or_default();
    if rooms.is_empty() {
        return "no rooms\n".to_owned();
    }
    let rows: Vec<Vec<String>> = rooms
        .iter()
        .map(|r| {
            ["room", "sessions", "participants", "streams", "objects"]
                .iter()
                .map(|k| field(&r[*k]))
                .collect()
        })
        .collect();
    table(
        &["ROOM", "SESSIONS", "PARTICIPANTS", "STREAMS", "OBJECTS"],
        &rows,
    )
}

fn participants_table(participants: &Value) -> String {
    let list = participants.as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        return "no participants\n".to_owned();
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|p| {
            let ssrcs: Vec<String> = p["ssrcs"]
                .as_array()
                .map(|a| a.iter().map(field).collect())
                .unwrap_or_default();
            let sessions = p["sessions"].as_array().map_or(0, Vec::len);
            vec![
                field(&p["identity"]),
                sessions.to_string(),
                if ssrcs.is_empty() {
                    "-".to_owned()
                } else {
                    ssrcs.join(",")
                },
                field(&p["publish"]),
                field(&p["subscribe"]),
                field(&p["muted"]),
                compact(&p["metadata"]),
            ]
        })
        .collect();
    table(
        &[
            "IDENTITY",
            "SESSIONS",
            "SSRCS",
            "PUBLISH",
            "SUBSCRIBE",
            "MUTED",
            "METADATA",
        ],
        &rows,
    )
}

fn room_text(info: &Value, participants: &Value) -> String {
    let sessions = info["sessions"].as_array().map_or(0, Vec::len);
    let streams = info["streams"].as_array().cloned().unwrap_or_default();
    let mut out = format!(
        "room:      {}\nmetadata:  {}\nsessions:  {sessions}\nstreams:   {}\n\n",
        field(&info["room"]),
        compact(&info["metadata"]),
        streams.len()
    );
    out.push_str(&participants_table(participants));
    if !streams.is_empty() {
        let rows: Vec<Vec<String>> = streams
            .iter()
            .map(|s| {
                ["ssrc", "objects", "bytes"]
                    .iter()
                    .map(|k| field(&s[*k]))
                    .collect()
            })
            .collect();
        out.push('\n');
        out.push_str(&table(&["STREAM SSRC", "OBJECTS", "BYTES"], &rows));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_table_aligns_its_columns() {
        let t = rooms_table(&json!({"rooms": [
            {"room": "arena", "sessions": 12, "participants": 3, "streams": 2, "objects": 140},
            {"room": "b", "sessions": 1, "participants": 1, "streams": 0, "objects": 0},
        ]}));
        assert_eq!(
            t,
            "ROOM   SESSIONS  PARTICIPANTS  STREAMS  OBJECTS\n\
             arena  12        3             2        140\n\
             b      1         1             0        0\n"
        );
        assert_eq!(rooms_table(&json!({"rooms": []})), "no rooms\n");
    }

    #[test]
    fn a_refusal_reads_the_relays_error_or_says_what_came() {
        let f = refusal(
            StatusCode::FORBIDDEN,
            r#"{"error":{"code":"forbidden_room","message":"not this room"}}"#,
        );
        assert_eq!(f.to_string(), "forbidden_room: not this room");
        assert_eq!(f.exit, EXIT_REFUSED);
        let f = refusal(StatusCode::BAD_GATEWAY, "<html>bad gateway</html>");
        assert_eq!(f.to_string(), "http_502: <html>bad gateway</html>");
        let f = refusal(StatusCode::SERVICE_UNAVAILABLE, "");
        assert_eq!(f.to_string(), "http_503: Service Unavailable");
    }

    #[test]
    fn paths_are_percent_encoded_under_the_base() {
        let api = Api::new("http://relay:8080/", "t".into()).unwrap();
        assert_eq!(
            api.url(&["v1", "rooms", "r", "participants", "a b/c"])
                .as_str(),
            "http://relay:8080/v1/rooms/r/participants/a%20b%2Fc"
        );
        let api = Api::new("http://relay/gsrelay", "t".into()).unwrap();
        assert_eq!(
            api.url(&["v1", "rooms"]).as_str(),
            "http://relay/gsrelay/v1/rooms"
        );
        assert!(Api::new("relay:8080", "t".into()).is_err());
    }

    #[test]
    fn metadata_must_be_json() {
        assert_eq!(metadata_json(r#"{"a":1}"#).unwrap(), json!({"a": 1}));
        assert_eq!(metadata_json("null").unwrap(), Value::Null);
        let e = metadata_json("{map: dust}").unwrap_err().to_string();
        assert!(e.starts_with("the metadata is not JSON"), "{e}");
    }
}
