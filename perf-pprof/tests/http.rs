//! The `/debug/pprof/profile` recipe: the bytes parse as a gzip'd pprof naming the hot function,
//! and `go tool pprof` reads the `http_endpoint` example's endpoint.

use std::hint::black_box;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use prost::Message;
use tests::{require, Skip};

#[inline(never)]
fn http_test_hot(until: Instant) -> u64 {
    let mut x = 1u64;
    while Instant::now() < until {
        for i in 0..10_000u64 {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
    x
}

fn refused(e: &pprof::Error) -> bool {
    matches!(e, pprof::Error::PerfEventParanoid { .. })
}

#[test]
fn profile_gzipped_pprof_names_the_hot_function() {
    let t = std::thread::spawn(|| http_test_hot(Instant::now() + Duration::from_millis(1500)));
    let bytes = match pprof::http::profile_gzipped_pprof(Duration::from_secs(1), 199) {
        Ok(b) => b,
        Err(e) if refused(&e) => {
            let _ = t.join();
            tests::skip(Skip::Privilege, &e.to_string());
            return;
        }
        Err(e) => panic!("{e}"),
    };
    t.join().unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip magic");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_end(&mut raw)
        .unwrap();
    let p = pprof::protos::Profile::decode(&raw[..]).unwrap();
    assert!(!p.sample.is_empty());
    assert!(
        p.string_table.iter().any(|s| s.contains("http_test_hot")),
        "{:?}",
        p.string_table
    );
}

#[test]
fn go_tool_pprof_reads_the_endpoint() {
    require!(
        Command::new("go")
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success()),
        Skip::Environment,
        "no `go` (Debian: golang-go) to run `go tool pprof`"
    );
    let bin = tests::package_example_binary("perf-pprof", "http_endpoint");
    let mut server = Command::new(bin)
        .arg("0")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{first}"))
        .to_owned();
    let tmp = std::env::temp_dir().join(format!("perf-pprof-go-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let out = Command::new("go")
        .args(["tool", "pprof", "-top"])
        .arg(format!("http://{addr}/debug/pprof/profile?seconds=2"))
        // pprof saves what it fetched under $PPROF_TMPDIR; GOCACHE for the tool itself.
        .env("PPROF_TMPDIR", &tmp)
        .env("HOME", &tmp)
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&tmp);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}\n{stderr}");
    if stdout.contains("perf_event_paranoid") || stderr.contains("perf_event_paranoid") {
        tests::skip(Skip::Privilege, &format!("{stdout}{stderr}"));
        return;
    }
    assert!(out.status.success(), "go tool pprof failed: {stderr}");
    assert!(stdout.contains("busy_work"), "{stdout}");
}
