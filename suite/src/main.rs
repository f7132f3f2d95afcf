//! The README's test command: `cargo run -q -p suite [-- CARGO TEST ARGS]`.
//!
//! Runs `cargo test --no-fail-fast ARGS` in the workspace (its default members: every crate but
//! `xtask`), streams its output, and closes with why tests skipped (with counts) and one line
//! `N passed, N failed, N skipped`. libtest shows a test that decided at run time not to run as
//! `ok` and hides its `skipped: <reason>` line; here it counts as skipped, not passed. The tests
//! report skips through a log file named by `PERF_TEST_SKIP_LOG` (see [`tally::SKIP_LOG_ENV`]).
//! Exits with cargo's status. `PERF_TEST_STRICT=1` passes through to the tests.
//!
//! The sums read libtest's `test result:` lines from the output, so with `-- --nocapture` a test that
//! prints a child test binary's own output (as `reliability_unprivileged` does) adds that child's line
//! too; without it (the default) libtest keeps such output to itself.

mod tally;

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, ExitCode};

use tally::{parse_skip_log, Tally, SKIP_LOG_ENV};

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("suite: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("suite/ has no parent directory")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let log = std::env::temp_dir().join(format!("perf-rs-skips-{}.log", std::process::id()));
    std::fs::write(&log, "").map_err(|e| format!("creating {}: {e}", log.display()))?;

    // cargo's stderr ("Running <binary>") and the tests' stdout share one pipe, so each line is
    // read in the order it was written and a test is attributed to its binary.
    let (reader, writer) = std::io::pipe().map_err(|e| format!("pipe: {e}"))?;
    let mut child = {
        let mut cmd = Command::new(&cargo);
        cmd.current_dir(workspace)
            .args(["test", "--no-fail-fast"])
            .args(&args)
            .env(SKIP_LOG_ENV, &log)
            .stdout(writer.try_clone().map_err(|e| format!("pipe: {e}"))?)
            .stderr(writer);
        // What `cargo run` set for this package is not the tests' business.
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("CARGO_PKG_")
                || k.starts_with("CARGO_MANIFEST_")
                || matches!(
                    &*k,
                    "CARGO_CRATE_NAME" | "CARGO_BIN_NAME" | "CARGO_PRIMARY_PACKAGE"
                )
            {
                cmd.env_remove(&*k);
            }
        }
        cmd.spawn()
            .map_err(|e| format!("running {}: {e}", Path::new(&cargo).display()))?
        // `cmd`, holding the write ends, is dropped here: the read end sees EOF when cargo exits.
    };

    let mut tally = Tally::default();
    let mut out = std::io::stdout().lock();
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("reading cargo's output: {e}")),
        }
        // A closed stdout (`| head`) must not stop cargo: keep reading, stop echoing.
        let _ = out.write_all(&buf).and_then(|()| out.flush());
        tally.line(String::from_utf8_lossy(&buf).trim_end_matches(['\n', '\r']));
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for cargo: {e}"))?;
    let skips = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let summary = tally.summary(&parse_skip_log(&skips));

    let _ = writeln!(out);
    if !status.success() {
        let _ = writeln!(out, "cargo test failed ({status})");
    }
    let _ = writeln!(out, "{summary}");
    Ok(if status.success() && summary.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(status.code().map_or(1, |c| c.clamp(1, 255) as u8))
    })
}
