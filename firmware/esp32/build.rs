//! Checks the board description named by `CHELA_BOARD` (a board.json path; `firmware/build.sh`
//! makes it absolute) with chela-board's checker, here on the host, and writes what the chip
//! drives of it as a `chela_chip::board::Compiled` for `src/hw.rs` (`None` when it is unset).
//! A description that does not pass the checker, is for the other chip or is over 16 KiB fails
//! the build with the checker's message.
//!
//! It also sets `CHELA_BUILT_UNIX`, the Unix seconds when it ran (or `SOURCE_DATE_EPOCH`): the
//! chip's floor for certificate dates until SNTP answers (`src/certs.rs`).

extern crate alloc;

#[path = "../chip/src/board/plan.rs"]
mod plan;

fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-env-changed=CHELA_BOARD");
    println!("cargo:rerun-if-changed=../chip/src/board/plan.rs");
    let chip = if std::env::var_os("CARGO_FEATURE_ESP32C3").is_some() { "esp32c3" } else { "esp32c6" };
    let code = match std::env::var("CHELA_BOARD") {
        Ok(path) if !path.is_empty() => {
            println!("cargo:rerun-if-changed={path}");
            let text =
                std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("CHELA_BOARD={path} cannot be read: {e}"));
            match plan::check(&text, chip) {
                Ok(Some(checked)) => format!("Some({})", plan::to_rust(&checked)),
                Ok(None) => String::from("None"),
                Err(problems) => panic!("CHELA_BOARD={path} is not a board this {chip} image can use:\n{problems}"),
            }
        }
        _ => String::from("None"),
    };
    std::fs::write(out.join("board.rs"), code).expect("OUT_DIR is writable");

    // No later than the image's build: this script runs whenever what it reads changes.
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let built = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v.trim().parse::<u64>().unwrap_or_else(|_| panic!("SOURCE_DATE_EPOCH={v} is not Unix seconds")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("the build machine's clock is after 1970")
            .as_secs(),
    };
    println!("cargo:rustc-env=CHELA_BUILT_UNIX={built}");
}
