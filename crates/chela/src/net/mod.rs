//! Outbound HTTP.
