//! The `perf-profile` command at its edges, as an attacker or an operator meets them (issue 33): links
//! planted by another user where it writes its outputs, the signals that end a capture (SIGTERM,
//! SIGHUP, SIGINT), out-of-range numbers on its command line, and credentials over cleartext http.
//!
//! The example is built before any clock starts (`common::example`).

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{build_c, command, folded_file, profile, require_cc, require_sampling, scratch, text};
use tests::{require, Skip};

/// Whether `setpriv` can run a command as `nobody` here (root, util-linux).
fn can_be_nobody() -> bool {
    tests::is_root()
        && Command::new("setpriv")
            .args([
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
                "true",
            ])
            .status()
            .is_ok_and(|s| s.success())
}

/// Runs `perl -e script` as `nobody` (perl is part of every Debian system; one process makes all
/// the links, so the pids it predicts stay free).
fn as_nobody(script: &str) {
    let o = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .args(["perl", "-e", script])
        .output()
        .unwrap();
    assert!(o.status.success(), "perl as nobody: {}", text(&o.stderr));
}

/// The last pid the kernel gave out in this pid namespace.
fn last_pid() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A sticky, world-writable folder (as /tmp) in `dir`, and a root-owned file beside it that
/// nobody may write: (shared folder, victim).
fn shared_and_victim(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let shared = dir.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    (shared, victim)
}

const PIDS_AHEAD: u32 = 3000;

#[test]
fn links_planted_at_the_probe_and_temporary_names_change_no_file_outside_o() {
    require_sampling!();
    require_cc!();
    require!(
        tests::is_root(),
        Skip::Privilege,
        "playing the user nobody next to a root profiler needs root"
    );
    require!(
        can_be_nobody(),
        Skip::Environment,
        "setpriv (util-linux), perl or the user nobody is missing"
    );
    let dir = scratch("links");
    let calls = build_c(&dir, "calls");
    let bin = command();
    let (shared, victim) = shared_and_victim(&dir);
    let out = shared.join("out.folded");
    let cut = shared.join("cut-{n}.folded");
    // The attacker links every name the next pids would give the probe and temporary files, and
    // the outputs themselves, to the victim.
    let next = last_pid() + 1;
    let names = [
        ".profile-probe-",
        ".out.folded.tmp-",
        ".cut-0.folded.tmp-",
        ".cut-1.folded.tmp-",
    ];
    let mut script = format!(
        "for $p ({next}..{}) {{ for $n (qw({})) {{ symlink('{v}', '{s}/' . $n . $p) or die $! }} }} \
         symlink('{v}', '{s}/out.folded') or die $!; symlink('{v}', '{s}/cut-0.folded') or die $!;",
        next + PIDS_AHEAD,
        names.join(" "),
        v = victim.display(),
        s = shared.display(),
    );
    script.push_str("1;");
    as_nobody(&script);
    let o = Command::new(&bin)
        .args(["-F", "499", "--every", "0.3", "-o"])
        .arg(&out)
        .arg("-o")
        .arg(&cut)
        .arg("--")
        .arg(&calls)
        .arg("0.5")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = o.id();
    let o = o.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(
        (next..=next + PIDS_AHEAD).contains(&pid),
        "the profiler's pid {pid} is outside the {next}..{} the attacker predicted: run again",
        next + PIDS_AHEAD
    );
    println!("{err}");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\n",
        "the root-owned file outside -o was overwritten through a planted link"
    );
    assert!(o.status.success(), "{err}");
    // The outputs are regular files of ours (a link planted at their names was replaced), and
    // the intervals hold the samples (the file without `{n}` holds the last one, maybe empty).
    let mut samples = 0;
    for e in std::fs::read_dir(&shared).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "out.folded" || name.starts_with("cut-") {
            let m = e.path().symlink_metadata().unwrap();
            assert!(m.file_type().is_file() && m.uid() == 0, "{name}: {m:?}");
            if name.starts_with("cut-") {
                samples += folded_file(&e.path()).values().sum::<u64>();
            }
        }
    }
    assert!(samples > 0, "{err}");
    // Nothing of ours is left behind in the shared folder but the outputs.
    let ours: Vec<String> = std::fs::read_dir(&shared)
        .unwrap()
        .flatten()
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == 0))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("cut-") && n != "out.folded")
        .collect();
    assert!(ours.is_empty(), "left behind: {ours:?}");
}

