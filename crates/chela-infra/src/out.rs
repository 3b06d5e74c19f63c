//! Standard output for commands. A reader that stops reading (`chela cron list | head -1`)
//! ends the command quietly, as it ends `cat`, where `println!` would panic: Rust ignores
//! SIGPIPE, so the write fails with `BrokenPipe` instead of the kernel stopping the process.
//! (SIGPIPE stays ignored: the daemon and the MCP client write to sockets and child pipes that
//! may close, and must get the error, not be killed.)

use std::fmt;
use std::io::{self, Write};

/// Writes to standard output and flushes (a streamed answer shows as it comes). A closed pipe
/// ends the process with success; any other failure ends it with a sentence and status 1.
pub fn print(args: fmt::Arguments<'_>) {
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        // Nothing more can be shown where the person looks; stderr may still be there.
        let _ = writeln!(io::stderr(), "chela: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// `println!` for commands: see [`print`].
#[macro_export]
macro_rules! outln {
    () => {
        $crate::out::print(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for commands: see [`print`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::print(format_args!($($arg)*))
    };
}
