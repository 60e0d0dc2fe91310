//! A real `redis-server` on a free loopback port, started for a test and killed when
//! dropped (`scripts/test.sh` installs Debian's).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started server may take to answer.
const START: Duration = Duration::from_secs(10);

/// A running `redis-server` that keeps nothing on disk.
pub struct Redis {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Redis {
    /// Starts a server on a free port.
    pub async fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        Self::start_on(port).await
    }

    /// Starts a server on `port` (again, after [`Redis::kill`]), empty.
    pub async fn start_on(port: u16) -> Self {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("starting redis-server ({e}): run scripts/test.sh, which installs it")
            });
        let redis = Self { child, port };
        let asked = Instant::now();
        while redis.connection().await.is_err() {
            assert!(
                asked.elapsed() < START,
                "redis-server did not answer on {port}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        redis
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A connection for the test's own look-ups.
    pub async fn connection(&self) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
        let client = redis::Client::open(self.url())?;
        let mut c = client.get_multiplexed_async_connection().await?;
        let () = redis::cmd("PING")
            .query_async(&mut c)
            .await
            .map(|_: String| ())?;
        Ok(c)
    }

    /// Kills it at once (SIGKILL): everything it held is gone.
    pub fn kill(mut self) -> u16 {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.port
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
