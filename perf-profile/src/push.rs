//! Pushing profiles to a profile store over HTTP(S) (feature `push`): OTLP/HTTP or Pyroscope's
//! ingest API, from a sender thread with retries and a bounded queue, so that sampling never waits
//! on the network and nothing is lost silently.
//!
//! The URL's path says the protocol:
//!
//! - `…/v1development/profiles`: OTLP/HTTP, a `POST` of an `ExportProfilesServiceRequest` in
//!   protobuf (`application/x-protobuf`; the signal is alpha, see
//!   [`export::otlp`](crate::export::otlp)), gzip-compressed (`Content-Encoding: gzip`). A profile
//!   sent again (a retry) keeps its `profile_id`s; one merged from several pending ones has new ids.
//! - `…/ingest`: Pyroscope's ingest API, a `POST` of gzip-compressed pprof with `name`
//!   (`SERVICE{hostname=HOST,LABEL=VALUE,…}`), `from` and `until` (Unix seconds), `format=pprof`,
//!   `sampleRate`, `spyName=perf-profile`.
//!
//! HTTPS checks the server against the system's CA certificates (`SSL_CERT_FILE`, else the
//! distribution's bundle) or a given CA file. Credentials ([`Credentials`]) come from the
//! environment or a file, never from a command line, and never appear in logs or errors: a server
//! that echoes them back has them replaced by `[redacted]`. They go over `https://` only, or to a
//! loopback address (`127.0.0.0/8`, `::1`, `localhost`), unless
//! [`PushOptions::allow_insecure_http`] says otherwise (then a warning is logged).
//!
//! Redirects are not followed: a `3xx` answer is a failed attempt, retried and counted like a
//! `5xx`, and never counts as delivered (a redirect would carry the credentials to wherever it
//! points, and turn the `POST` into a body-less `GET`).
//!
//! # Delivery
//!
//! [`Pusher::push`] hands a profile to the sender thread and returns at once. The thread keeps the
//! profiles not yet accepted in a queue bounded by bytes (their encoded size before compression,
//! [`PushOptions::queue_bytes`]):
//!
//! - a failed push (connection refused, a timeout, HTTP 5xx, 3xx, 408 or 429) is retried with
//!   exponential backoff ([`PushOptions::backoff`]);
//! - when the queue grows past its bound, the older pending profiles are merged into one (their
//!   stacks add up; one request instead of many);
//! - only when that still exceeds the bound is the oldest dropped: counted in [`PushStats`],
//!   logged, and reported in the next profile that gets through ([`Stats::dropped_profiles`] and
//!   [`Stats::dropped_samples`]: a pprof comment, OTLP attributes `perf_profile.dropped_*`);
//! - a profile the server refuses for good (another 4xx: bad credentials, a malformed request) is
//!   dropped the same way, with the server's reason logged;
//! - [`Pusher::finish`] makes one last attempt, bounded in time, to deliver what is pending.
//!
//! [`Stats::dropped_profiles`]: crate::Stats::dropped_profiles
//! [`Stats::dropped_samples`]: crate::Stats::dropped_samples

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, UNIX_EPOCH};

use prost::Message;
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};
use ureq::Agent;

use crate::error::{Error, Result};
use crate::export::otlp::{new_profile_ids, ProfileIds};
use crate::profile::Profile;

/// The environment variable holding a bearer token (`Authorization: Bearer …`).
pub const ENV_TOKEN: &str = "PERF_PROFILE_PUSH_TOKEN";
/// The environment variable holding a basic-auth user name.
pub const ENV_USER: &str = "PERF_PROFILE_PUSH_USER";
/// The environment variable holding a basic-auth password.
pub const ENV_PASSWORD: &str = "PERF_PROFILE_PUSH_PASSWORD";
/// The environment variable holding extra headers, `Name=value` pairs separated by commas (as
/// `OTEL_EXPORTER_OTLP_HEADERS`), e.g. `X-Scope-OrgID=tenant1`.
pub const ENV_HEADERS: &str = "PERF_PROFILE_PUSH_HEADERS";

/// The protocol a push URL speaks, by its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Protocol {
    /// OTLP/HTTP profiles (`/v1development/profiles`), protobuf.
    Otlp,
    /// Pyroscope's ingest API (`/ingest`), pprof.
    Pyroscope,
}

