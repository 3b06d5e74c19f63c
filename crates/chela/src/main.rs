//! The `chela` binary. See the README.
mod net;

fn main() {}
