//! The transport tests of the integration package, with tonic's client features alone.

#[path = "../../../integration/tests/grpc_transport.rs"]
mod grpc_transport;
