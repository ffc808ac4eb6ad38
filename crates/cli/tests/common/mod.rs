//! Helpers shared by the CLI test files: run the binary, read its output, make a
//! scratch directory (per test binary and process, so files never collide).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output};

pub fn cotenant(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cotenant")).args(args).output().expect("binary runs")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cotenant-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
