//! Sums what `cargo test` printed and what the tests logged as skipped.
//!
//! cargo prints `Running <source> (<path of the test binary>)` or `Doc-tests <crate>` before each test
//! binary; libtest then prints `test <name> ... ok|FAILED|ignored` per test and one
//! `test result: ok. P passed; F failed; I ignored; M measured; X filtered out; ...` per binary.
//! Tests that decide at run time not to run still end `ok`: they are found in the skip log instead
//! (see [`parse_skip_log`]) and moved from "passed" to "skipped".

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The environment variable that names the skip log. `tests::skip` (tests/src/lib.rs) and the
/// skip helpers of perf-core's kernel tests append one line per skip to that file:
/// `<test binary file name> TAB <test name> TAB whole|part TAB <reason>`.
pub const SKIP_LOG_ENV: &str = "PERF_TEST_SKIP_LOG";

/// A test's outcome as libtest printed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Ok,
    Failed,
    Ignored,
}

/// One line of the skip log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip {
    /// The file name of the test binary (`errors_open-5176232caa621c55`).
    pub binary: String,
    /// The test's name as libtest prints it (the name of the thread the test ran on); empty when the
    /// skip came from a thread that is not a test's.
    pub test: String,
    /// Whether the whole test skipped (`whole`), or only a part of a test that went on (`part`).
    pub whole: bool,
    /// Why.
    pub reason: String,
}

/// Parses the skip log; lines that are not `binary TAB test TAB whole|part TAB reason` are ignored
/// (a test killed mid-write leaves at worst one such line).
pub fn parse_skip_log(text: &str) -> Vec<Skip> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(4, '\t');
            let binary = f.next()?;
            let test = f.next()?;
            let whole = match f.next()? {
                "whole" => true,
                "part" => false,
                _ => return None,
            };
            let reason = f.next()?.trim();
            Some(Skip {
                binary: binary.to_owned(),
                test: test.to_owned(),
                whole,
                reason: reason.to_owned(),
            })
        })
        .collect()
}

/// What the lines of `cargo test`'s output add up to so far.
#[derive(Debug, Default)]
pub struct Tally {
    /// The binary now running: its file name, or `Doc-tests <crate>`.
    current: String,
    passed: u64,
    failed: u64,
    ignored: u64,
    /// How many `test result:` lines were seen.
    results: u64,
    outcomes: BTreeMap<(String, String), Outcome>,
}

