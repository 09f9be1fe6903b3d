//! This build's version and the wire protocol's (support: used by the server, the client and
//! the forge adapter's user agent).

/// The wire protocol's version. A client refuses a server that speaks another one.
pub const PROTOCOL: u32 = 1;
/// This build's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