use std::os::unix::fs::MetadataExt;

/// Starts the command with `args`, waits for its "sampling" line, lets it sample `after`, sends it
/// `signal`: its exit status, stderr, and the seconds from the signal to its exit.
fn signalled(
    args: &[&str],
    signal: &str,
    after: Duration,
) -> (std::process::ExitStatus, String, f64) {
    let bin = command();
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    // The capture has started once it says what it samples.
    let started = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if l.contains("sampling") || l.contains("off-CPU by") => break,
            Ok(_) => {}
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "no sampling line within {:.0} s: {}",
                    started.elapsed().as_secs_f64(),
                    reader.join().unwrap()
                );
            }
        }
    }
    std::thread::sleep(after);
    let sent = Instant::now();
    let k = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(k.success());
    // Bounded: a profiler that ignored the signal is killed after 20 s and the test fails.
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if sent.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = sent.elapsed().as_secs_f64();
    (status, reader.join().unwrap(), took)
}

#[test]
fn sigterm_sighup_and_sigint_end_a_capture_promptly_with_every_output_written() {
    require_sampling!();
    require_cc!();
    let dir = scratch("signals");
    let calls = build_c(&dir, "calls");
    for signal in ["TERM", "HUP", "INT"] {
        let folded = dir.join(format!("{signal}.folded"));
        let pprof = dir.join(format!("{signal}.pb.gz"));
        // The command would run for a minute; the signal goes to the profiler alone (as systemd's
        // and docker's stop do to the main process).
        let (status, err, took) = signalled(
            &[
                "-F",
                "499",
                "--symbolize",
                "none",
                "-o",
                folded.to_str().unwrap(),
                "-o",
                pprof.to_str().unwrap(),
                "--",
                calls.to_str().unwrap(),
                "60",
            ],
            signal,
            Duration::from_millis(700),
        );
        println!("SIG{signal}: exit {status} {took:.2} s after the signal\n{err}");
        assert!(status.success(), "SIG{signal}: {status}\n{err}");
        // Well under a second on an idle machine (printed above); the bound allows a loaded one
        // and still tells an ending by the signal from waiting for the command (60 s).
        assert!(
            took < tests::PROMPT_SECS,
            "SIG{signal}: {took:.2} s to end the capture\n{err}"
        );
        let stacks = folded_file(&folded);
        let samples: u64 = stacks.values().sum();
        assert!(samples > 50, "SIG{signal}: {samples} samples\n{err}");
        assert!(std::fs::metadata(&pprof).unwrap().len() > 0);
        assert!(err.contains(&format!("wrote {}", pprof.display())), "{err}");
    }
}

#[test]
fn durations_and_numbers_out_of_range_are_refused_with_exit_2_never_a_panic() {
    let push = "http://127.0.0.1:9/ingest";
    let bad: &[(&str, &[&str])] = &[
        ("-d", &["1e20", "inf", "NaN", "-1", "0", "1e-300", "1e300"]),
        (
            "--every",
            &[
                "1e20",
                "inf",
                "nan",
                "-0.5",
                "0",
                "1e-300",
                "18446744073709551616",
            ],
        ),
        ("--retry-max", &["1e20", "inf", "NaN", "-1", "0", "1e-300"]),
        ("-F", &["0", "-1", "1e3", "18446744073709551615", "100001"]),
        ("--queue-bytes", &["99999999999999999999", "-1", "0"]),
        ("-g", &["dwarf,0", "dwarf,65536", "dwarf,4294967296"]),
    ];
    for (flag, values) in bad {
        for v in *values {
            let o = profile(&[
                flag,
                v,
                "--push",
                push,
                "-o",
                "/dev/null/x.folded",
                "--",
                "true",
            ]);
            let err = text(&o.stderr);
            assert!(!err.contains("panicked"), "{flag} {v}: {err}");
            assert_eq!(o.status.code(), Some(2), "{flag} {v}: {err}");
            let first = err.lines().next().unwrap_or_default();
            assert!(
                first.starts_with(&format!("profile: {flag} {v}")),
                "{flag} {v}: the error names the flag and value: {err}"
            );
        }
    }
}

