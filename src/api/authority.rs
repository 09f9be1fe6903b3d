//! The authority routes' contract (see [`crate::api`]).

/// The OpenAPI operations of this area.
#[derive(utoipa::OpenApi)]
#[openapi()]
pub struct Doc;
