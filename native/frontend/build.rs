//! Compiles the repository's proto/ (protox: no protoc binary) into the table of every RPC the front end serves:
//! its path, and whether the client and the server stream. A method added to proto/ is served after a rebuild
//! with no edit here; the Python side checks at start-up that the pipeline registered exactly these.
use std::{collections::BTreeSet, env, fs, path::PathBuf};

const FILES: [&str; 3] = [
    "groupcoord/wire/v1/coordinator.proto",
    "groupcoord/wire/v1/share.proto",
    "groupcoord/wire/v1/streams.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    println!("cargo:rerun-if-changed={}", root.display());
    for f in FILES {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    let fds = protox::compile(FILES, [&root])?;
    let mut seen = BTreeSet::new();
    let mut out = String::from("/// (path, client streaming, server streaming) of every RPC of proto/.\n");
    out.push_str("pub static PROTO_METHODS: &[(&str, bool, bool)] = &[\n");
    for file in &fds.file {
        for service in &file.service {
            for m in &service.method {
                let path = format!("/{}.{}/{}", file.package(), service.name(), m.name());
                if seen.insert(path.clone()) {
                    out.push_str(&format!(
                        "    ({path:?}, {}, {}),\n",
                        m.client_streaming(),
                        m.server_streaming()
                    ));
                }
            }
        }
    }
    out.push_str("];\n");
    fs::write(PathBuf::from(env::var("OUT_DIR")?).join("methods.rs"), out)?;
    Ok(())
}
