//! One stable sort for the host's cold code: [`chela_core::sort`], where it lives so that the
//! shared core's cold lists (rule loading, memory listings) use the same one copy.

pub use chela_core::sort::{sort_by, sort_by_key};