/// Credentials for the profile store. `Debug` shows which kinds are set, never their values.
#[derive(Clone, Default)]
pub struct Credentials {
    bearer: Option<String>,
    basic: Option<(String, String)>,
    headers: Vec<(String, String)>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("bearer", &self.bearer.as_ref().map(|_| "[redacted]"))
            .field(
                "basic",
                &self.basic.as_ref().map(|(u, _)| (u, "[redacted]")),
            )
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(n, _)| (n, "[redacted]"))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Credentials {
    /// No credentials.
    pub fn none() -> Self {
        Self::default()
    }

    /// A bearer token (`Authorization: Bearer TOKEN`).
    pub fn bearer(token: impl Into<String>) -> Self {
        Self {
            bearer: Some(token.into()),
            ..Self::default()
        }
    }

    /// Basic authentication (`Authorization: Basic …`).
    pub fn basic(user: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            basic: Some((user.into(), password.into())),
            ..Self::default()
        }
    }

    /// Adds a header sent with every push (a tenant id such as `X-Scope-OrgID`); its value is
    /// treated as a secret.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// From the environment: [`ENV_TOKEN`], [`ENV_USER`] with [`ENV_PASSWORD`], [`ENV_HEADERS`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOption`] for a user without a password (or the reverse), or a malformed
    /// header list (the message names the variable, never its value).
    pub fn from_env() -> Result<Self> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let mut c = Self {
            bearer: var(ENV_TOKEN),
            ..Self::default()
        };
        match (var(ENV_USER), var(ENV_PASSWORD)) {
            (Some(u), Some(p)) => c.basic = Some((u, p)),
            (None, None) => {}
            _ => {
                return Err(Error::InvalidOption(format!(
                    "basic authentication needs both {ENV_USER} and {ENV_PASSWORD}"
                )))
            }
        }
        if let Some(h) = var(ENV_HEADERS) {
            for pair in h.split(',').filter(|p| !p.trim().is_empty()) {
                let (n, v) = pair.split_once('=').ok_or_else(|| {
                    Error::InvalidOption(format!(
                        "{ENV_HEADERS}: give Name=value pairs separated by commas"
                    ))
                })?;
                c.headers.push((n.trim().to_owned(), v.trim().to_owned()));
            }
        }
        c.check()?;
        Ok(c)
    }

    /// From a file of `key = value` lines (`#` starts a comment): `token`, `user`, `password`,
    /// and `header = Name: value` (repeatable).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the file cannot be read; [`Error::InvalidOption`] naming the line number
    /// (never its content) of a malformed line.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = crate::untrusted::read_operator_file(path, 1 << 20)
            .and_then(|b| String::from_utf8(b).map_err(std::io::Error::other))
            .map_err(|source| Error::Io {
                path: path.to_owned(),
                source,
            })?;
        Self::parse_file(&text, path)
    }

    /// The credentials of a [`from_file`](Self::from_file) file's text; `path` names the file in
    /// errors.
    pub(crate) fn parse_file(text: &str, path: &Path) -> Result<Self> {
        let bad = |n: usize, why: &str| {
            Error::InvalidOption(format!("{} line {}: {why}", path.display(), n + 1))
        };
        let mut c = Self::default();
        let (mut user, mut password) = (None, None);
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| bad(n, "expected key = value (token, user, password, header)"))?;
            let v = v.trim().to_owned();
            match k.trim() {
                "token" => c.bearer = Some(v),
                "user" => user = Some(v),
                "password" => password = Some(v),
                "header" => {
                    let (hn, hv) = v
                        .split_once(':')
                        .ok_or_else(|| bad(n, "expected header = Name: value"))?;
                    c.headers.push((hn.trim().to_owned(), hv.trim().to_owned()));
                }
                _ => return Err(bad(n, "unknown key: use token, user, password or header")),
            }
        }
        match (user, password) {
            (Some(u), Some(p)) => c.basic = Some((u, p)),
            (None, None) => {}
            _ => {
                return Err(Error::InvalidOption(format!(
                    "{}: basic authentication needs both user and password",
                    path.display()
                )))
            }
        }
        c.check()?;
        Ok(c)
    }

    fn check(&self) -> Result<()> {
        if self.bearer.is_some() && self.basic.is_some() {
            return Err(Error::InvalidOption(
                "give a bearer token or a user and password, not both".into(),
            ));
        }
        for (name, _) in &self.headers {
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                return Err(Error::InvalidOption(format!(
                    "a header name may have letters, digits and '-' only: {name:?}"
                )));
            }
        }
        Ok(())
    }

    /// Every secret value, to scrub from anything logged.
    pub(crate) fn secrets(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        if let Some(t) = &self.bearer {
            out.push(t.clone());
        }
        if let Some((u, p)) = &self.basic {
            out.push(p.clone());
            out.push(basic_value(u, p));
        }
        out.extend(self.headers.iter().map(|(_, v)| v.clone()));
        out.retain(|s| !s.is_empty());
        out
    }

    /// `Authorization` and the extra headers.
    fn headers(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(t) = &self.bearer {
            out.push(("Authorization".into(), format!("Bearer {t}")));
        }
        if let Some((u, p)) = &self.basic {
            out.push((
                "Authorization".into(),
                format!("Basic {}", basic_value(u, p)),
            ));
        }
        out.extend(self.headers.iter().cloned());
        out
    }
}

/// base64(`user:password`), RFC 7617.
fn basic_value(user: &str, password: &str) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = format!("{user}:{password}");
    let mut out = String::new();
    for chunk in input.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A log line's receiver.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// How to push.
#[derive(Clone)]
#[non_exhaustive]
pub struct PushOptions {
    /// `http(s)://HOST[:PORT]/…/v1development/profiles` (OTLP) or `…/ingest` (Pyroscope).
    pub url: String,
    /// A PEM file of CA certificates to trust instead of the system's.
    pub ca_file: Option<PathBuf>,
    /// Credentials ([`Credentials::from_env`], [`Credentials::from_file`]).
    pub credentials: Credentials,
    /// The most bytes of encoded profiles kept pending (OTLP counted before its gzip compression;
    /// default 8 MiB).
    pub queue_bytes: usize,
    /// Each request's time limit, connecting included (default 10 s).
    pub timeout: Duration,
    /// The first retry's delay and the longest (default 0.5 s and 30 s); it doubles per failure.
    pub backoff: (Duration, Duration),
    /// Labels for Pyroscope's `name` (besides `hostname`), `key=value`.
    pub labels: Vec<(String, String)>,
    /// Send credentials over cleartext `http://` to a host that is not a loopback address (default
    /// `false`: such a configuration is refused by [`check`](Self::check)); a warning is logged.
    pub allow_insecure_http: bool,
    /// Where log lines go (default: standard error, prefixed `perf-profile push: `).
    pub log: Log,
}

impl std::fmt::Debug for PushOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushOptions")
            .field("url", &self.url)
            .field("ca_file", &self.ca_file)
            .field("credentials", &self.credentials)
            .field("queue_bytes", &self.queue_bytes)
            .field("timeout", &self.timeout)
            .field("backoff", &self.backoff)
            .field("labels", &self.labels)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .finish_non_exhaustive()
    }
}

