//! Compiles `proto/*.proto` (at the repository root) with `protox`, a pure-Rust protobuf
//! compiler, so no system `protoc` is needed.

use std::path::PathBuf;

const PROTOS: [&str; 3] = ["hello.proto", "helloworld.proto", "ticker.proto"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    for file in PROTOS {
        println!("cargo:rerun-if-changed={}", proto_dir.join(file).display());
    }
    let descriptors = protox::compile(PROTOS, [&proto_dir])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
