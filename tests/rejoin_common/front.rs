//! An HTTP front the clients join through, as a Service in front of the relays: it passes
//! every request on to the relay it points at, except leaves (`DELETE`), which it holds
//! without answering (as a node that died with its connections open does) or passes on
//! only once a given number of joins have been answered (a leave that reaches a live relay
//! after the rejoin's join). It can also hold the next joins without an answer, as a
//! frozen node does (its kernel accepts the connection). It counts what it saw.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the front does with a leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaves {
    /// Never answered: held open until the client gives it up.
    Hold,
    /// Passed on once this many joins (`POST`s) have been answered.
    AfterJoins(u64),
}

/// What the front saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// Joins answered.
    pub joins: u64,
    /// Leaves received.
    pub leaves: u64,
    /// Leaves passed on and answered.
    pub leaves_answered: u64,
    /// Held leaves whose client closed the connection before an answer.
    pub leaves_given_up: u64,
    /// Joins held without an answer ([`Front::hold_next_joins`]).
    pub joins_held: u64,
    /// Held joins whose client closed the connection.
    pub joins_given_up: u64,
}

#[derive(Debug)]
struct Shared {
    target: Mutex<SocketAddr>,
    leaves: Leaves,
    seen: Mutex<Seen>,
    /// Joins answered, for the leaves that wait for them.
    joins: watch::Sender<u64>,
    /// How many of the next joins to hold.
    hold_joins: Mutex<u64>,
}

/// A running front; it stops with the test's runtime.
#[derive(Debug, Clone)]
pub struct Front {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Front {
    /// A front on loopback passing requests to the HTTP API at `target`.
    pub async fn start(target: SocketAddr, leaves: Leaves) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let shared = Arc::new(Shared {
            target: Mutex::new(target),
            leaves,
            seen: Mutex::default(),
            joins: watch::channel(0).0,
            hold_joins: Mutex::new(0),
        });
        let front = Self {
            addr: listener.local_addr().unwrap(),
            shared: shared.clone(),
        };
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(serve(conn, shared.clone()));
            }
        });
        front
    }

    /// The base URL clients join at.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Sends the next requests to the HTTP API at `target`.
    pub fn point_to(&self, target: SocketAddr) {
        *self.shared.target.lock().unwrap() = target;
    }

    /// Holds the next `n` joins (`POST`s) without an answer until their client closes
    /// the connection.
    pub fn hold_next_joins(&self, n: u64) {
        *self.shared.hold_joins.lock().unwrap() = n;
    }

    /// What it saw so far.
    pub fn seen(&self) -> Seen {
        *self.shared.seen.lock().unwrap()
    }
}

/// One request on `conn` (the answer says `Connection: close`).
async fn serve(mut conn: TcpStream, shared: Arc<Shared>) {
    let Some((method, path, headers, body)) = read_request(&mut conn).await else {
        return;
    };
    if method == "POST" && take_one(&shared.hold_joins) {
        shared.seen.lock().unwrap().joins_held += 1;
        hold(&mut conn).await;
        shared.seen.lock().unwrap().joins_given_up += 1;
        return;
    }
    if method == "DELETE" {
        shared.seen.lock().unwrap().leaves += 1;
        match shared.leaves {
            Leaves::Hold => {
                hold(&mut conn).await;
                shared.seen.lock().unwrap().leaves_given_up += 1;
                return;
            }
            Leaves::AfterJoins(n) => {
                let mut joins = shared.joins.subscribe();
                if joins.wait_for(|&j| j >= n).await.is_err() {
                    return;
                }
            }
        }
    }
    let target = *shared.target.lock().unwrap();
    let url = format!("http://{target}{path}");
    let mut req = reqwest::Client::new().request(method.parse().unwrap(), url);
    for (name, value) in &headers {
        if name.eq_ignore_ascii_case("authorization") || name.eq_ignore_ascii_case("content-type") {
            req = req.header(name.as_str(), value.as_str());
        }
    }
    let Ok(resp) = req.body(body).send().await else {
        return;
    };
    let status = resp.status();
    let answer = resp.bytes().await.unwrap_or_default();
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        answer.len()
    );
    let _ = conn.write_all(head.as_bytes()).await;
    let _ = conn.write_all(&answer).await;
    let _ = conn.shutdown().await;
    match method.as_str() {
        "POST" => {
            shared.seen.lock().unwrap().joins += 1;
            shared.joins.send_modify(|j| *j += 1);
        }
        "DELETE" => shared.seen.lock().unwrap().leaves_answered += 1,
        _ => {}
    }
}

/// Takes one from a count of requests to hold; false when none is left.
fn take_one(count: &Mutex<u64>) -> bool {
    let mut n = count.lock().unwrap();
    let held = *n > 0;
    *n = n.saturating_sub(1);
    held
}

/// Waits until the client closes `conn`: no answer ever comes.
async fn hold(conn: &mut TcpStream) {
    let mut buf = [0u8; 512];
    while matches!(conn.read(&mut buf).await, Ok(n) if n > 0) {}
}

/// The method, path, headers and body of the request on `conn`.
async fn read_request(
    conn: &mut TcpStream,
) -> Option<(String, String, Vec<(String, String)>, Vec<u8>)> {
    let mut buf = Vec::new();
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = conn.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buf[end..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let n = conn.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        body.extend_from_slice(&chunk[..n]);
    }
    Some((method, path, headers, body))
}