impl PushOptions {
    /// Defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ca_file: None,
            credentials: Credentials::none(),
            queue_bytes: 8 << 20,
            timeout: Duration::from_secs(10),
            backoff: (Duration::from_millis(500), Duration::from_secs(30)),
            labels: Vec::new(),
            allow_insecure_http: false,
            log: Arc::new(|line| eprintln!("perf-profile push: {line}")),
        }
    }

    /// Checks the URL ([`protocol_of`]) and where its credentials would go: over `https://`, or
    /// `http://` to a loopback address (`127.0.0.0/8`, `::1`, `localhost`), or anywhere with
    /// [`allow_insecure_http`](Self::allow_insecure_http). Returns the protocol.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOption`] as [`protocol_of`], or for credentials that would cross the network
    /// in cleartext (the message names the host, never a credential).
    pub fn check(&self) -> Result<Protocol> {
        let protocol = protocol_of(&self.url)?;
        if let Some(host) = self.cleartext_host() {
            if !self.allow_insecure_http {
                return Err(Error::InvalidOption(format!(
                    "push URL {:?}: credentials would cross the network in cleartext to {host}: \
                     use https://, a loopback address, or allow it explicitly (the profile \
                     example's --allow-insecure-http)",
                    self.url
                )));
            }
        }
        Ok(protocol)
    }

    /// The host credentials would be sent to over cleartext http when it is not loopback.
    fn cleartext_host(&self) -> Option<String> {
        if self.credentials.headers().is_empty() {
            return None;
        }
        let uri: ureq::http::Uri = self.url.parse().ok()?;
        if uri.scheme_str() != Some("http") {
            return None;
        }
        let host = uri.host().unwrap_or_default();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = bare.eq_ignore_ascii_case("localhost")
            || bare
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        (!loopback).then(|| host.to_owned())
    }
}

/// What a [`Pusher`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PushStats {
    /// Requests the endpoint accepted (2xx).
    pub sent: u64,
    /// Samples in them.
    pub sent_samples: u64,
    /// Attempts that failed and were to be retried (refused, timed out, 5xx, 3xx, 408, 429).
    pub failed_attempts: u64,
    /// Requests the endpoint refused for good (other 4xx).
    pub rejected: u64,
    /// Times pending profiles were merged because the queue passed its bound.
    pub merges: u64,
    /// Profiles (intervals) dropped: beyond the queue's bound, refused for good, or still pending
    /// when [`Pusher::finish`]'s time ran out.
    pub dropped_profiles: u64,
    /// Samples in them.
    pub dropped_samples: u64,
    /// The last error, without credentials.
    pub last_error: Option<String>,
}

enum Msg {
    Profile(Box<Profile>),
    Finish(Duration),
}

/// The sender thread's handle. Dropping it without [`finish`](Self::finish) gives the thread one
/// last attempt of 5 s and does not wait for it.
#[derive(Debug)]
pub struct Pusher {
    tx: mpsc::Sender<Msg>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<Mutex<PushStats>>,
    protocol: Protocol,
}