#[test]
fn credentials_are_refused_over_cleartext_http_to_a_remote_host_unless_allowed() {
    let dir = scratch("cleartext");
    let out = dir.join("x.folded");
    // 0.0.0.0 is no loopback address (it stands in for a remote host without leaving the machine).
    let o = Command::new(command())
        .args([
            "--push",
            "http://0.0.0.0:9/ingest",
            "-o",
            out.to_str().unwrap(),
            "--",
            "true",
        ])
        .env("PERF_PROFILE_PUSH_TOKEN", "tok-s3cret")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = text(&o.stderr);
    println!("{err}");
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("https://") && err.contains("--allow-insecure-http"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
}

#[test]
fn allow_insecure_http_sends_credentials_in_cleartext_with_a_warning() {
    require_sampling!();
    let dir = scratch("insecure");
    let out = dir.join("x.folded");
    // Built before the receiver's clock starts.
    let bin = command();
    let rx = common::receiver::Receiver::start(|_| 200);
    let o = Command::new(bin)
        .args(["--allow-insecure-http", "--push"])
        .arg(format!("http://0.0.0.0:{}/ingest", rx.port))
        .args(["-o", out.to_str().unwrap(), "--", "true"])
        .env("PERF_PROFILE_PUSH_TOKEN", "tok-s3cret")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = text(&o.stderr);
    println!("{err}");
    assert!(o.status.success(), "{err}");
    assert!(
        err.lines()
            .any(|l| l.contains("warning") && l.contains("cleartext") && l.contains("0.0.0.0")),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
    let got = rx.got.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "{err}");
    assert_eq!(got[0].header("authorization"), Some("Bearer tok-s3cret"));
}

#[test]
fn sigterm_in_continuous_mode_writes_and_pushes_the_last_interval() {
    require_sampling!();
    require_cc!();
    let dir = scratch("sigterm-every");
    let calls = build_c(&dir, "calls");
    let rx = common::receiver::Receiver::start(|_| 200);
    let url = format!("http://127.0.0.1:{}/v1development/profiles", rx.port);
    let cuts = dir.join("cut-{n}.folded");
    let (status, err, took) = signalled(
        &[
            "-F",
            "499",
            "--every",
            "0.3",
            "--push",
            &url,
            "-o",
            cuts.to_str().unwrap(),
            "--",
            calls.to_str().unwrap(),
            "60",
        ],
        "TERM",
        Duration::from_millis(1000),
    );
    println!("exit {status} {took:.2} s after the signal\n{err}");
    assert!(status.success(), "{err}");
    assert!(took < 1.0, "{took:.2} s to end the capture and push\n{err}");
    let total: u64 = err
        .lines()
        .find_map(|l| {
            l.strip_prefix("profile: ")?
                .split(" samples in total")
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no total in:\n{err}"));
    let mut written = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("cut-") {
            written += folded_file(&e.path()).values().sum::<u64>();
        }
    }
    assert!(total > 50, "{err}");
    assert_eq!(
        written, total,
        "the interval files hold every sample:\n{err}"
    );
    let push = err
        .lines()
        .find(|l| l.starts_with("profile: push: sent"))
        .unwrap_or_else(|| panic!("no push summary in:\n{err}"));
    assert!(
        push.contains(&format!("requests with {total} samples")),
        "every sample pushed: {push}"
    );
    let sent: u64 = push["profile: push: sent ".len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{push}"));
    assert_eq!(rx.got.lock().unwrap().len() as u64, sent, "{push}");
}
