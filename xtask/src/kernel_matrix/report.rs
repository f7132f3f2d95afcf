//! Reading a guest's serial console log back: the `@@matrix` markers the init script prints, and the
//! libtest output of each test binary between them.

use std::collections::BTreeSet;

/// The marker every machine-parsable line of the init script starts with.
pub const MARKER: &str = "@@matrix";

/// What one test binary did inside the guest.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Binary {
    /// The test binary's name (its cargo target name).
    pub name: String,
    /// Its exit status, or `None` when the log ends before it finished (hang, crash, timeout).
    pub rc: Option<i32>,
    /// Tests that passed and printed no `skipped:` line.
    pub passed: usize,
    /// Tests that failed (a binary that died without a summary line counts as one failure).
    pub failed: usize,
    /// Tests that passed after printing `skipped: <reason>`.
    pub skipped: usize,
    /// libtest's `test result:` line, if it printed one.
    pub summary: Option<String>,
    /// The names of the failed tests.
    pub failures: Vec<String>,
    /// For a failed binary: its output from libtest's `failures:` section on (or its last lines when it
    /// printed none), to show in the report.
    pub detail: Vec<String>,
}

/// Everything read from one kernel's log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Run {
    /// `uname -r` inside the guest.
    pub release: Option<String>,
    /// Per test binary, in the order they ran.
    pub binaries: Vec<Binary>,
    /// Whether the init script reached its end.
    pub done: bool,
}

impl Run {
    /// Tests passed, failed, skipped, summed over the binaries.
    pub fn totals(&self) -> (usize, usize, usize) {
        self.binaries.iter().fold((0, 0, 0), |(p, f, s), b| {
            (p + b.passed, f + b.failed, s + b.skipped)
        })
    }

    /// Like [`Run::totals`], over the binaries whose names start with `prefix` (the hardware tests).
    pub fn hw_totals(&self, prefix: &str) -> (usize, usize, usize) {
        self.binaries
            .iter()
            .filter(|b| b.name.starts_with(prefix))
            .fold((0, 0, 0), |(p, f, s), b| {
                (p + b.passed, f + b.failed, s + b.skipped)
            })
    }
}