impl Pusher {
    /// Checks the options, sets up TLS and starts the sender thread.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOption`] for a URL that is not `http(s)://HOST/…` with a path ending in
    /// `/v1development/profiles` or `/ingest`, or one carrying credentials (`user:pass@`: they
    /// would show in `ps`), or credentials over cleartext http ([`PushOptions::check`]);
    /// [`Error::Io`] when the CA file cannot be read, [`Error::InvalidOption`] when it has no
    /// certificate.
    pub fn start(opts: PushOptions) -> Result<Self> {
        let protocol = opts.check()?;
        if let Some(host) = opts.cleartext_host() {
            (opts.log)(&format!(
                "warning: credentials go to {host} over cleartext http (allowed by \
                 allow_insecure_http): anyone on the path can read them"
            ));
        }
        let roots = match &opts.ca_file {
            Some(path) => read_certs(path)?,
            None => system_certs(),
        };
        let roots = match roots {
            Some(certs) => RootCerts::Specific(Arc::new(certs)),
            None => RootCerts::WebPki,
        };
        let agent: Agent = Agent::config_builder()
            .tls_config(TlsConfig::builder().root_certs(roots).build())
            .timeout_global(Some(opts.timeout))
            .http_status_as_error(false)
            // A redirect would re-send the credentials to wherever it points (and turn the POST
            // into a body-less GET whose 200 would count as delivered): the 3xx is an answer.
            .max_redirects(0)
            .user_agent(concat!("perf-profile/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        let stats = Arc::new(Mutex::new(PushStats::default()));
        let (tx, rx) = mpsc::channel();
        let mut sender = Sender {
            secrets: opts.credentials.secrets(),
            headers: opts.credentials.headers(),
            host: crate::export::otlp::host_name(),
            agent,
            protocol,
            opts,
            queue: VecDeque::new(),
            queued_bytes: 0,
            unreported: (0, 0),
            failures: 0,
            stats: Arc::clone(&stats),
        };
        let thread = std::thread::Builder::new()
            .name("perf-profile-push".into())
            .spawn(move || sender.run(&rx))
            .map_err(|e| Error::InvalidOption(format!("cannot start the push thread: {e}")))?;
        Ok(Self {
            tx,
            thread: Some(thread),
            stats,
            protocol,
        })
    }

    /// The protocol the URL speaks.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Queues `profile` for the sender thread and returns at once.
    pub fn push(&self, profile: Profile) {
        let _ = self.tx.send(Msg::Profile(Box::new(profile)));
    }

    /// What was sent, retried and dropped so far.
    pub fn stats(&self) -> PushStats {
        lock(&self.stats).clone()
    }

    /// Sends what is pending (merged into one request) with one last attempt bounded by `within`
    /// (retries included), drops and counts what is left, and stops the thread.
    pub fn finish(mut self, within: Duration) -> PushStats {
        let _ = self.tx.send(Msg::Finish(within));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.stats()
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Finish(Duration::from_secs(5)));
    }
}

fn lock(m: &Mutex<PushStats>) -> std::sync::MutexGuard<'_, PushStats> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The protocol `url`'s path names.
pub fn protocol_of(url: &str) -> Result<Protocol> {
    let bad = |why: &str| Error::InvalidOption(format!("push URL {url:?}: {why}"));
    let uri: ureq::http::Uri = url
        .parse()
        .map_err(|_| bad("not a URL; e.g. http://localhost:4040/ingest"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(bad("use http:// or https://")),
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(Error::InvalidOption(format!(
            "the push URL carries credentials, which `ps` would show: remove them and set \
             {ENV_USER} and {ENV_PASSWORD} (or a credentials file) instead"
        )));
    }
    let path = uri.path().trim_end_matches('/');
    if path.ends_with("/v1development/profiles") {
        Ok(Protocol::Otlp)
    } else if path.ends_with("/ingest") {
        Ok(Protocol::Pyroscope)
    } else {
        Err(bad(
            "the path says the protocol: …/v1development/profiles (OTLP/HTTP) or …/ingest (Pyroscope)",
        ))
    }
}

fn read_certs(path: &Path) -> Result<Option<Vec<Certificate<'static>>>> {
    let pem = crate::untrusted::read_operator_file(path, 16 << 20).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    let certs: Vec<_> = ureq::tls::parse_pem(&pem)
        .filter_map(|i| match i {
            Ok(PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(Error::InvalidOption(format!(
            "{}: no PEM certificate in it (-----BEGIN CERTIFICATE-----)",
            path.display()
        )));
    }
    Ok(Some(certs))
}

/// The system's CA certificates: `SSL_CERT_FILE`, else the distribution's bundle; `None` when none
/// is found (then the Mozilla roots built into webpki-roots are used).
fn system_certs() -> Option<Vec<Certificate<'static>>> {
    let env = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
    let known = [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/ca-bundle.pem",
        "/etc/ssl/cert.pem",
    ];
    env.into_iter()
        .chain(known.iter().map(PathBuf::from))
        .find_map(|p| read_certs(&p).ok().flatten())
}

/// `bytes` gzip-compressed.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let _ = gz.write_all(bytes);
    gz.finish().unwrap_or_default()
}

/// A profile waiting to be sent.
struct Pending {
    profile: Profile,
    /// Its OTLP profiles' ids, the same in every attempt.
    ids: ProfileIds,
    /// Its encoded size (before compression).
    bytes: usize,
    /// How many pushed profiles it holds (merged ones count each).
    profiles: u64,
}

/// What one attempt came to.
enum Outcome {
    Sent,
    Retry(String),
    Rejected(String),
}

/// The sender thread's state.
struct Sender {
    agent: Agent,
    protocol: Protocol,
    opts: PushOptions,
    secrets: Vec<String>,
    headers: Vec<(String, String)>,
    host: String,
    queue: VecDeque<Pending>,
    queued_bytes: usize,
    /// Profiles and samples dropped since the last profile got through.
    unreported: (u64, u64),
    /// Failures in a row, for the backoff.
    failures: u32,
    stats: Arc<Mutex<PushStats>>,
}

impl Sender {
    fn run(&mut self, rx: &mpsc::Receiver<Msg>) {
        let mut next_attempt = Instant::now();
        loop {
            let msg = if self.queue.is_empty() {
                rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                rx.recv_timeout(next_attempt.saturating_duration_since(Instant::now()))
            };
            match msg {
                Ok(Msg::Profile(p)) => {
                    self.enqueue(*p);
                    while let Ok(m) = rx.try_recv() {
                        match m {
                            Msg::Profile(p) => self.enqueue(*p),
                            Msg::Finish(within) => return self.finish(within),
                        }
                    }
                }
                Ok(Msg::Finish(within)) => return self.finish(within),
                Err(RecvTimeoutError::Disconnected) => return self.finish(Duration::from_secs(5)),
                Err(RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() >= next_attempt && !self.queue.is_empty() {
                if let Some(delay) = self.attempt(None) {
                    next_attempt = Instant::now() + delay;
                }
            }
        }
    }

    /// One attempt at the oldest pending profile; the delay before the next attempt after a
    /// failure, `None` after a success or a rejection.
    fn attempt(&mut self, timeout: Option<Duration>) -> Option<Duration> {
        let front = self.queue.front_mut()?;
        front.profile.info.stats.dropped_profiles = self.unreported.0;
        front.profile.info.stats.dropped_samples = self.unreported.1;
        let samples = front.profile.info.stats.samples;
        let outcome = self.send(timeout);
        match outcome {
            Outcome::Sent => {
                self.pop();
                self.failures = 0;
                let mut st = lock(&self.stats);
                st.sent += 1;
                st.sent_samples += samples;
                drop(st);
                if self.unreported.0 > 0 {
                    (self.opts.log)(&format!(
                        "delivered; it reports {} profiles ({} samples) dropped before it",
                        self.unreported.0, self.unreported.1
                    ));
                }
                self.unreported = (0, 0);
                None
            }
            Outcome::Retry(why) => {
                self.failures += 1;
                let (first, max) = self.opts.backoff;
                let delay = first
                    .saturating_mul(1 << (self.failures - 1).min(16))
                    .min(max);
                (self.opts.log)(&format!(
                    "{why}; retrying in {:.1} s ({} profiles, {} bytes pending)",
                    delay.as_secs_f64(),
                    self.queue.len(),
                    self.queued_bytes
                ));
                let mut st = lock(&self.stats);
                st.failed_attempts += 1;
                st.last_error = Some(why);
                Some(delay)
            }
            Outcome::Rejected(why) => {
                let p = self.pop();
                self.drop_counted(&p, &why);
                let mut st = lock(&self.stats);
                st.rejected += 1;
                st.last_error = Some(why);
                None
            }
        }
    }

    fn pop(&mut self) -> Option<Pending> {
        let p = self.queue.pop_front()?;
        self.queued_bytes -= p.bytes;
        Some(p)
    }

    fn drop_counted(&mut self, p: &Option<Pending>, why: &str) {
        let Some(p) = p else { return };
        let samples = p.profile.info.stats.samples;
        self.unreported.0 += p.profiles;
        self.unreported.1 += samples;
        let mut st = lock(&self.stats);
        st.dropped_profiles += p.profiles;
        st.dropped_samples += samples;
        drop(st);
        (self.opts.log)(&format!(
            "dropped {} profiles ({} samples): {why}",
            p.profiles, samples
        ));
    }

    fn enqueue(&mut self, profile: Profile) {
        let mut p = Pending {
            profile,
            ids: new_profile_ids(),
            bytes: 0,
            profiles: 1,
        };
        p.bytes = self.body(&p).len();
        self.queued_bytes += p.bytes;
        self.queue.push_back(p);
        if self.queued_bytes <= self.opts.queue_bytes {
            return;
        }
        // Merge the older ones (all but the newest) into one.
        if self.queue.len() > 2 {
            let newest = self.queue.pop_back();
            let mut merged = self.queue.pop_front();
            if let Some(m) = merged.as_mut() {
                while let Some(p) = self.queue.pop_front() {
                    m.profile.merge(&p.profile);
                    m.profiles += p.profiles;
                }
                m.ids = new_profile_ids();
                m.bytes = self.body(m).len();
            }
            self.queue.extend(merged);
            self.queue.extend(newest);
            self.queued_bytes = self.queue.iter().map(|p| p.bytes).sum();
            lock(&self.stats).merges += 1;
        }
        while self.queued_bytes > self.opts.queue_bytes {
            let p = self.pop();
            if p.is_none() {
                break;
            }
            let why = format!(
                "the push queue is full ({} bytes pending, --queue-bytes {})",
                self.queued_bytes, self.opts.queue_bytes
            );
            self.drop_counted(&p, &why);
        }
    }

    /// Sends what is pending within `within`, merged into one request, then drops the rest.
    fn finish(&mut self, within: Duration) {
        let deadline = Instant::now() + within;
        if self.queue.len() > 1 {
            let mut merged = self.pop();
            if let Some(m) = merged.as_mut() {
                while let Some(p) = self.pop() {
                    m.profile.merge(&p.profile);
                    m.profiles += p.profiles;
                }
                m.ids = new_profile_ids();
                m.bytes = self.body(m).len();
                self.queued_bytes = m.bytes;
            }
            self.queue.extend(merged);
        }
        while !self.queue.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.attempt(Some(left.min(self.opts.timeout))) {
                None => {}
                Some(delay) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    std::thread::sleep(delay.min(left));
                }
            }
        }
        while !self.queue.is_empty() {
            let p = self.pop();
            self.drop_counted(
                &p,
                &format!(
                    "still undelivered when the last attempt's {:.1} s ran out",
                    within.as_secs_f64()
                ),
            );
        }
    }

