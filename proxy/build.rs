//! Generates the protobuf types and the tonic service from `proto/` with protox (a protobuf
//! compiler in Rust), so no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/apache/rocketmq/v2/service.proto", "proto/apache/rocketmq/v2/definition.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_build::configure().build_client(true).build_server(true).compile_fds(descriptors)?;
    Ok(())
}