/// Strips the serial console's carriage returns and terminal escapes from a line.
pub fn clean(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {}
            '\u{1b}' => {
                // CSI (ESC [ ... final byte) or a two-character escape (ESC c: reset).
                if chars.next() == Some('[') {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// Parses a whole serial console log.
pub fn parse(log: &str) -> Run {
    let mut run = Run::default();
    let mut current: Option<(Binary, Vec<String>)> = None;
    for raw in log.lines() {
        let line = clean(raw);
        if let Some(pos) = line.find(MARKER) {
            let rest = line[pos + MARKER.len()..].trim();
            let (key, value) = rest.split_once(' ').unwrap_or((rest, ""));
            match key {
                "kernel" => run.release = Some(value.trim().to_string()),
                "begin" => {
                    if let Some((b, lines)) = current.take() {
                        run.binaries.push(finish(b, &lines));
                    }
                    let bin = Binary {
                        name: value.trim().to_string(),
                        ..Binary::default()
                    };
                    current = Some((bin, Vec::new()));
                }
                "end" => {
                    if let Some((mut b, lines)) = current.take() {
                        b.rc = value
                            .split_whitespace()
                            .find_map(|w| w.strip_prefix("rc="))
                            .and_then(|v| v.parse().ok());
                        run.binaries.push(finish(b, &lines));
                    }
                }
                "done" => run.done = true,
                _ => {}
            }
            continue;
        }
        if let Some((_, lines)) = current.as_mut() {
            lines.push(line);
        }
    }
    if let Some((b, lines)) = current.take() {
        run.binaries.push(finish(b, &lines));
    }
    run
}

/// Counts one binary's libtest output (run with `--test-threads=1 --show-output`).
fn finish(mut bin: Binary, lines: &[String]) -> Binary {
    let mut ok = BTreeSet::new();
    let mut failed = BTreeSet::new();
    let mut skipping = BTreeSet::new();
    // The test whose captured output (`---- NAME stdout ----`) is being read.
    let mut section: Option<String> = None;
    let mut in_failure_list = false;
    for line in lines {
        if let Some(name) = line
            .strip_prefix("---- ")
            .and_then(|l| l.strip_suffix(" stdout ----"))
        {
            section = Some(name.to_string());
            in_failure_list = false;
            continue;
        }
        if line == "successes:" || line == "failures:" {
            section = None;
            in_failure_list = line == "failures:";
            continue;
        }
        // libtest's closing list of failed tests, one per line, indented by 4 spaces: the reliable source
        // of their names when a test's raw output broke its `test NAME ... FAILED` line.
        if in_failure_list && section.is_none() {
            if let Some(name) = line.strip_prefix("    ") {
                if !name.is_empty() && !name.starts_with(' ') {
                    failed.insert(name.to_string());
                }
                continue;
            }
        }
        if let Some(rest) = line.strip_prefix("test ") {
            if let Some((name, outcome)) = rest.rsplit_once(" ... ") {
                match outcome.trim() {
                    "ok" => {
                        ok.insert(name.to_string());
                    }
                    "FAILED" => {
                        failed.insert(name.to_string());
                    }
                    _ => {}
                }
                continue;
            }
            if rest.starts_with("result:") {
                bin.summary = Some(line.clone());
                continue;
            }
        }
        if line.trim_start().starts_with("skipped:") {
            if let Some(name) = &section {
                skipping.insert(name.clone());
            }
        }
    }
    bin.skipped = skipping.difference(&failed).count();
    // libtest's summary is authoritative: a test's own raw output (a child process writing to the console)
    // can break its `test NAME ... ok` line.
    let (passed, nfailed) = bin
        .summary
        .as_deref()
        .and_then(summary_counts)
        .unwrap_or((ok.len(), failed.len()));
    bin.skipped = bin.skipped.min(passed);
    bin.passed = passed - bin.skipped;
    bin.failed = nfailed;
    bin.failures = failed.into_iter().collect();
    // A binary that crashed, hung or exited non-zero without naming a failed test still failed.
    if bin.failed == 0 && (bin.rc != Some(0) || bin.summary.is_none()) {
        bin.failed = 1;
        bin.failures.push(match bin.rc {
            Some(rc) => format!("(exit status {rc}, no failed test named)"),
            None => "(did not finish)".to_string(),
        });
    }
    if bin.failed > 0 {
        let from = lines
            .iter()
            .position(|l| l == "failures:")
            .unwrap_or(lines.len().saturating_sub(30));
        bin.detail = lines[from..].to_vec();
    }
    bin
}

/// `(passed, failed)` from `test result: ok. 3 passed; 0 failed; 0 ignored; ...`.
fn summary_counts(summary: &str) -> Option<(usize, usize)> {
    let count = |what: &str| {
        summary.split(';').find_map(|part| {
            let part = part.rsplit('.').next().unwrap_or(part).trim();
            part.strip_suffix(what)?.trim().parse::<usize>().ok()
        })
    };
    Some((count("passed")?, count("failed")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\u{1b}[?7l[    0.5] boot noise\r
@@matrix kernel 6.1.0-50-cloud-amd64\r
@@matrix begin counting\r
\r
running 3 tests\r
test a ... ok\r
test b ... ok\r
test c ... child noise\r
FAILED\r
\r
successes:\r
\r
---- b stdout ----\r
skipped: no hardware PMU\r
\r
\r
successes:\r
    a\r
    b\r
\r
failures:\r
\r
---- c stdout ----\r
thread 'c' panicked\r
\r
failures:\r
    c\r
\r
test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.10s\r
\r
@@matrix end counting rc=101 summary=test result: FAILED. 2 passed; 1 failed\r
@@matrix begin sampling\r
running 1 test\r
test s ... ";

    #[test]
    fn counts_and_hang() {
        let run = parse(LOG);
        assert_eq!(run.release.as_deref(), Some("6.1.0-50-cloud-amd64"));
        assert!(!run.done);
        assert_eq!(run.binaries.len(), 2);
        let c = &run.binaries[0];
        assert_eq!((c.passed, c.failed, c.skipped, c.rc), (1, 1, 1, Some(101)));
        assert_eq!(c.failures, vec!["c".to_string()]);
        assert_eq!(
            c.detail.get(2).map(String::as_str),
            Some("---- c stdout ----")
        );
        assert!(c
            .summary
            .as_deref()
            .unwrap()
            .starts_with("test result: FAILED. 2 passed"));
        let s = &run.binaries[1];
        assert_eq!((s.passed, s.failed, s.rc), (0, 1, None));
        assert_eq!(run.totals(), (1, 2, 1));
        assert_eq!(run.hw_totals("count"), (1, 1, 1));
        assert_eq!(run.hw_totals("hw_"), (0, 0, 0));
    }
}
