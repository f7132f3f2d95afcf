//! A loopback HTTP receiver for the push tests: minimal HTTP/1.1 on std's `TcpListener`, over TLS
//! (rustls) where asked. It serves one connection at a time, answers each request as the test
//! says and keeps the accepted ones.
//!
//! The integration tests take it as `common::receiver`; `src/push.rs`'s unit tests take this file
//! with `#[path]`, as they push profiles made up in the crate (only the crate can make a
//! `Profile` without sampling). So it uses std and the package's (dev-)dependencies only.

// Each user uses some of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A request the receiver read.
#[derive(Clone, Debug)]
pub struct Request {
    /// Its path, with the query.
    pub path: String,
    /// Its headers, as sent.
    pub headers: Vec<(String, String)>,
    /// Its body, as sent.
    pub body: Vec<u8>,
}

impl Request {
    /// The value of the header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body, decompressed where `Content-Encoding: gzip` says so.
    pub fn content(&self) -> Vec<u8> {
        self.gunzipped()
            .unwrap_or_else(|e| panic!("Content-Encoding: gzip, but the body is not: {e}"))
    }

    fn gunzipped(&self) -> std::io::Result<Vec<u8>> {
        if self.header("content-encoding") != Some("gzip") {
            return Ok(self.body.clone());
        }
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&self.body[..]).read_to_end(&mut raw)?;
        Ok(raw)
    }
}

/// A receiver on 127.0.0.1, serving until dropped.
pub struct Receiver {
    /// The port it listens on.
    pub port: u16,
    /// The accepted (2xx) requests, in the order they came.
    pub got: Arc<Mutex<Vec<Request>>>,
    /// Every request read whole, whatever its answer, in the order they came.
    pub seen: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Plain HTTP on a free port until 120 s pass without a request: request `n` (from 0) is
    /// answered with status `code(n)` and no body.
    pub fn start(code: impl FnMut(usize) -> u16 + Send + 'static) -> Self {
        Self::start_for(Duration::from_secs(120), code)
    }

    /// As [`start`](Self::start), serving until `lifetime` passes without a request.
    pub fn start_for(
        lifetime: Duration,
        mut code: impl FnMut(usize) -> u16 + Send + 'static,
    ) -> Self {
        Self::serve(0, None, lifetime, move |n, _| (code(n), String::new()))
    }

    /// Serves on `port` (0: a free one), over TLS where `tls` is given, until `lifetime` passes
    /// without a connection (counted from the last one, so a client that starts late, e.g. on a
    /// loaded machine, is still served):
    /// request `n` (from 0; those read whole) is answered with `respond(n, request)`, a status and
    /// a body. A body that says it is gzip'd but is not gets 400 without asking `respond`.
    pub fn serve(
        port: u16,
        tls: Option<Arc<rustls::ServerConfig>>,
        lifetime: Duration,
        mut respond: impl FnMut(usize, &Request) -> (u16, String) + Send + 'static,
    ) -> Self {
        Self::serve_with_headers(port, tls, lifetime, move |n, req| {
            let (code, body) = respond(n, req);
            (code, Vec::new(), body)
        })
    }

    /// Plain HTTP on a free port (`lifetime` as for [`serve`](Self::serve)): every request is
    /// answered `302 Found` with `Location: to` (and kept in [`seen`](Self::seen)).
    pub fn redirect(lifetime: Duration, to: String) -> Self {
        Self::serve_with_headers(0, None, lifetime, move |_, _| {
            (
                302,
                vec![("Location".to_owned(), to.clone())],
                String::new(),
            )
        })
    }

    /// As [`serve`](Self::serve), the answer carrying headers too: (status, headers, body).
    pub fn serve_with_headers(
        port: u16,
        tls: Option<Arc<rustls::ServerConfig>>,
        lifetime: Duration,
        mut respond: impl FnMut(usize, &Request) -> (u16, Vec<(String, String)>, String)
            + Send
            + 'static,
    ) -> Self {
        let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (g, sn, st) = (Arc::clone(&got), Arc::clone(&seen), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let mut deadline = Instant::now() + lifetime;
            let mut n = 0;
            while !st.load(Ordering::Relaxed) && Instant::now() < deadline {
                let Ok((sock, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                deadline = Instant::now() + lifetime;
                sock.set_nonblocking(false).unwrap();
                sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut answer = |req: &Request| match req.gunzipped() {
                    Ok(_) => {
                        n += 1;
                        respond(n - 1, req)
                    }
                    Err(e) => (
                        400,
                        Vec::new(),
                        format!("Content-Encoding: gzip, but the body is not: {e}"),
                    ),
                };
                match &tls {
                    Some(cfg) => {
                        let conn = rustls::ServerConnection::new(Arc::clone(cfg)).unwrap();
                        handle(
                            &mut rustls::StreamOwned::new(conn, sock),
                            &mut answer,
                            &g,
                            &sn,
                        );
                    }
                    None => handle(&mut { sock }, &mut answer, &g, &sn),
                }
            }
        });
        Self {
            port,
            got,
            seen,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request from `s` and answers it as `answer` says, keeping it in `got` if accepted;
/// nothing where the client went away first.
fn handle(
    s: &mut (impl Read + Write),
    answer: &mut impl FnMut(&Request) -> (u16, Vec<(String, String)>, String),
    got: &Mutex<Vec<Request>>,
    seen: &Mutex<Vec<Request>>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut more = |buf: &mut Vec<u8>| match s.read(&mut chunk) {
        Ok(k) if k > 0 => {
            buf.extend_from_slice(&chunk[..k]);
            true
        }
        _ => false,
    };
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if !more(&mut buf) {
            return;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
    let headers: Vec<(String, String)> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(a, b)| (a.trim().to_owned(), b.trim().to_owned()))
        .collect();
    let mut req = Request {
        path,
        headers,
        body: Vec::new(),
    };
    let len: usize = req
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() - head_end < len {
        if !more(&mut buf) {
            return;
        }
    }
    req.body = buf.split_off(head_end);
    let (code, extra, text) = answer(&req);
    // Kept before answering: the client may look as soon as it has the answer.
    seen.lock().unwrap().push(req.clone());
    if (200..300).contains(&code) {
        got.lock().unwrap().push(req);
    }
    let extra: String = extra.iter().map(|(n, v)| format!("{n}: {v}\r\n")).collect();
    let _ = write!(
        s,
        "HTTP/1.1 {code} X\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = s.flush();
}