    /// The encoded profile: an OTLP request in protobuf, or gzip-compressed pprof.
    fn body(&self, p: &Pending) -> Vec<u8> {
        match self.protocol {
            Protocol::Otlp => p.profile.to_otlp_with_ids(p.ids.clone()).encode_to_vec(),
            Protocol::Pyroscope => {
                let mut out = Vec::new();
                // Writing into a Vec cannot fail.
                let _ = p.profile.write_pprof(&mut out);
                out
            }
        }
    }

    /// Sends the front profile once.
    fn send(&self, timeout: Option<Duration>) -> Outcome {
        let Some(p) = self.queue.front() else {
            return Outcome::Sent;
        };
        let mut body = self.body(p);
        let mut req = self.agent.post(&self.opts.url);
        for (n, v) in &self.headers {
            req = req.header(n.as_str(), v.as_str());
        }
        let req = match self.protocol {
            Protocol::Otlp => {
                body = gzip(&body);
                req.content_type("application/x-protobuf")
                    .header("Content-Encoding", "gzip")
            }
            Protocol::Pyroscope => {
                let info = &p.profile.info;
                let from = info
                    .start
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let until = (info.start + info.duration)
                    .duration_since(UNIX_EPOCH)
                    .map_or(from, |d| d.as_secs().max(from));
                let mut labels = vec![format!("hostname={}", self.host)];
                labels.extend(self.opts.labels.iter().map(|(k, v)| format!("{k}={v}")));
                let name = format!("{}{{{}}}", info.service_name(), labels.join(","));
                req.content_type("application/octet-stream")
                    .query("name", name)
                    .query("from", from.to_string())
                    .query("until", until.to_string())
                    .query("format", "pprof")
                    .query("sampleRate", info.frequency.to_string())
                    .query("spyName", "perf-profile")
            }
        };
        let req = match timeout {
            Some(t) => req.config().timeout_global(Some(t)).build(),
            None => req,
        };
        match req.send(&body[..]) {
            Ok(mut resp) => {
                let status = resp.status();
                if status.is_success() {
                    return Outcome::Sent;
                }
                let text = resp
                    .body_mut()
                    .with_config()
                    .limit(4096)
                    .read_to_string()
                    .unwrap_or_default();
                let why = self.scrub(&format!(
                    "{} answered {}{}{}",
                    self.opts.url,
                    status,
                    if text.trim().is_empty() { "" } else { ": " },
                    text.trim()
                ));
                let code = status.as_u16();
                if status.is_redirection() {
                    Outcome::Retry(format!(
                        "{why} (a redirect, not followed: the credentials stay with the URL \
                         given; push to the address it names instead)"
                    ))
                } else if code >= 500 || code == 408 || code == 429 {
                    Outcome::Retry(why)
                } else if code == 401 || code == 403 {
                    Outcome::Rejected(format!(
                        "{why} (the credentials were refused: check {ENV_TOKEN}, {ENV_USER}/{ENV_PASSWORD}, \
                         {ENV_HEADERS} or the credentials file)"
                    ))
                } else {
                    Outcome::Rejected(why)
                }
            }
            Err(e) => Outcome::Retry(self.scrub(&format!("{}: {e}", self.opts.url))),
        }
    }

    /// `text` with every secret replaced by `[redacted]`.
    fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in &self.secrets {
            out = out.replace(s.as_str(), "[redacted]");
        }
        out
    }
}

