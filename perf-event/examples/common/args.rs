//! Command-line pieces shared by the `stat` and `record` examples, on `lexopt` (short clusters
//! `-ag`, attached values `-x,` `-F99` `--pid=1`, `--` ending the options, the command taken
//! verbatim after its name). Each example keeps its own option table; the values they share are
//! parsed here.

use std::ffi::OsString;

pub use lexopt::{Arg, Parser};

/// The value of the option just read, as text; `Err` is a usage message.
pub fn value(p: &mut Parser, what: &str) -> Result<String, String> {
    let v = p.value().map_err(|e| format!("{e} ({what})"))?;
    v.into_string()
        .map_err(|v| format!("the value {v:?} is not valid UTF-8 ({what})"))
}

/// The command: `first` (the first argument that is not an option) and every argument after it,
/// verbatim (options included: they are the command's).
pub fn command(p: &mut Parser, first: OsString) -> Vec<OsString> {
    let mut cmd = vec![first];
    if let Ok(rest) = p.raw_args() {
        cmd.extend(rest);
    }
    cmd
}

/// A usage message from a lexopt error (an unknown option, a missing value, `--flag=value`).
pub fn usage(e: lexopt::Error) -> String {
    e.to_string()
}

/// `PID[,PID...]`: positive process ids that fit a `pid_t`.
pub fn pids(s: &str) -> Result<Vec<u32>, String> {
    s.split(',')
        .map(|p| match p.trim().parse::<u32>() {
            Ok(n) if n > 0 && n <= i32::MAX as u32 => Ok(n),
            _ => Err(format!("'{p}' is not a process id (a positive integer)")),
        })
        .collect()
}
