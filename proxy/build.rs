//! Generates the protobuf types and the tonic service from `proto/` with protox (a protobuf
//! compiler in Rust), so no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/apache/rocketmq/v2/service.proto", "proto/apache/rocketmq/v2/definition.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    // The service's codec answers undecodable requests as grpc-java does (src/codec.rs).
    tonic_build::configure().build_client(true).build_server(true).codec_path("crate::codec::JavaCodec").compile_fds(descriptors)?;
    Ok(())
}