// The loopback HTTP(S) receiver the integration tests use too.
#[cfg(test)]
#[path = "../tests/common/receiver.rs"]
mod receiver;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_is_rfc7617_base64() {
        assert_eq!(
            basic_value("Aladdin", "open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(basic_value("a", "b"), "YTpi");
        assert_eq!(basic_value("ab", "c"), "YWI6Yw==");
    }

    #[test]
    fn the_path_says_the_protocol_and_credentials_stay_out_of_urls() {
        assert_eq!(
            protocol_of("http://127.0.0.1:4318/v1development/profiles").unwrap(),
            Protocol::Otlp
        );
        assert_eq!(
            protocol_of("https://p.example/ingest").unwrap(),
            Protocol::Pyroscope
        );
        let e = protocol_of("http://h/v1/traces").unwrap_err().to_string();
        assert!(e.contains("/ingest"), "{e}");
        let e = protocol_of("ftp://h/ingest").unwrap_err().to_string();
        assert!(e.contains("https://"), "{e}");
        let e = protocol_of("http://u:hunter2@h/ingest")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2") && e.contains(ENV_USER), "{e}");
    }

    #[test]
    fn credentials_file_and_debug_never_show_secrets() {
        let dir = std::env::temp_dir().join(format!("pp-cred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("creds");
        std::fs::write(
            &f,
            "# store\nuser = alice\npassword = s3cret-pw\nheader = X-Scope-OrgID: tenant-7\n",
        )
        .unwrap();
        let c = Credentials::from_file(&f).unwrap();
        let dbg = format!("{c:?}");
        assert!(
            !dbg.contains("s3cret-pw") && !dbg.contains("tenant-7"),
            "{dbg}"
        );
        assert_eq!(
            c.headers(),
            [
                (
                    "Authorization".into(),
                    format!("Basic {}", basic_value("alice", "s3cret-pw"))
                ),
                ("X-Scope-OrgID".into(), "tenant-7".into())
            ]
        );
        std::fs::write(&f, "token: s3cret-tok\n").unwrap();
        let e = Credentials::from_file(&f).unwrap_err().to_string();
        assert!(e.contains("line 1") && !e.contains("s3cret-tok"), "{e}");
        std::fs::write(&f, "user = bob\n").unwrap();
        assert!(Credentials::from_file(&f).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    use std::net::TcpListener;

    use super::receiver::{Receiver, Request};
    use crate::aggregate::{Frame, Stacks};
    use crate::profile::{Info, Stats};
    use crate::symbolize::Mode;
    use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;

    /// How long a receiver serves at most.
    const SERVE: Duration = Duration::from_secs(60);

    /// The OTLP request a request's body holds, gzip-compressed as `Content-Encoding` says.
    fn otlp(req: &Request) -> ExportProfilesServiceRequest {
        assert_eq!(req.header("content-encoding"), Some("gzip"));
        ExportProfilesServiceRequest::decode(&req.content()[..]).unwrap()
    }

    /// A profile of `samples` samples in one stack made of `frames` (kernel addresses).
    fn synthetic(frames: &[u64], samples: u64) -> Profile {
        let mut stacks = Stacks::new();
        for _ in 0..samples {
            stacks.add(frames.iter().map(|&addr| Frame::Kernel { addr }), 10);
        }
        let n = stacks.frames().len();
        Profile {
            stacks,
            mappings: Vec::new(),
            lines: vec![std::sync::Arc::from(Vec::new()); n],
            info: Info {
                event: "cpu-clock".into(),
                event_reason: String::new(),
                frequency: 99,
                start: std::time::SystemTime::now(),
                duration: Duration::from_millis(100),
                stats: Stats {
                    samples,
                    ..Stats::default()
                },
                notes: Vec::new(),
                symbolize: Mode::None,
                process: None,
                service: Some("svc".into()),
            },
            folded_roots: Default::default(),
        }
    }

    /// The `profile_id`s of a request's profiles.
    fn ids(req: &Request) -> Vec<Vec<u8>> {
        otlp(req).resource_profiles[0].scope_profiles[0]
            .profiles
            .iter()
            .map(|p| p.profile_id.clone())
            .collect()
    }

    /// Per received request: (samples per leaf address, the dropped-samples attribute).
    fn decode(req: &Request) -> (std::collections::BTreeMap<u64, i64>, i64, i64) {
        let r = otlp(req);
        let d = r.dictionary.unwrap();
        let p = &r.resource_profiles[0].scope_profiles[0].profiles[0];
        let mut by_leaf = std::collections::BTreeMap::new();
        for s in &p.samples {
            let leaf = d.stack_table[s.stack_index as usize].location_indices[0];
            let addr = d.location_table[leaf as usize].address;
            *by_leaf.entry(addr).or_default() += s.values[0];
        }
        let attr = |key: &str| {
            p.attribute_indices
                .iter()
                .map(|&i| &d.attribute_table[i as usize])
                .find(|a| d.string_table[a.key_strindex as usize] == key)
                .and_then(|a| a.value.as_ref()?.value.clone())
                .map_or(-1, |v| match v {
                    any_value::Value::IntValue(i) => i,
                    _ => -1,
                })
        };
        (
            by_leaf,
            attr("perf_profile.dropped_profiles"),
            attr("perf_profile.dropped_samples"),
        )
    }

    use opentelemetry_proto::tonic::common::v1::any_value;

    fn quiet() -> Log {
        Arc::new(|_| {})
    }

    fn opts(url: String) -> PushOptions {
        let mut o = PushOptions::new(url);
        o.backoff = (Duration::from_millis(20), Duration::from_millis(100));
        o.timeout = Duration::from_secs(5);
        o.log = quiet();
        o
    }

    #[test]
    fn refused_requests_are_retried_and_every_sample_arrives_once() {
        // 503 for the first three requests, then accepted; the refused ones' profile ids kept.
        let refused = Arc::new(Mutex::new(Vec::new()));
        let r = Arc::clone(&refused);
        let rx = Receiver::serve(0, None, SERVE, move |n, req| {
            if n < 3 {
                r.lock().unwrap().push(ids(req));
                (503, "busy".into())
            } else {
                (200, String::new())
            }
        });
        let p = Pusher::start(opts(format!(
            "http://127.0.0.1:{}/v1development/profiles",
            rx.port
        )))
        .unwrap();
        // The first profile alone until it is through: pending together with the others at
        // `finish` it would be merged with them, and a merged profile has new ids.
        p.push(synthetic(&[1, 100], 10));
        let t = std::time::Instant::now();
        while rx.got.lock().unwrap().is_empty() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        for i in 1..5u64 {
            p.push(synthetic(&[1, 100 + i], 10 + i));
        }
        let st = p.finish(Duration::from_secs(10));
        println!("{st:?}");
        assert_eq!(st.failed_attempts, 3, "{st:?}");
        assert_eq!((st.dropped_profiles, st.dropped_samples), (0, 0), "{st:?}");
        let mut total = std::collections::BTreeMap::new();
        let got = rx.got.lock().unwrap().clone();
        for r in &got {
            assert_eq!(r.header("content-type"), Some("application/x-protobuf"));
            for (leaf, n) in decode(r).0 {
                *total.entry(leaf).or_insert(0) += n;
            }
        }
        // The first profile, refused three times, kept its ids; the others have their own.
        let first = ids(&got[0]);
        assert_eq!(*refused.lock().unwrap(), vec![first.clone(); 3]);
        let mut all: Vec<Vec<u8>> = got.iter().flat_map(ids).collect();
        assert!(all.iter().all(|id| id.len() == 16), "{all:?}");
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 2 * got.len(), "every profile's ids differ");
        let want: std::collections::BTreeMap<u64, i64> =
            (0..5).map(|i| (100 + i, 10 + i as i64)).collect();
        assert_eq!(total, want);
        assert_eq!(st.sent_samples, 60);
    }

    #[test]
    fn past_the_bound_the_oldest_are_dropped_counted_and_reported() {
        // A port with no listener: connections are refused.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/v1development/profiles");
        // Each profile has 40 frames of its own, so merging saves little.
        let frames = |i: u64| -> Vec<u64> { (0..40).map(|k| 1000 * i + k).collect() };
        let one = synthetic(&frames(1), 5).to_otlp().encode_to_vec().len();
        let mut o = opts(url);
        // Room for two profiles, not three, nor one made of three.
        o.queue_bytes = one * 2 + one / 2;
        let p = Pusher::start(o).unwrap();
        let mut pushed = 0;
        for i in 0..8u64 {
            p.push(synthetic(&frames(i + 1), 1 + i));
            pushed += 1 + i;
            std::thread::sleep(Duration::from_millis(30));
        }
        std::thread::sleep(Duration::from_millis(200));
        let before = p.stats();
        assert!(
            before.dropped_profiles > 0 && before.failed_attempts > 0,
            "{before:?}"
        );
        assert_eq!(before.sent, 0);
        // The receiver comes up; one more profile; everything pending goes out at the end.
        let rx = Receiver::serve(port, None, SERVE, |_, _| (200, String::new()));
        p.push(synthetic(&frames(99), 7));
        pushed += 7;
        let st = p.finish(Duration::from_secs(10));
        println!("{pushed} samples pushed; {st:?}");
        let (mut arrived, mut reported_p, mut reported_s) = (0, 0, 0);
        let got = rx.got.lock().unwrap().clone();
        for r in got {
            let (leaves, dp, ds) = decode(&r);
            arrived += leaves.values().sum::<i64>();
            reported_p += dp;
            reported_s += ds;
        }
        assert!(st.dropped_samples > 0, "{st:?}");
        assert_eq!(arrived as u64 + st.dropped_samples, pushed, "{st:?}");
        assert_eq!(reported_s as u64, st.dropped_samples, "{st:?}");
        assert_eq!(reported_p as u64, st.dropped_profiles, "{st:?}");
        assert_eq!(arrived as u64, st.sent_samples);
    }

    /// A CA, and a server certificate for 127.0.0.1 it signed: (CA PEM, server TLS config).
    fn test_ca() -> (String, Arc<rustls::ServerConfig>) {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        (ca.pem(), Arc::new(cfg))
    }

    #[test]
    fn https_with_a_given_ca_and_a_checked_token_and_a_wrong_token_is_not_echoed() {
        let (ca_pem, tls) = test_ca();
        let dir = std::env::temp_dir().join(format!("pp-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, ca_pem).unwrap();
        // The receiver wants this token and the tenant header; it echoes what it got when refusing.
        let rx = Receiver::serve(0, Some(tls), SERVE, |_, r| {
            let auth = r.header("authorization").unwrap_or("").to_owned();
            if auth == "Bearer good-tok-123" && r.header("x-scope-orgid") == Some("t1") {
                (200, String::new())
            } else {
                (401, format!("bad credentials: {auth}"))
            }
        });
        let url = format!("https://127.0.0.1:{}/ingest", rx.port);
        let mut o = opts(url.clone());
        o.ca_file = Some(ca_file.clone());
        o.credentials = Credentials::bearer("good-tok-123").with_header("X-Scope-OrgID", "t1");
        let p = Pusher::start(o).unwrap();
        assert_eq!(p.protocol(), Protocol::Pyroscope);
        p.push(synthetic(&[1, 2], 3));
        let st = p.finish(Duration::from_secs(10));
        assert_eq!((st.sent, st.sent_samples), (1, 3), "{st:?}");
        let got = rx.got.lock().unwrap().clone();
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0].header("content-type"),
            Some("application/octet-stream")
        );
        // gzip-compressed pprof.
        assert_eq!(&got[0].body[..2], &[0x1f, 0x8b]);

        let logged = Arc::new(Mutex::new(Vec::<String>::new()));
        let mut o = opts(url.clone());
        o.ca_file = Some(ca_file.clone());
        o.credentials = Credentials::bearer("wrong-tok-456");
        let l = Arc::clone(&logged);
        o.log = Arc::new(move |line| l.lock().unwrap().push(line.to_owned()));
        let p = Pusher::start(o).unwrap();
        p.push(synthetic(&[1, 2], 3));
        let st = p.finish(Duration::from_secs(10));
        assert_eq!((st.rejected, st.dropped_samples), (1, 3), "{st:?}");
        let err = st.last_error.unwrap();
        assert!(err.contains("401") && err.contains(ENV_TOKEN), "{err}");
        assert!(
            err.contains("[redacted]"),
            "the echoed token is scrubbed: {err}"
        );
        for line in logged.lock().unwrap().iter().chain([&err]) {
            assert!(!line.contains("wrong-tok-456"), "{line}");
        }

        // Without the CA the server's certificate is not trusted: retried, then dropped, said why.
        let mut o = opts(url);
        o.credentials = Credentials::bearer("good-tok-123");
        let logged = Arc::new(Mutex::new(Vec::<String>::new()));
        let l = Arc::clone(&logged);
        o.log = Arc::new(move |line| l.lock().unwrap().push(line.to_lowercase()));
        let p = Pusher::start(o).unwrap();
        p.push(synthetic(&[1, 2], 3));
        let st = p.finish(Duration::from_secs(3));
        assert_eq!(st.sent, 0);
        assert_eq!(st.dropped_samples, 3);
        let logged = logged.lock().unwrap();
        assert!(
            logged
                .iter()
                .any(|l| l.contains("certificate") || l.contains("issuer")),
            "{logged:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    // The push endpoint's answers and the push URL as an attacker shapes them (issue 33).

    #[test]
    fn a_redirect_is_a_failed_attempt_and_the_secrets_never_reach_its_target() {
        // The second origin records whatever reaches it and says 200 to anything.
        let elsewhere = Receiver::serve(0, None, SERVE, |_, _| (200, String::new()));
        let to = format!("http://127.0.0.1:{}/ingest", elsewhere.port);
        let first = Receiver::redirect(SERVE, to);
        let mut o = opts(format!("http://127.0.0.1:{}/ingest", first.port));
        o.credentials =
            Credentials::bearer("tok-s3cret").with_header("X-Scope-OrgID", "tenant-s3cret");
        let p = Pusher::start(o).unwrap();
        p.push(synthetic(&[1, 2], 4));
        // The pusher tries on its own; wait for an attempt that got the 302 (on a loaded machine an
        // attempt may time out first: `finish`'s short deadline alone left only timeouts once).
        let waited = Instant::now();
        let redirected = loop {
            let err = p.stats().last_error.unwrap_or_default();
            if err.contains("302") || waited.elapsed() > SERVE / 2 {
                break err;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let st = p.finish(Duration::from_millis(500));
        println!("{st:?}");
        let reached = elsewhere.seen.lock().unwrap().clone();
        for r in &reached {
            println!("the redirect's target got: {} {:?}", r.path, r.headers);
        }
        assert!(
            reached.is_empty(),
            "{} requests followed the redirect to the other origin",
            reached.len()
        );
        assert!(!first.seen.lock().unwrap().is_empty());
        assert_eq!(
            (st.sent, st.sent_samples),
            (0, 0),
            "counted as sent: {st:?}"
        );
        assert!(st.failed_attempts >= 1, "{st:?}");
        assert_eq!((st.dropped_profiles, st.dropped_samples), (1, 4), "{st:?}");
        assert!(
            redirected.contains("302") && redirected.contains("redirect"),
            "{redirected}"
        );
    }

    #[test]
    fn credentials_over_cleartext_http_go_to_loopback_only() {
        // 0.0.0.0 reaches this machine (Linux connects it to loopback) but is no loopback address:
        // the stand-in for a remote host that the test can still listen for.
        let rx = Receiver::serve(0, None, SERVE, |_, _| (200, String::new()));
        let remote = format!("http://0.0.0.0:{}/ingest", rx.port);
        for creds in [
            Credentials::bearer("tok-s3cret"),
            Credentials::basic("u", "pw-s3cret"),
            Credentials::none().with_header("X-Scope-OrgID", "tenant-s3cret"),
        ] {
            let mut o = opts(remote.clone());
            o.credentials = creds.clone();
            match Pusher::start(o) {
                Ok(p) => {
                    p.push(synthetic(&[1, 2], 3));
                    let st = p.finish(Duration::from_secs(5));
                    panic!(
                        "{creds:?} accepted for cleartext http to a non-loopback host: {st:?}, \
                         the receiver got {} requests",
                        rx.got.lock().unwrap().len()
                    );
                }
                Err(e) => {
                    let e = e.to_string();
                    assert!(e.contains("https://") && e.contains("0.0.0.0"), "{e}");
                    assert!(!e.contains("s3cret"), "{e}");
                }
            }
        }
        // Allowed explicitly: sent, with a warning that names the host (not the token).
        let logged = Arc::new(Mutex::new(Vec::<String>::new()));
        let mut o = opts(remote.clone());
        o.credentials = Credentials::bearer("tok-s3cret");
        o.allow_insecure_http = true;
        let l = Arc::clone(&logged);
        o.log = Arc::new(move |line| l.lock().unwrap().push(line.to_owned()));
        let p = Pusher::start(o).unwrap();
        p.push(synthetic(&[1, 2], 3));
        let st = p.finish(Duration::from_secs(10));
        assert_eq!(st.sent, 1, "{st:?}");
        assert_eq!(
            rx.got.lock().unwrap()[0].header("authorization"),
            Some("Bearer tok-s3cret")
        );
        let logged = logged.lock().unwrap();
        assert!(
            logged
                .iter()
                .any(|l| l.contains("warning") && l.contains("0.0.0.0") && l.contains("cleartext")),
            "{logged:?}"
        );
        assert!(logged.iter().all(|l| !l.contains("s3cret")), "{logged:?}");
        // Without credentials, and to loopback addresses, cleartext is fine.
        assert!(Pusher::start(opts(remote.clone())).is_ok());
        for host in ["127.0.0.1", "127.1.2.3", "[::1]", "localhost", "LOCALHOST"] {
            let mut o = opts(format!("http://{host}:{}/ingest", rx.port));
            o.credentials = Credentials::bearer("tok");
            assert!(Pusher::start(o).is_ok(), "{host}");
        }
    }
}
