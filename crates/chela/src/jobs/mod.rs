//! The tasks of `chela run` that run scheduled jobs and fired rules through the daemon.
//!
//! Their stores (`scheduler`: the jobs, `router`: the rules and the event queue) sit below the
//! daemon, which keeps them and raises events into them; these tasks sit above it, because a
//! job or a rule's action is a turn or a message that goes through the daemon like any other.

pub mod router;
pub mod scheduler;

// The router's task test reuses its daemon with a held job run.
#[cfg(test)]
mod tests_router;
#[cfg(test)]
pub(crate) mod tests_scheduler;
