//! tonic (gRPC) clients: `tonic::Status` as a `#[retry]` function's error, classified by
//! gRPC's rules, and a layer around a client's channel that tells the server which
//! attempt it is and how long the call has. Enabled by the `tonic` cargo feature (tonic
//! 0.14.9 or a later 0.14, which needs Rust 1.88).
//!
//! ```no_run
//! use persevere::tonic::RetryMetadata;
//! use persevere::{idempotent, retry};
//! use tonic::transport::Channel;
//! use tonic_health::pb::health_client::HealthClient;
//! use tonic_health::pb::HealthCheckRequest;
//!
//! // The client, once: its requests carry `grpc-previous-rpc-attempts` on retries and
//! // a `grpc-timeout` no longer than the call's deadline.
//! type Client = HealthClient<RetryMetadata<Channel>>;
//!
//! fn client(channel: Channel) -> Client {
//!     HealthClient::new(RetryMetadata::new(channel))
//! }
//!
//! #[retry(deadline = "2s")]
//! #[idempotent]
//! async fn check(client: &mut Client) -> Result<i32, tonic::Status> {
//!     Ok(client.check(HealthCheckRequest::default()).await?.into_inner().status)
//! }
//! ```

mod classify;
mod metadata;

pub use classify::{GRPC_RETRY_PUSHBACK_MS, Pushback};
pub use metadata::{
    GRPC_PREVIOUS_RPC_ATTEMPTS, RetryMetadata, RetryMetadataFuture, RetryMetadataLayer,
    insert_retry_metadata,
};
