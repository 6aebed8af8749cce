//! Request bodies handed to tonic's decoder one whole gRPC message at a time.
//!
//! tonic reserves a message's declared length as soon as it has read the 5-byte prefix, so a
//! client declaring 130 MiB and sending 5 bytes would cost 130 MiB per stream. [`WholeMessages`]
//! buffers a message until all its bytes arrived (memory follows the bytes received), refuses a
//! declared length past the limit at once (RESOURCE_EXHAUSTED, grpc-java's answer), and a stream
//! that ends inside a message (INTERNAL, as grpc-java).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use tonic::body::BoxBody;
use tonic::codegen::http;
use tonic::Status;

/// The gRPC length-prefixed message header: a compressed flag and a big-endian u32 length.
const PREFIX_BYTES: usize = 5;

pub struct WholeMessages {
    inner: BoxBody,
    buf: BytesMut,
    max_message_bytes: usize,
    ended: bool,
}

impl WholeMessages {
    pub fn new(inner: BoxBody, max_message_bytes: usize) -> WholeMessages {
        WholeMessages { inner, buf: BytesMut::new(), max_message_bytes, ended: false }
    }

    /// Wraps a request's body.
    pub fn gate(request: http::Request<BoxBody>, max_message_bytes: usize) -> http::Request<BoxBody> {
        request.map(|b| BoxBody::new(WholeMessages::new(b, max_message_bytes)))
    }

    /// The next whole message in the buffer, or a refusal of its declared length.
    fn take_message(&mut self) -> Option<Result<Frame<Bytes>, Status>> {
        let prefix = self.buf.get(..PREFIX_BYTES)?;
        let declared = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
        if declared > self.max_message_bytes {
            self.buf = BytesMut::new();
            self.ended = true;
            return Some(Err(Status::resource_exhausted(format!("gRPC message exceeds maximum size {}: {declared}", self.max_message_bytes))));
        }
        if self.buf.len() < PREFIX_BYTES + declared {
            return None;
        }
        Some(Ok(Frame::data(self.buf.split_to(PREFIX_BYTES + declared).freeze())))
    }
}

impl Body for WholeMessages {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        loop {
            if let Some(message) = this.take_message() {
                return Poll::Ready(Some(message));
            }
            if this.ended {
                if this.buf.is_empty() {
                    return Poll::Ready(None);
                }
                this.buf = BytesMut::new();
                return Poll::Ready(Some(Err(Status::internal("Encountered end-of-stream mid-frame"))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => this.ended = true,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => this.buf.extend_from_slice(&data),
                    // Trailers: after the last whole message they pass; inside one the stream ended there.
                    Err(trailers) if this.buf.is_empty() => return Poll::Ready(Some(Ok(trailers))),
                    Err(_) => this.ended = true,
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.buf.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;

    // The stream's error type is the body's, tonic's Status.
    #[allow(clippy::result_large_err)]
    fn body_of(chunks: Vec<Vec<u8>>, max: usize) -> WholeMessages {
        let stream = futures::stream::iter(chunks.into_iter().map(|c| Ok::<_, Status>(Frame::data(Bytes::from(c)))));
        WholeMessages::new(BoxBody::new(http_body_util::StreamBody::new(stream)), max)
    }

    fn framed(payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0];
        v.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        v.extend_from_slice(payload);
        v
    }

    async fn frames(mut b: WholeMessages) -> Vec<Result<Bytes, Status>> {
        let mut out = Vec::new();
        while let Some(f) = b.frame().await {
            out.push(f.map(|f| f.into_data().unwrap_or_default()));
        }
        out
    }

    #[tokio::test]
    async fn a_message_split_across_chunks_is_passed_on_whole() {
        let m = framed(b"hello world");
        let out = frames(body_of(vec![m[..3].to_vec(), m[3..9].to_vec(), m[9..].to_vec()], 1024)).await;
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].as_ref().ok(), Some(&Bytes::from(m)));
    }

    #[tokio::test]
    async fn two_messages_in_one_chunk_are_passed_on_one_by_one() {
        let (a, b) = (framed(b"a"), framed(b"bb"));
        let out = frames(body_of(vec![[a.clone(), b.clone()].concat()], 1024)).await;
        let got: Vec<Bytes> = out.into_iter().filter_map(Result::ok).collect();
        assert_eq!(got, vec![Bytes::from(a), Bytes::from(b)]);
    }

    #[tokio::test]
    async fn a_declared_length_past_the_limit_is_refused_before_its_bytes() {
        let mut huge = vec![0];
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        let out = frames(body_of(vec![huge], 1024)).await;
        assert_eq!(out.len(), 1);
        let e = out[0].as_ref().err().map(|s| (s.code(), s.message().to_owned()));
        assert_eq!(e, Some((tonic::Code::ResourceExhausted, format!("gRPC message exceeds maximum size 1024: {}", u32::MAX))));
    }

    #[tokio::test]
    async fn a_stream_ending_inside_a_message_is_an_error_not_a_short_message() {
        let m = framed(&[7; 100]);
        let out = frames(body_of(vec![m[..20].to_vec()], 1024)).await;
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].as_ref().err().map(|s| s.code()), Some(tonic::Code::Internal));
    }
}
