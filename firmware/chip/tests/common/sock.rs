//! A blocking loopback socket behind the async byte-stream traits the chip's TLS and Feishu
//! code drive, for the tests that run them against real local servers.
//!
//! Its own file, included by `#[path]`, rather than part of `common/mod.rs`: the tests that do
//! not use it (pki) would otherwise carry it as dead code.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;

use embedded_io_async::{ErrorKind, ErrorType, Read, Write};

/// A blocking TCP stream as the chip's async byte stream.
pub struct Sock(pub TcpStream);

impl ErrorType for Sock {
    type Error = ErrorKind;
}

impl Read for Sock {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        self.0.read(buf).map_err(|_| ErrorKind::Other)
    }
}

impl Write for Sock {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, ErrorKind> {
        self.0.write(buf).map_err(|_| ErrorKind::Other)
    }

    async fn flush(&mut self) -> Result<(), ErrorKind> {
        self.0.flush().map_err(|_| ErrorKind::Other)
    }
}
