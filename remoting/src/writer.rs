//! The socket side of a connection's writer: frames encoded into one buffer and written with
//! vectored writes, where a large body (a pull's messages, each a slice of the commit log's
//! mapping) goes from its own buffers to the socket, not copied into the frame buffer first
//! (Java's FileRegion). Small bodies are copied: an iovec per 128-byte body costs more than the copy.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use futures::Sink;
use tokio::io::AsyncWrite;

use crate::codec::{CodecError, RemotingCodec};
use crate::command::RemotingCommand;

/// Bodies of at least this many bytes (all parts counted) are written from their own buffers.
pub const SEPARATE_BODY_BYTES: usize = 4096;
/// Above this many bytes queued, [`Sink::poll_ready`] writes them out before taking another frame
/// (tokio-util's `FramedWrite` uses the same boundary).
const FLUSH_AT_BYTES: usize = 128 * 1024;
/// Slices per `writev`; Linux takes up to 1,024. A pull's answer is a slice per message (32 by
/// default), so a batch of a few answers fills a few hundred.
const MAX_SLICES: usize = 256;

pub struct FrameWriter<W> {
    io: W,
    codec: RemotingCodec,
    /// Frames (or frame heads) not yet moved to `queue`.
    buf: BytesMut,
    /// What is to be written before `buf`, in order.
    queue: VecDeque<Bytes>,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    pub fn new(io: W, codec: RemotingCodec) -> Self {
        FrameWriter { io, codec, buf: BytesMut::with_capacity(8 * 1024), queue: VecDeque::new() }
    }

    fn queued_bytes(&self) -> usize {
        self.queue.iter().map(Bytes::len).sum::<usize>() + self.buf.len()
    }

    /// Writes everything queued.
    fn poll_write_all(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.buf.is_empty() {
            self.queue.push_back(self.buf.split().freeze());
        }
        while !self.queue.is_empty() {
            let mut slices = [IoSlice::new(&[]); MAX_SLICES];
            let n = self.queue.iter().zip(slices.iter_mut()).map(|(chunk, slice)| *slice = IoSlice::new(chunk)).count();
            let mut written = ready!(Pin::new(&mut self.io).poll_write_vectored(cx, &slices[..n]))?;
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            while written > 0 {
                let Some(front) = self.queue.front_mut() else { break };
                if written < front.len() {
                    front.advance(written);
                    break;
                }
                written -= front.len();
                self.queue.pop_front();
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> Sink<RemotingCommand> for FrameWriter<W> {
    type Error = CodecError;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), CodecError>> {
        let this = self.get_mut();
        if this.queued_bytes() >= FLUSH_AT_BYTES {
            ready!(this.poll_write_all(cx))?;
        }
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, cmd: RemotingCommand) -> Result<(), CodecError> {
        let this = self.get_mut();
        if cmd.body_len() < SEPARATE_BODY_BYTES {
            return tokio_util::codec::Encoder::encode(&mut this.codec, &cmd, &mut this.buf);
        }
        this.codec.encode_head(&cmd, &mut this.buf)?;
        this.queue.push_back(this.buf.split().freeze());
        let RemotingCommand { body, body_tail, .. } = cmd;
        this.queue.extend(body.into_iter().chain(body_tail));
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), CodecError>> {
        let this = self.get_mut();
        ready!(this.poll_write_all(cx))?;
        ready!(Pin::new(&mut this.io).poll_flush(cx))?;
        Poll::Ready(Ok(()))
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), CodecError>> {
        ready!(self.as_mut().poll_flush(cx))?;
        ready!(Pin::new(&mut self.get_mut().io).poll_shutdown(cx))?;
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use futures::SinkExt;
    use tokio::io::AsyncReadExt;

    use super::*;
    use crate::code::RequestCode;
    use crate::codec::encode_frame;

    fn command(opaque: i32, body_bytes: usize) -> RemotingCommand {
        let body: Vec<u8> = (0..body_bytes).map(|i| (i % 251) as u8).collect();
        let cmd = RemotingCommand::request(RequestCode::PULL_MESSAGE).with_ext("topic", "T").with_opaque(opaque);
        if body_bytes == 0 {
            cmd
        } else {
            cmd.with_body(body)
        }
    }

    /// Frames with small, large and no bodies, through a pipe that takes a few bytes per write
    /// (so vectored writes stop inside heads and bodies), read back as the codec writes them.
    #[tokio::test]
    async fn frames_reach_the_peer_byte_for_byte_however_the_writes_are_cut() {
        let (ours, mut theirs) = tokio::io::duplex(7);
        let commands: Vec<RemotingCommand> =
            [0, 100, SEPARATE_BODY_BYTES, 40_000, 0, SEPARATE_BODY_BYTES - 1, 300_000].iter().enumerate().map(|(i, n)| command(i as i32, *n)).collect();
        let expected: Vec<u8> = commands.iter().flat_map(|c| encode_frame(c).unwrap().to_vec()).collect();
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            theirs.read_to_end(&mut got).await.unwrap();
            got
        });
        let mut writer = FrameWriter::new(ours, RemotingCodec::default());
        for cmd in commands {
            writer.feed(cmd).await.unwrap();
        }
        writer.close().await.unwrap();
        assert_eq!(reader.await.unwrap(), expected);
    }

    /// A body in parts, many of them (more than one `writev` takes), arrives as the one body it
    /// stands for, with a small body in parts copied whole like any small body.
    #[tokio::test]
    async fn a_body_in_parts_reaches_the_peer_as_one_body() {
        let (ours, mut theirs) = tokio::io::duplex(1000);
        let parts = |n: usize, each: usize| -> Vec<Bytes> { (0..n).map(|i| Bytes::from(vec![i as u8; each])).collect() };
        let whole = |parts: &[Bytes]| parts.concat();
        let (big, small) = (parts(200, 131), parts(3, 10));
        let expected: Vec<u8> =
            [command(1, 0).with_body(whole(&big)), command(2, 0).with_body(whole(&small))].iter().flat_map(|c| encode_frame(c).unwrap().to_vec()).collect();
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            theirs.read_to_end(&mut got).await.unwrap();
            got
        });
        let mut writer = FrameWriter::new(ours, RemotingCodec::default());
        writer.feed(command(1, 0).with_body_parts(big)).await.unwrap();
        writer.feed(command(2, 0).with_body_parts(small)).await.unwrap();
        writer.close().await.unwrap();
        assert_eq!(reader.await.unwrap(), expected);
    }

    #[tokio::test]
    async fn a_frame_over_the_limit_is_refused_and_nothing_of_it_is_queued() {
        let (ours, _theirs) = tokio::io::duplex(1 << 20);
        let mut writer = FrameWriter::new(ours, RemotingCodec::new(1024));
        assert!(matches!(writer.feed(command(1, 2048)).await, Err(CodecError::FrameTooLarge { .. })));
        assert_eq!(writer.queued_bytes(), 0);
    }
}
