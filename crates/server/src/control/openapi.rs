//! The OpenAPI 3.1 description of the HTTP API, served at `GET /v1/openapi.json`.
//!
//! The description is a file kept by hand, `docs/openapi.json`, beside the prose of
//! `docs/api.md`, and compiled into the binary so a relay always serves the one it was
//! built with. It is not generated from the Rust types: what a client needs from it is
//! mostly what the types cannot say (which statuses and error codes each route answers,
//! the token each needs, the headers, the ranges and patterns the handlers check), and
//! deriving schemas would put a documentation dependency on the relay core's types.
//! Instead `tests/openapi.rs` holds the file to the code, and fails naming what drifted:
//! the router's routes and methods against the described operations (both ways), every
//! answer of a live relay against the described statuses, headers and schemas, the
//! error codes against `docs/api.md`'s table, and schemathesis's fuzzing against all of
//! it. A new route is one `.route(...)` in the router and one path item in the file.
//!
//! No token is needed to read it (like `/metrics`: it holds nothing of any room), it is
//! outside the `/v1` in-flight limit, and other origins' pages may read it as CORS
//! allows, like the other `/v1` routes.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The route the description is served at.
pub const ROUTE: &str = "/v1/openapi.json";

/// The description, as served: `docs/openapi.json`.
pub const DESCRIPTION: &str = include_str!("../../../../docs/openapi.json");

/// Answers `GET /v1/openapi.json` with [`DESCRIPTION`].
pub async fn serve() -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            // A relay upgraded in place describes its new self at once.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        DESCRIPTION,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_is_openapi_3_1_of_this_version() {
        let doc: serde_json::Value =
            serde_json::from_str(DESCRIPTION).expect("docs/openapi.json is JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(
            doc["info"]["version"],
            env!("CARGO_PKG_VERSION"),
            "docs/openapi.json's info.version must be the crate's version"
        );
        assert!(
            doc["paths"].get(ROUTE).is_some(),
            "the description describes itself"
        );
    }
}
