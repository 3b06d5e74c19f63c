//! Embeds the board description named by `CHELA_BOARD` (a board.json path; `firmware/build.sh`
//! makes it absolute) for `src/hw.rs`; an empty one when it is unset. At most 16 KiB, the bound
//! `chela_chip::board` reads.
fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-env-changed=CHELA_BOARD");
    let text = match std::env::var("CHELA_BOARD") {
        Ok(path) if !path.is_empty() => {
            println!("cargo:rerun-if-changed={path}");
            match std::fs::read_to_string(&path) {
                Ok(t) if t.len() <= 16 * 1024 => t,
                Ok(t) => panic!("CHELA_BOARD={path} is {} bytes; a board description is at most 16 KiB", t.len()),
                Err(e) => panic!("CHELA_BOARD={path} cannot be read: {e}"),
            }
        }
        _ => String::new(),
    };
    std::fs::write(out.join("board.json"), text).expect("OUT_DIR is writable");
}