impl Tally {
    /// Takes one line of `cargo test`'s combined stdout and stderr.
    pub fn line(&mut self, line: &str) {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Running ") {
            // `Running tests/errors_open.rs (target/debug/deps/errors_open-5176232caa621c55)`
            if let Some(path) = rest
                .strip_suffix(')')
                .and_then(|r| r.rsplit_once(" ("))
                .map(|(_, p)| p)
            {
                self.current = path.rsplit('/').next().unwrap_or(path).to_owned();
            }
        } else if t.starts_with("Doc-tests ") {
            self.current = t.to_owned();
        } else if let Some(rest) = t.strip_prefix("test result: ") {
            self.results += 1;
            for part in rest.split(';') {
                // `ok. 11 passed`, ` 0 failed`, ` 1 ignored`, ...
                let words: Vec<&str> = part.split_whitespace().collect();
                let (n, what) = match words.as_slice() {
                    [.., n, what] => (n.parse::<u64>(), *what),
                    _ => continue,
                };
                let Ok(n) = n else { continue };
                match what {
                    "passed" => self.passed += n,
                    "failed" => self.failed += n,
                    "ignored" => self.ignored += n,
                    _ => {}
                }
            }
        } else if let Some((name, outcome)) =
            t.strip_prefix("test ").and_then(|r| r.rsplit_once(" ... "))
        {
            let outcome = match outcome {
                "ok" => Outcome::Ok,
                "FAILED" => Outcome::Failed,
                o if o.starts_with("ignored") => Outcome::Ignored,
                _ => return,
            };
            let name = name.strip_suffix(" - should panic").unwrap_or(name);
            self.outcomes
                .insert((self.current.clone(), name.to_owned()), outcome);
        }
    }

    /// The totals, with the skipped tests of `skips` taken out of "passed".
    ///
    /// A test counts as skipped once however often it logged a whole skip, and not at all when
    /// libtest says it failed (it then counts as failed only). Skips from no test's thread count once
    /// per binary and reason.
    pub fn summary(&self, skips: &[Skip]) -> Summary {
        let mut skipped_tests = BTreeSet::new();
        let mut reasons: BTreeMap<&str, BTreeSet<(&str, &str)>> = BTreeMap::new();
        let mut parts: BTreeMap<&str, BTreeSet<(&str, &str)>> = BTreeMap::new();
        for s in skips {
            let key = (s.binary.as_str(), s.test.as_str());
            let outcome = self.outcomes.get(&(s.binary.clone(), s.test.clone()));
            if outcome == Some(&Outcome::Failed) {
                continue;
            }
            if s.whole {
                let key = if s.test.is_empty() {
                    (s.binary.as_str(), s.reason.as_str())
                } else {
                    key
                };
                skipped_tests.insert(key);
                reasons.entry(&s.reason).or_default().insert(key);
            } else {
                parts.entry(&s.reason).or_default().insert(key);
            }
        }
        let count = |m: BTreeMap<&str, BTreeSet<(&str, &str)>>| {
            let mut v: Vec<(String, u64)> = m
                .into_iter()
                .map(|(r, tests)| (r.to_owned(), tests.len() as u64))
                .collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            v
        };
        let skipped = (skipped_tests.len() as u64).min(self.passed);
        Summary {
            passed: self.passed - skipped,
            failed: self.failed,
            skipped,
            ignored: self.ignored,
            binaries: self.results,
            reasons: count(reasons),
            parts: count(parts),
        }
    }
}

/// The totals of a run.
#[derive(Debug, PartialEq, Eq)]
pub struct Summary {
    /// Tests that ran and passed (skipped ones excluded).
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
    /// Tests that decided at run time not to run.
    pub skipped: u64,
    /// `#[ignore]`d tests (not run unless asked for).
    pub ignored: u64,
    /// How many test binaries (doc tests included) reported a result.
    pub binaries: u64,
    /// Each reason a test skipped for, with how many tests skipped for it, most first.
    pub reasons: Vec<(String, u64)>,
    /// The same for parts of tests that ran the rest.
    pub parts: Vec<(String, u64)>,
}

impl fmt::Display for Summary {
    /// The reasons, then the closing line `N passed, N failed, N skipped` (no newline after it).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.reasons.is_empty() {
            writeln!(f, "skipped tests, by reason:")?;
            for (reason, n) in &self.reasons {
                writeln!(f, "{n:>6}  {reason}")?;
            }
        }
        if !self.parts.is_empty() {
            writeln!(
                f,
                "parts skipped in tests that ran (not counted as skipped):"
            )?;
            for (reason, n) in &self.parts {
                writeln!(f, "{n:>6}  {reason}")?;
            }
        }
        if self.ignored > 0 {
            writeln!(
                f,
                "{} ignored (#[ignore]: run on request with `-- --ignored`)",
                self.ignored
            )?;
        }
        let binaries = if self.binaries == 1 {
            "binary"
        } else {
            "binaries"
        };
        writeln!(f, "{} test {binaries} reported", self.binaries)?;
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "\
   Compiling tests v0.1.0 (/w/tests)
     Running unittests src/lib.rs (target/debug/deps/perf_core-0a1b)

running 2 tests
test ring::wraps ... ok
test ring::empty ... ok

test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s

     Running tests/hw_count.rs (/t/debug/deps/hw_count-77)

running 3 tests
test counts_cycles ... ok
test counts_instructions ... ok
test panics_on_nothing - should panic ... ok

