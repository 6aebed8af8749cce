//! The protobuf codec of the generated service (tonic-build's `codec_path`): prost's, but a
//! request that is not protobuf ends as grpc-java ends it in Java's proxy, UNKNOWN with no
//! message (tonic's own codec answers INTERNAL with the decode error).

use std::marker::PhantomData;

use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::{Code, Status};

pub struct JavaCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for JavaCodec<T, U> {
    fn default() -> Self {
        JavaCodec(PhantomData)
    }
}

impl<T, U> Codec for JavaCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProtobufEncoder<T>;
    type Decoder = ProtobufDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProtobufEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProtobufDecoder(PhantomData)
    }
}

pub struct ProtobufEncoder<T>(PhantomData<T>);

impl<T: Message> Encoder for ProtobufEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        // The buffer grows as needed: encoding fails only when it cannot.
        item.encode(buf).map_err(|e| Status::internal(e.to_string()))
    }
}

pub struct ProtobufDecoder<U>(PhantomData<U>);

impl<U: Message + Default> Decoder for ProtobufDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        U::decode(buf).map(Some).map_err(|e| {
            tracing::debug!(error = %e, "a gRPC message that is not protobuf");
            Status::new(Code::Unknown, "")
        })
    }
}
