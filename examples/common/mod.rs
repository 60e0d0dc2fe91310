//! What the quick-start examples share: which relay, token and room to join, and the join.

use gsrelay::client::{Client, JoinOptions};

/// Where to join: the relay's HTTP API, an access token and the room.
#[derive(clap::Args)]
pub struct Connection {
    /// The relay's HTTP API.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub http: String,
    /// Access token for the room with the right the example needs: publish for `publish`,
    /// subscribe for `subscribe` (`gsrelay token ... --publish` or `--subscribe`).
    #[arg(long, env = "GSRELAY_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Room to join.
    #[arg(long, default_value = "dev")]
    pub room: String,
}

impl Connection {
    /// Joins the room over the HTTP API with `opts`.
    pub async fn join(&self, opts: JoinOptions) -> anyhow::Result<Client> {
        Ok(Client::join(&self.http, &self.token, &self.room, opts).await?)
    }
}