test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

     Running tests/stat_example.rs (/t/debug/deps/stat_example-99)

running 3 tests
test permission_limits_are_explained ... FAILED
test soak ... ignored, takes a minute
test plain ... ok

test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 1.00s

   Doc-tests perf_core

running 1 test
test perf-core/src/lib.rs - (line 5) ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.50s
";

    fn tally(output: &str) -> Tally {
        let mut t = Tally::default();
        output.lines().for_each(|l| t.line(l));
        t
    }

    #[test]
    fn sums_every_result_line_doc_tests_included() {
        let s = tally(OUTPUT).summary(&[]);
        assert_eq!((s.passed, s.failed, s.skipped, s.ignored), (7, 1, 0, 1));
        assert_eq!(s.binaries, 4);
        assert_eq!(
            s.to_string().lines().last(),
            Some("7 passed, 1 failed, 0 skipped")
        );
    }

    #[test]
    fn a_skipped_test_counts_as_skipped_not_passed() {
        let log = "hw_count-77\tcounts_cycles\twhole\tno hardware PMU here\n\
                   hw_count-77\tcounts_instructions\twhole\tno hardware PMU here\n\
                   hw_count-77\tcounts_instructions\twhole\tno hardware PMU here\n\
                   hw_count-77\tpanics_on_nothing\twhole\tneeds root\n";
        let s = tally(OUTPUT).summary(&parse_skip_log(log));
        assert_eq!((s.passed, s.failed, s.skipped), (4, 1, 3));
        assert_eq!(
            s.reasons,
            vec![
                ("no hardware PMU here".to_owned(), 2),
                ("needs root".to_owned(), 1)
            ]
        );
        let text = s.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "skipped tests, by reason:");
        assert_eq!(lines[1], "     2  no hardware PMU here");
        assert_eq!(lines[2], "     1  needs root");
        assert_eq!(lines.last(), Some(&"4 passed, 1 failed, 3 skipped"));
    }

    #[test]
    fn same_test_name_in_two_binaries_is_told_apart() {
        // `permission_limits_are_explained` failed in stat_example; a skip of the test of the same
        // name in another binary still counts, the failed one's does not.
        let log = "stat_example-99\tpermission_limits_are_explained\twhole\tno setpriv\n\
                   hw_count-77\tcounts_cycles\twhole\tno setpriv\n";
        let s = tally(OUTPUT).summary(&parse_skip_log(log));
        assert_eq!((s.passed, s.failed, s.skipped), (6, 1, 1));
    }

    #[test]
    fn a_skipped_part_is_listed_but_the_test_passed() {
        let log = "perf_core-0a1b\tring::wraps\tpart\tno cgroup\n";
        let s = tally(OUTPUT).summary(&parse_skip_log(log));
        assert_eq!((s.passed, s.skipped), (7, 0));
        assert_eq!(s.parts, vec![("no cgroup".to_owned(), 1)]);
        assert!(s.to_string().contains("parts skipped"));
    }

    #[test]
    fn skips_off_a_test_thread_count_once_per_binary_and_reason() {
        let log = "hw_count-77\t\twhole\ta\nhw_count-77\t\twhole\ta\nhw_count-77\t\twhole\tb\n";
        let s = tally(OUTPUT).summary(&parse_skip_log(log));
        assert_eq!(s.skipped, 2);
    }

    #[test]
    fn malformed_log_lines_are_ignored() {
        let skips = parse_skip_log("x\ty\tmaybe\tz\nhalf a line\nb\tt\twhole\twhy: a\tb\n");
        assert_eq!(
            skips,
            vec![Skip {
                binary: "b".into(),
                test: "t".into(),
                whole: true,
                reason: "why: a\tb".into()
            }]
        );
    }

    #[test]
    fn no_result_line_gives_zeros() {
        let s = tally("error: could not compile `tests`\n").summary(&[]);
        assert_eq!((s.passed, s.failed, s.skipped, s.binaries), (0, 0, 0, 0));
    }
}
