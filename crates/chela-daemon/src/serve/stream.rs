//! Streamed response bodies: [`ChannelBody`], fed from a bounded queue (what a streamed SSE
//! answer is written through; it ends when every sender is gone), and [`FileBody`], a file read
//! as the client takes it.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::sync::mpsc;

pub struct ChannelBody(pub mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
    }
}

/// The first `len` bytes of a file, read a piece at a time when hyper asks for the next frame.
/// No task of its own: the body is the connection's, so a client that goes away or a stop of the
/// gateway ends the reading with it, and one that reads slowly holds one piece at a time.
pub struct FileBody {
    file: tokio::io::Take<tokio::fs::File>,
    piece: Box<[u8]>,
}

impl FileBody {
    const PIECE: usize = 64 * 1024;

    pub fn new(file: tokio::fs::File, len: u64) -> FileBody {
        FileBody { file: file.take(len), piece: vec![0; FileBody::PIECE].into_boxed_slice() }
    }
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        let mut piece = ReadBuf::new(&mut this.piece);
        match Pin::new(&mut this.file).poll_read(cx, &mut piece) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(())) if piece.filled().is_empty() => Poll::Ready(None),
            Poll::Ready(Ok(())) => Poll::Ready(Some(Ok(Frame::data(Bytes::copy_from_slice(piece.filled()))))),
            // A short body against its Content-Length: the client sees the download failed.
            Poll::Ready(Err(e)) => {
                chela_log::warn!("reading a file being served failed: {e}");
                Poll::Ready(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_file_body_reads_the_file_in_pieces_up_to_its_length_and_spawns_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("image.bin");
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let tasks = tokio::runtime::Handle::current().metrics().num_alive_tasks();

        let mut body = FileBody::new(tokio::fs::File::open(&path).await.unwrap(), 150_000);
        let mut got = Vec::new();
        let mut pieces = 0;
        while let Some(frame) = body.frame().await {
            let piece = frame.unwrap().into_data().unwrap();
            assert!(!piece.is_empty() && piece.len() <= FileBody::PIECE);
            assert_eq!(tokio::runtime::Handle::current().metrics().num_alive_tasks(), tasks, "no reader task");
            got.extend_from_slice(&piece);
            pieces += 1;
        }
        assert_eq!(got, data[..150_000], "the first `len` bytes, in order");
        assert!(pieces >= 3, "read a piece at a time: {pieces}");

        // A client that reads one piece and goes away leaves nothing reading behind.
        let mut body = FileBody::new(tokio::fs::File::open(&path).await.unwrap(), 200_000);
        assert!(body.frame().await.is_some());
        drop(body);
        assert_eq!(tokio::runtime::Handle::current().metrics().num_alive_tasks(), tasks);
    }
}
