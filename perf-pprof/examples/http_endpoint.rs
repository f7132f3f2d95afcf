//! Serves this process's CPU profile as Go services do, at
//! `http://127.0.0.1:PORT/debug/pprof/profile?seconds=N`, with std's `TcpListener` only:
//!
//! ```sh
//! cargo run -p perf-pprof --example http_endpoint -- 6060 &
//! go tool pprof -top 'http://127.0.0.1:6060/debug/pprof/profile?seconds=5'
//! ```
//!
//! A port of 0 takes a free one; the first line printed says which. A thread keeps
//! `busy_work` hot so that the profile has something to show.

use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::time::Duration;

#[inline(never)]
fn busy_work() -> u64 {
    let mut x = 1u64;
    for i in 0..1_000_000u64 {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    x
}

fn respond(mut stream: TcpStream) -> std::io::Result<()> {
    let mut line = String::new();
    let mut reader = BufReader::new(stream.try_clone()?);
    reader.read_line(&mut line)?;
    // The headers are not needed; read them so the client is not reset mid-request.
    let mut header = String::new();
    while reader.read_line(&mut header)? > 2 {
        header.clear();
    }
    let target = line.split_whitespace().nth(1).unwrap_or("/");
    let (status, kind, body) = match pprof::http::profile_seconds(target) {
        Some(seconds) => match pprof::http::profile_gzipped_pprof(
            Duration::from_secs(seconds),
            pprof::http::DEFAULT_FREQUENCY,
        ) {
            Ok(body) => ("200 OK", "application/octet-stream", body),
            Err(e) => (
                "500 Internal Server Error",
                "text/plain",
                format!("{e}\n").into_bytes(),
            ),
        },
        None => (
            "404 Not Found",
            "text/plain",
            b"try /debug/pprof/profile?seconds=5\n".to_vec(),
        ),
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Content-Disposition: attachment; filename=\"profile\"\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(&body)
}

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .map(|p| p.parse().expect("usage: http_endpoint [PORT]"))
        .unwrap_or(6060);
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))?;
    println!("listening on {}", listener.local_addr()?);
    std::thread::spawn(|| loop {
        black_box(busy_work());
    });
    for stream in listener.incoming() {
        let stream = stream?;
        std::thread::spawn(move || {
            if let Err(e) = respond(stream) {
                eprintln!("http_endpoint: {e}");
            }
        });
    }
    Ok(())
}
