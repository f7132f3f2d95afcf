//! `cargo xtask dropin [--check] [--fetch]`: perf-event-open 0.5.1's public API, listed from its
//! rustdoc JSON, and a compile test that names every item of the list in `perf_event`.
//!
//! The published crate is documented in a scratch crate under `target/xtask/dropin` (a dependency
//! on `perf-event-open = "=0.5.1"` with the features `latest` and `serde`) by
//! `cargo +nightly rustdoc -- -Z unstable-options --output-format json`. Without `--fetch` cargo
//! runs `--offline`: the crate and its dependencies come from cargo's cache, which the workspace's
//! own build fills (the `tests` crate's benchmarks depend on perf-event-open 0.5.1). With `--fetch`
//! cargo may use the network.
//!
//! Written (or, with `--check`, compared with what is committed):
//! - `tests/tests/dropin_peo_0_5/items.txt`: one line per item: every public path (modules, types,
//!   re-exports), struct field, enum variant, function and method with its signature, associated
//!   constant and type, trait impl (auto traits included, blanket impls left out), struct literal
//!   (for structs users can build) and exhaustive `match` (for enums that allow one).
//! - `tests/tests/dropin_peo_0_5/checks.rs`: one never-run function per line, written against
//!   `krate::`; `tests/tests/dropin_peo_0_5.rs` includes it twice, with `krate` naming
//!   perf-event-open 0.5.1 (so each check is known to hold there) and `perf_event`.
//!
//! What a check asks of `perf_event`: a path resolves (`use`, and a type in a signature); a field
//! is destructured with 0.5.1's type; a variant is built and matched with 0.5.1's field types; a
//! function is called from a wrapper with 0.5.1's signature (its generics and bounds, arguments
//! and return type). A `Result<T, io::Error>` return is checked as `Ok(call?)`: our functions
//! return `perf_event::Error`, which converts into `io::Error`, so code with `?` in an
//! `io::Result` function compiles unchanged. Trait impls are checked with `fn ck<X: Trait>()`.
//!
//! A deliberate difference (0.5.1 accepts something ours refuses for soundness) is listed in
//! [`DIFFERENCES`]: its check is still generated but commented out, with the reason beside it.
//! `--audit` compiles those checks against `perf_event` and fails unless each one fails there (an
//! entry that hides a passing check is too broad).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::workspace_root;

/// The published version this drop-in follows.
const VERSION: &str = "0.5.1";

/// Items of 0.5.1 whose check is kept out of the compile test on purpose, as the item list spells
/// them, with the reason. The crate docs' "Migrating from perf-event-open" section says the same.
pub const DIFFERENCES: &[(&str, &str)] = &[
    // Soundness: 0.5.1 accepted these, ours refuses them.
    (
        "~::try_into_dp(",
        "soundness: a DynamicPmu is plain data, and a probe's symbol or path would be a raw pointer \
         in its config1 (0.5.1 only keeps it valid by demanding &'static CStr); ours converts a probe \
         into an Event, which owns the string: `Event::try_from(probe)`",
    ),
    ("~probe> for event::dp::DynamicPmu", "soundness: as `try_into_dp`; use `Event::try_from(probe)`"),
    ("~<event::dp::DynamicPmu as TryFrom<event::dp::", "soundness: as `try_into_dp`"),
    (
        "~sample::record::UnsafeParser",
        "soundness: ours has no `unsafe` (the crate forbids it) and no parser of unchecked bytes; \
         `Sampler::parser()` is the bounds-checked `Parser`, and perf-core parses byte slices with \
         checks (perf.data, saved rings)",
    ),
    ("~Parser::as_unsafe(", "soundness: as UnsafeParser"),
    ("~Sampler::parser(", "soundness: returns the checked `Parser` (see UnsafeParser)"),
    (
        "~Counter::switch_to<",
        "soundness: takes `&mut self`: it replaces the counter's fd, which a `&self` method could do \
         while another thread reads or a sampler maps it",
    ),
    (
        "~Sampler::counter_time_",
        "the mmap page is read under its seqlock: ours returns `Result<u64>` (an error if the lock \
         never settles) where 0.5.1 returned whatever it read",
    ),
    // Threads: ours is Send + Sync where 0.5.1 was not.
    (
        "~CounterGroup::add(",
        "returns `Result<Arc<Counter>>`: a group and its counters are Send + Sync here (0.5.1: Rc)",
    ),
    ("~CounterGroup::siblings(", "returns `&[Arc<Counter>]` (0.5.1: Rc), as `add`"),
    // Owned strings instead of &'static CStr.
    (
        "~event::dp::Kprobe::Symbol {",
        "`name` is a `CString`: a probe need not be built from a &'static string (0.5.1: &'static CStr)",
    ),
    ("~event::dp::Kretprobe::Symbol {", "`name` is a `CString`, as Kprobe"),
    ("~event::dp::Uprobe::path:", "`path` is a `CString` (0.5.1: &'static CStr); `Uprobe::new` takes any path"),
    ("~event::dp::Uretprobe::path:", "`path` is a `CString`, as Uprobe"),
    (
        "~literal event::dp::Uprobe {",
        "`path` is a `CString` and there is one more field (`ref_ctr_offset`): build it with `Uprobe::new`",
    ),
    ("~literal event::dp::Uretprobe {", "as Uprobe: build it with `Uretprobe::new`"),
    // More options than 0.5.1: a literal naming only 0.5.1's fields misses ours.
    (
        "~literal config::Opts {",
        "ours has options 0.5.1 lacks (e.g. `Opts::aux_output`, `RecordIdFormat::identifier`, \
         `ExtraRecord::comm_exec`): a literal naming every field needs them too; \
         `..Default::default()` covers both",
    ),
    ("~literal config::RecordIdFormat {", "one more field (`identifier`); `..Default::default()` covers it"),
    ("~literal config::ExtraRecord {", "one more field (`comm_exec`); `..Default::default()` covers it"),
    // A level the kernel named after 0.5.1.
    (
        "match sample::record::sample::MemLevel2 (exhaustive)",
        "`MemLevel2::L0` (`PERF_MEM_LVLNUM_L0`, in the UAPI headers after Linux 6.12) is a variant \
         of its own (0.5.1 read it as `Unknown`): an exhaustive match needs its arm",
    ),
    // The kernel's call chain, not 0.5.1's parts.
    (
        "~field sample::record::sample::Sample::call_chain:",
        "`Sample::call_chain` is a `CallChains`, the kernel's `Vec<u64>` kept whole (one allocation \
         per sample): iterating it yields 0.5.1's `CallChain` parts (the same enum), `to_vec()` is \
         0.5.1's `Vec<CallChain>`, `ips()` the kernel's form with its `PERF_CONTEXT_*` markers",
    ),
    ("~literal sample::record::sample::Sample {", "as call_chain: `call_chain` is `Option<CallChains>`"),
    (
        "variant sample::record::mmap::Info::BuildId(arrayvec::ArrayVec<u8, BUILD_ID_SIZE_MAX>)",
        "the build id is a `Vec<u8>` (at most 20 bytes, as the kernel writes it): no arrayvec type in \
         the public API",
    ),
    // Conversions that cannot fail.
    (
        "~event::hw::Hardware>>::Error = Error",
        "conversions that cannot fail are `From` impls here, so their `TryFrom::Error` is \
         `Infallible`; the fallible ones (probes) have `perf_event::Error`, which converts into \
         `io::Error` with `?`",
    ),
    ("~event::sw::Software>>::Error = Error", "infallible here (`From`), as Hardware"),
    ("~event::raw::Raw>>::Error = Error", "infallible here (`From`), as Hardware"),
    ("~event::tp::Tracepoint>>::Error = Error", "infallible here (`From`), as Hardware"),
    ("~event::bp::Breakpoint>>::Error = Error", "infallible here (`From`), as Hardware"),
    ("~<event::Event as TryFrom<&event::dp::DynamicPmu>>::Error", "infallible here (`From`), as Hardware"),
    ("~<event::Event as TryFrom<event::dp::DynamicPmu>>::Error", "infallible here (`From`), as Hardware"),
    // Internals 0.5.1 leaked.
    (
        "~::Wait",
        "0.5.1's `Wait` is an internal waker state that leaked into its API (no methods, no \
         constructor): nothing to alias",
    ),
    ("impl Eq for config::Target", "as PartialEq"),
    ("impl Hash for config::Target", "as PartialEq"),
    (
        "impl PartialEq for config::Target",
        "a Target holds a duplicated cgroup fd: equality and hashing of fds would compare fd numbers, \
         not cgroups",
    ),
    // The AUX iterators' chunk length and chunk type (sync and async alike).
    (
        "~sample::auxiliary::iter::Iter::next(",
        "`max_chunk_len` is an `Option<u64>` (0.5.1: `Option<NonZeroUsize>`): a chunk length is a \
         ring offset, and 0 is refused at run time",
    ),
    (
        "~sample::auxiliary::iter::CowIter::next<",
        "as `Iter::next`: `max_chunk_len: Option<u64>`, given first; the closure gets the AUX bytes \
         as perf-core's `Chunk` (one or two slices, never a copy; 0.5.1: `rb::CowChunk`)",
    ),
    (
        "~sample::auxiliary::iter::AsyncIter::",
        "as `Iter::next`, which the async forms follow: `max_chunk_len: Option<u64>`",
    ),
    (
        "~sample::auxiliary::iter::AsyncCowIter::",
        "as `CowIter::next`, which the async forms follow: `max_chunk_len: Option<u64>` first, and \
         the closure gets a `Chunk`",
    ),
];

fn out_dir() -> PathBuf {
    workspace_root().join("tests/tests/dropin_peo_0_5")
}

/// `cargo xtask dropin [--check] [--audit] [--fetch]`.
pub fn main(args: &[String]) -> Result<(), String> {
    let check = args.iter().any(|a| a == "--check");
    let audit_too = args.iter().any(|a| a == "--audit");
    let fetch = args.iter().any(|a| a == "--fetch");
    let json = rustdoc_json(fetch)?;
    let doc: Value = serde_json::from_str(&json).map_err(|e| format!("rustdoc JSON: {e}"))?;
    let items = Gen::new(&doc)?.run()?;
    let (list, checks) = render(&items)?;
    let examples = doc_examples(&doc)?;
    let dir = out_dir();
    let files = [
        (dir.join("items.txt"), list),
        (dir.join("checks.rs"), checks.clone()),
        (dir.join("doc_examples.rs"), examples),
    ];
    if check {
        let mut stale = Vec::new();
        for (path, text) in &files {
            if fs::read_to_string(path).ok().as_deref() != Some(text.as_str()) {
                stale.push(path.display().to_string());
            }
        }
        if !stale.is_empty() {
            return Err(format!(
                "stale: {} (run `cargo xtask dropin` and commit the result)",
                stale.join(", ")
            ));
        }
        println!(
            "dropin: {} items of perf-event-open {VERSION}, committed files are fresh",
            items.len()
        );
    }
    if audit_too {
        audit(&checks)?;
    }
    if check || audit_too {
        return Ok(());
    }
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (path, text) in &files {
        fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    println!("dropin: {} items of perf-event-open {VERSION}", items.len());
    Ok(())
}

/// `--audit`: every check kept out as a difference must really fail against `perf_event`, or its
/// entry in [`DIFFERENCES`] is too broad. Compiles the checks with the differences put back, in a
/// temporary test target of the `tests` crate, and maps the compiler's errors to items.
fn audit(checks: &str) -> Result<(), String> {
    let mut body = String::new();
    let mut kept_out = Vec::new();
    let mut current = "";
    let mut in_difference = false;
    for line in checks.lines() {
        if line.starts_with("// DIFFERENCE:") {
            in_difference = true;
            kept_out.push(current.to_string());
        } else if in_difference && line.starts_with("// ") {
            body.push_str(&line[3..]);
            body.push('\n');
            continue;
        } else {
            in_difference = false;
            if let Some(item) = line.strip_prefix("// ") {
                current = item;
            }
        }
        body.push_str(line);
        body.push('\n');
    }
    let root = workspace_root();
    let included = root.join("tests/tests/dropin_peo_0_5/audit.rs");
    let harness = root.join("tests/tests/dropin_audit.rs");
    fs::write(&included, &body).map_err(|e| e.to_string())?;
    fs::write(
        &harness,
        "#[allow(dead_code, unused_variables, unused_imports, deprecated, clippy::all)]\nmod ours {\n    \
         use ::perf_event as krate;\n    include!(\"dropin_peo_0_5/audit.rs\");\n}\n",
    )
    .map_err(|e| e.to_string())?;
    let out = crate::cargo()
        .args([
            "test",
            "-p",
            "tests",
            "--test",
            "dropin_audit",
            "--no-run",
            "--message-format",
            "short",
        ])
        .output();
    let _ = fs::remove_file(&harness);
    let _ = fs::remove_file(&included);
    let out = out.map_err(|e| format!("cargo test: {e}"))?;
    let log = String::from_utf8_lossy(&out.stderr);
    // The item each line of audit.rs belongs to.
    let mut owner = Vec::new();
    let mut current = "";
    for line in body.lines() {
        if let Some(item) = line
            .strip_prefix("// ")
            .filter(|l| !l.starts_with("DIFFERENCE:"))
        {
            current = item;
        }
        owner.push(current);
    }
    let failing: BTreeSet<&str> = log
        .lines()
        .filter_map(|l| l.split("dropin_peo_0_5/audit.rs:").nth(1))
        .filter_map(|rest| rest.split(':').next()?.parse::<usize>().ok())
        .filter_map(|n| owner.get(n.wrapping_sub(1)).copied())
        .collect();
    let passing: Vec<&String> = kept_out
        .iter()
        .filter(|i| !failing.contains(i.as_str()))
        .collect();
    let unlisted: Vec<&&str> = failing
        .iter()
        .filter(|i| !kept_out.iter().any(|k| k == *i))
        .collect();
    if !unlisted.is_empty() {
        return Err(format!(
            "checks that fail but are not differences (fix perf_event first): {unlisted:#?}"
        ));
    }
    if !passing.is_empty() {
        return Err(format!("differences whose check compiles against perf_event (narrow DIFFERENCES): {passing:#?}"));
    }
    println!(
        "dropin --audit: each of the {} checks kept out as a difference fails against perf_event",
        kept_out.len()
    );
    Ok(())
}

/// How many doc examples 0.5.1 has: a test fails unless each is found.
const DOC_EXAMPLES: usize = 25;

/// 0.5.1's doc examples (the fenced Rust blocks of its items' docs), each as the body of a
/// never-run function, the way rustdoc compiles them: hidden lines (`# `) in, `perf_event_open::`
/// spelled `krate::` so the file compiles against either crate.
fn doc_examples(doc: &Value) -> Result<String, String> {
    let mut found = Vec::new();
    if let Some(index) = doc["index"].as_object() {
        for item in index.values() {
            if item["crate_id"].as_u64() != Some(0) {
                continue;
            }
            let (Some(docs), Some(span)) = (item["docs"].as_str(), item["span"].as_object()) else {
                continue;
            };
            let file = span["filename"].as_str().unwrap_or_default().to_string();
            let line = span["begin"][0].as_u64().unwrap_or_default();
            let mut block: Option<Vec<String>> = None;
            let mut n = 0;
            for l in docs.lines() {
                let t = l.trim_start();
                match (&mut block, t.strip_prefix("```")) {
                    (None, Some(lang)) => {
                        let lang = lang.trim();
                        let rust =
                            lang.is_empty() || lang.split(',').map(str::trim).any(|w| w == "rust");
                        let skipped = lang
                            .split(',')
                            .map(str::trim)
                            .any(|w| w == "ignore" || w == "text");
                        if rust && !skipped {
                            block = Some(Vec::new());
                        }
                    }
                    (Some(body), Some(_)) => {
                        n += 1;
                        found.push((file.clone(), line, n, std::mem::take(body)));
                        block = None;
                    }
                    (Some(body), None) => {
                        // rustdoc's hidden lines are compiled: `# x` is `x`, `#` alone a blank.
                        let code = if t == "#" {
                            ""
                        } else if let Some(rest) = t.strip_prefix("# ") {
                            rest
                        } else {
                            l
                        };
                        body.push(code.replace("perf_event_open::", "krate::"));
                    }
                    (None, None) => {}
                }
            }
        }
    }
    found.sort();
    if found.len() != DOC_EXAMPLES {
        return Err(format!(
            "found {} doc examples in perf-event-open {VERSION}, expected {DOC_EXAMPLES}",
            found.len()
        ));
    }
    let mut out = format!(
        "// Generated by `cargo xtask dropin` from perf-event-open {VERSION}'s rustdoc JSON: its {DOC_EXAMPLES} doc\n\
         // examples, each the body of a function (as rustdoc compiles it), `perf_event_open::` spelled\n\
         // `krate::`. Included by tests/tests/dropin_peo_0_5.rs with `krate` naming a crate.\n"
    );
    for (i, (file, line, n, body)) in found.iter().enumerate() {
        let _ = write!(
            out,
            "\n// {file}:{line}, example {n}\npub fn doc_example_{i}() {{\n{}\n}}\n",
            body.join("\n")
        );
    }
    Ok(out)
}

/// Documents perf-event-open in the scratch crate and returns its rustdoc JSON.
fn rustdoc_json(fetch: bool) -> Result<String, String> {
    published_rustdoc_json(
        &Published {
            scratch: "dropin",
            package: "perf-event-open",
            version: VERSION,
            features: r#"["latest", "serde"]"#,
            offline_hint: "build the workspace first",
        },
        fetch,
    )
}

/// A published crate whose rustdoc JSON an xtask reads.
pub(crate) struct Published<'a> {
    /// The scratch crate's folder under `target/xtask/`.
    pub scratch: &'a str,
    /// The crate's package name.
    pub package: &'a str,
    /// Its exact version.
    pub version: &'a str,
    /// Its features, as a TOML array.
    pub features: &'a str,
    /// What makes its sources available offline (said when the offline build fails).
    pub offline_hint: &'a str,
}

/// Documents a published crate with nightly rustdoc (JSON) in a scratch crate of its own that
/// depends on it alone, offline unless `fetch`, and returns the JSON.
pub(crate) fn published_rustdoc_json(c: &Published<'_>, fetch: bool) -> Result<String, String> {
    let scratch = workspace_root().join("target/xtask").join(c.scratch);
    fs::create_dir_all(scratch.join("src")).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let manifest = format!(
        "[package]\nname = \"{}-scratch\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\n{} = {{ version = \"={}\", features = {} }}\n\n\
         # Not a member of the workspace above it.\n[workspace]\n",
        c.scratch, c.package, c.version, c.features
    );
    fs::write(scratch.join("Cargo.toml"), manifest).map_err(|e| e.to_string())?;
    fs::write(scratch.join("src/lib.rs"), "").map_err(|e| e.to_string())?;
    let mut cmd = Command::new("cargo");
    cmd.arg("+nightly")
        .args(["rustdoc", "--quiet", "-p", c.package, "--lib"])
        .arg("--manifest-path")
        .arg(scratch.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(scratch.join("target"));
    if !fetch {
        cmd.arg("--offline");
    }
    cmd.args(["--", "-Z", "unstable-options", "--output-format", "json"]);
    for var in [
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "RUSTC_WRAPPER",
        "CARGO_TARGET_DIR",
        "RUSTUP_TOOLCHAIN",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .map_err(|e| format!("cargo +nightly rustdoc: {e}"))?;
    if !status.success() {
        return Err(format!(
            "cargo +nightly rustdoc of {} {} failed ({status}){}",
            c.package,
            c.version,
            if fetch {
                String::new()
            } else {
                format!(
                    "; without --fetch it runs offline: {}, or pass --fetch",
                    c.offline_hint
                )
            }
        ));
    }
    let path = scratch.join(format!("target/doc/{}.json", c.package.replace('-', "_")));
    fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
}

/// One line of the list and its check.
struct Item {
    line: String,
    check: String,
}

fn render(items: &[Item]) -> Result<(String, String), String> {
    let mut list = format!(
        "# The public API of perf-event-open {VERSION}, from its rustdoc JSON (features latest, serde).\n\
         # Generated by `cargo xtask dropin`; tests/tests/dropin_peo_0_5.rs checks each line in perf_event.\n"
    );
    let mut checks = format!(
        "// Generated by `cargo xtask dropin` from perf-event-open {VERSION}'s rustdoc JSON: one check per line of\n\
         // items.txt, in its order. Included by tests/tests/dropin_peo_0_5.rs with `krate` naming a crate.\n"
    );
    let differences: HashMap<&str, &str> = DIFFERENCES.iter().copied().collect();
    for (key, _) in DIFFERENCES {
        let hit = match key.strip_prefix('~') {
            Some(k) => items.iter().any(|i| i.line.contains(k)),
            None => items.iter().any(|i| i.line == *key),
        };
        if !hit {
            return Err(format!(
                "DIFFERENCES entry {key:?} matches no item: remove or fix it"
            ));
        }
    }
    for (n, item) in items.iter().enumerate() {
        list.push_str(&item.line);
        list.push('\n');
        let _ = writeln!(checks, "\n// {}", item.line);
        let body = item.check.replace("#N", &n.to_string());
        let reason = differences.get(item.line.as_str()).copied().or_else(|| {
            DIFFERENCES
                .iter()
                .find(|(k, _)| k.strip_prefix('~').is_some_and(|k| item.line.contains(k)))
                .map(|(_, r)| *r)
        });
        match reason {
            Some(reason) => {
                let _ = writeln!(checks, "// DIFFERENCE: {reason}");
                for l in body.lines() {
                    let _ = writeln!(checks, "// {l}");
                }
            }
            None => {
                checks.push_str(&body);
                checks.push('\n');
            }
        }
    }
    Ok((list, checks))
}

fn kind(item: &Value) -> &str {
    item["inner"]
        .as_object()
        .and_then(|o| o.keys().next())
        .map_or("", String::as_str)
}

fn inner(item: &Value) -> &Value {
    &item["inner"][kind(item)]
}

fn id_key(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        _ => String::new(),
    }
}

const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where", "while",
    "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro", "override",
    "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

fn ident(name: &str) -> String {
    if KEYWORDS.contains(&name) {
        format!("r#{name}")
    } else {
        name.to_string()
    }
}

/// Paths of the external items 0.5.1's API names, from their definition path to one users write.
/// The definition paths are std's private module layout as rustdoc reports it, which changes between
/// nightlies (`alloc::rc::Rc` became `alloc::rcs::rc::Rc`, `std::io::error::Error` became
/// `core::io::error::Error`): both spellings are kept, and an unknown one is an error naming it.
const EXTERNAL: &[(&str, &str)] = &[
    ("alloc::borrow::ToOwned", "::std::borrow::ToOwned"),
    ("arrayvec::arrayvec::ArrayVec", "::arrayvec::ArrayVec"),
    ("alloc::boxed::Box", "::std::boxed::Box"),
    ("alloc::ffi::c_str::CString", "::std::ffi::CString"),
    ("alloc::rc::Rc", "::std::rc::Rc"),
    ("alloc::rcs::rc::Rc", "::std::rc::Rc"),
    ("alloc::sync::Arc", "::std::sync::Arc"),
    ("alloc::string::String", "::std::string::String"),
    ("alloc::vec::Vec", "::std::vec::Vec"),
    ("core::any::Any", "::core::any::Any"),
    ("core::borrow::Borrow", "::core::borrow::Borrow"),
    ("core::borrow::BorrowMut", "::core::borrow::BorrowMut"),
    ("core::clone::Clone", "::core::clone::Clone"),
    ("core::cmp::Eq", "::core::cmp::Eq"),
    ("core::cmp::PartialEq", "::core::cmp::PartialEq"),
    ("core::cmp::Ord", "::core::cmp::Ord"),
    ("core::cmp::PartialOrd", "::core::cmp::PartialOrd"),
    ("core::convert::From", "::core::convert::From"),
    ("core::convert::Into", "::core::convert::Into"),
    ("core::convert::TryFrom", "::core::convert::TryFrom"),
    ("core::convert::TryInto", "::core::convert::TryInto"),
    ("core::default::Default", "::core::default::Default"),
    ("core::error::Error", "::core::error::Error"),
    ("core::ffi::c_str::CStr", "::core::ffi::CStr"),
    ("core::fmt::Debug", "::core::fmt::Debug"),
    ("core::fmt::Display", "::core::fmt::Display"),
    ("core::fmt::Formatter", "::core::fmt::Formatter"),
    ("core::fmt::Result", "::core::fmt::Result"),
    ("core::future::future::Future", "::core::future::Future"),
    ("core::hash::Hash", "::core::hash::Hash"),
    ("core::hash::Hasher", "::core::hash::Hasher"),
    (
        "core::iter::traits::collect::IntoIterator",
        "::core::iter::IntoIterator",
    ),
    (
        "core::iter::traits::iterator::Iterator",
        "::core::iter::Iterator",
    ),
    ("core::marker::Copy", "::core::marker::Copy"),
    ("core::marker::Send", "::core::marker::Send"),
    ("core::marker::Sized", "::core::marker::Sized"),
    ("core::marker::Sync", "::core::marker::Sync"),
    ("core::marker::Unpin", "::core::marker::Unpin"),
    (
        "core::num::nonzero::NonZeroUsize",
        "::core::num::NonZeroUsize",
    ),
    ("core::ops::drop::Drop", "::core::ops::Drop"),
    ("core::ops::function::Fn", "::core::ops::Fn"),
    ("core::ops::function::FnMut", "::core::ops::FnMut"),
    ("core::ops::function::FnOnce", "::core::ops::FnOnce"),
    ("core::ops::deref::Deref", "::core::ops::Deref"),
    ("core::option::Option", "::core::option::Option"),
    (
        "core::panic::unwind_safe::RefUnwindSafe",
        "::core::panic::RefUnwindSafe",
    ),
    (
        "core::panic::unwind_safe::UnwindSafe",
        "::core::panic::UnwindSafe",
    ),
    ("core::pin::Pin", "::core::pin::Pin"),
    ("core::result::Result", "::core::result::Result"),
    ("core::task::poll::Poll", "::core::task::Poll"),
    ("core::task::wake::Context", "::core::task::Context"),
    ("core::time::Duration", "::core::time::Duration"),
    ("futures_core::stream::Stream", "::futures::stream::Stream"),
    ("serde_core::de::Deserialize", "::serde::Deserialize"),
    (
        "serde_core::de::DeserializeOwned",
        "::serde::de::DeserializeOwned",
    ),
    ("serde_core::de::Deserializer", "::serde::Deserializer"),
    ("serde_core::ser::Serialize", "::serde::Serialize"),
    ("serde_core::ser::Serializer", "::serde::Serializer"),
    ("std::fs::File", "::std::fs::File"),
    ("std::io::error::Error", "::std::io::Error"),
    ("core::io::error::Result", "::std::io::Result"),
    ("core::io::error::Error", "::std::io::Error"),
    ("std::io::error::Result", "::std::io::Result"),
    ("std::os::fd::owned::AsFd", "::std::os::fd::AsFd"),
    (
        "std::os::fd::owned::BorrowedFd",
        "::std::os::fd::BorrowedFd",
    ),
    ("std::os::fd::owned::OwnedFd", "::std::os::fd::OwnedFd"),
    ("std::os::fd::raw::AsRawFd", "::std::os::fd::AsRawFd"),
    ("std::os::fd::raw::IntoRawFd", "::std::os::fd::IntoRawFd"),
];

/// The path users write for an external item's definition path (`std::io::error::Error`).
fn public_external(def: &str) -> Option<&'static str> {
    EXTERNAL.iter().find(|(d, _)| *d == def).map(|(_, to)| *to)
}

/// Traits whose impls are not part of a crate's API: unstable to name, or implied by another impl.
const SKIPPED_TRAITS: &[&str] = &[
    "core::marker::Freeze",
    "core::marker::UnsafeUnpin",
    "core::marker::StructuralPartialEq",
    // A type that implements Drop cannot be destructured; no code can rely on the impl itself.
    "core::ops::drop::Drop",
];

/// How a type is written: in the list (as 0.5.1's source spells external paths) or in a check.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    List,
    Check,
}

struct Gen<'a> {
    index: &'a serde_json::Map<String, Value>,
    paths: &'a serde_json::Map<String, Value>,
    root: String,
    /// Every public path of each local item, in the order found; the first is the one used.
    public: BTreeMap<String, Vec<Vec<String>>>,
    /// Modules in the order found.
    modules: Vec<Vec<String>>,
    /// Re-exports whose target is not in the index.
    opaque_uses: Vec<Vec<String>>,
}

/// What a type is rendered within: `Self`, and lifetimes to replace.
#[derive(Default, Clone)]
struct Ctx {
    self_ty: Option<String>,
    lifetimes: HashMap<String, String>,
    /// What an elided lifetime (`&T`, `'_`) becomes, where it cannot stay elided.
    elided: Option<String>,
}

impl<'a> Gen<'a> {
    fn new(doc: &'a Value) -> Result<Self, String> {
        let index = doc["index"]
            .as_object()
            .ok_or("rustdoc JSON without an index")?;
        let paths = doc["paths"]
            .as_object()
            .ok_or("rustdoc JSON without paths")?;
        let format = doc["format_version"].as_u64().unwrap_or(0);
        if format < 45 {
            return Err(format!(
                "rustdoc JSON format {format} is older than this reader (45 or newer)"
            ));
        }
        Ok(Gen {
            index,
            paths,
            root: id_key(&doc["root"]),
            public: BTreeMap::new(),
            modules: Vec::new(),
            opaque_uses: Vec::new(),
        })
    }

    fn item(&self, id: &str) -> Result<&'a Value, String> {
        self.index
            .get(id)
            .ok_or_else(|| format!("rustdoc JSON: no item {id}"))
    }

    fn walk(
        &mut self,
        module: &str,
        prefix: &[String],
        seen: &mut BTreeSet<String>,
    ) -> Result<(), String> {
        if !seen.insert(format!("{module}@{}", prefix.join("::"))) {
            return Ok(());
        }
        let m = self.item(module)?;
        let items: Vec<String> = inner(m)["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(id_key)
            .collect();
        for id in items {
            let it = self.item(&id)?;
            if it["visibility"] != "public" {
                continue;
            }
            match kind(it) {
                "module" => {
                    let mut p = prefix.to_vec();
                    p.push(it["name"].as_str().unwrap_or_default().to_string());
                    self.modules.push(p.clone());
                    self.walk(&id, &p, seen)?;
                }
                "use" => {
                    let u = inner(it);
                    let target = id_key(&u["id"]);
                    if u["is_glob"].as_bool() == Some(true) {
                        if !target.is_empty() && self.index.contains_key(&target) {
                            self.walk(&target, prefix, seen)?;
                        }
                        continue;
                    }
                    let mut p = prefix.to_vec();
                    p.push(u["name"].as_str().unwrap_or_default().to_string());
                    match self.index.get(&target) {
                        Some(t) if kind(t) == "module" => {
                            self.modules.push(p.clone());
                            self.walk(&target, &p, seen)?;
                        }
                        Some(_) => self.public.entry(target).or_default().push(p),
                        None => self.opaque_uses.push(p),
                    }
                }
                "impl" => {}
                _ => {
                    let mut p = prefix.to_vec();
                    p.push(it["name"].as_str().unwrap_or_default().to_string());
                    self.public.entry(id).or_default().push(p);
                }
            }
        }
        Ok(())
    }

    /// The path of the item `id` as a check (`krate::a::B`, `::std::io::Error`) or the list writes it.
    fn path_of(&self, id: &str, written: &str, mode: Mode) -> Result<String, String> {
        if let Some(ps) = self.public.get(id) {
            let p = ps[0].join("::");
            return Ok(match mode {
                Mode::Check => format!("krate::{p}"),
                Mode::List => p,
            });
        }
        let summary = self
            .paths
            .get(id)
            .ok_or_else(|| format!("no path for item {id} ({written})"))?;
        let def: Vec<&str> = summary["path"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let def = def.join("::");
        if summary["crate_id"].as_u64() == Some(0) {
            return Err(format!(
                "{def} is named in the public API but is not public itself"
            ));
        }
        match mode {
            Mode::List => Ok(written.to_string()),
            Mode::Check => public_external(&def).map(String::from).ok_or_else(|| {
                format!("external path {def} is not in EXTERNAL (xtask/src/dropin.rs)")
            }),
        }
    }

    fn def_path(&self, id: &str) -> String {
        self.paths
            .get(id)
            .map(|s| {
                s["path"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("::")
            })
            .unwrap_or_default()
    }

    fn lifetime(&self, l: &str, cx: &Ctx, mode: Mode) -> String {
        if l == "'_" && mode == Mode::Check {
            if let Some(e) = &cx.elided {
                return e.clone();
            }
        }
        cx.lifetimes
            .get(l)
            .cloned()
            .unwrap_or_else(|| l.to_string())
    }

    fn ty(&self, t: &Value, cx: &Ctx, mode: Mode) -> Result<String, String> {
        let (k, v) = t
            .as_object()
            .and_then(|o| o.iter().next())
            .ok_or_else(|| format!("type {t}"))?;
        Ok(match k.as_str() {
            "resolved_path" => self.path(v, cx, mode)?,
            "generic" => {
                let g = v.as_str().unwrap_or_default();
                match (g, &cx.self_ty, mode) {
                    ("Self", Some(s), Mode::Check) => s.clone(),
                    _ => g.to_string(),
                }
            }
            "primitive" => v.as_str().unwrap_or_default().to_string(),
            "tuple" => {
                let parts = v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| self.ty(t, cx, mode))
                    .collect::<Result<Vec<_>, _>>()?;
                if parts.len() == 1 {
                    format!("({},)", parts[0])
                } else {
                    format!("({})", parts.join(", "))
                }
            }
            "slice" => format!("[{}]", self.ty(v, cx, mode)?),
            "array" => format!(
                "[{}; {}]",
                self.ty(&v["type"], cx, mode)?,
                v["len"].as_str().unwrap_or_default()
            ),
            "infer" => "_".to_string(),
            "raw_pointer" => format!(
                "*{} {}",
                if v["is_mutable"].as_bool() == Some(true) {
                    "mut"
                } else {
                    "const"
                },
                self.ty(&v["type"], cx, mode)?
            ),
            "borrowed_ref" => {
                let lt = match (v["lifetime"].as_str(), &cx.elided) {
                    (Some(l), _) => format!("{} ", self.lifetime(l, cx, mode)),
                    (None, Some(e)) if mode == Mode::Check => format!("{e} "),
                    (None, _) => String::new(),
                };
                let m = if v["is_mutable"].as_bool() == Some(true) {
                    "mut "
                } else {
                    ""
                };
                format!("&{lt}{m}{}", self.ty(&v["type"], cx, mode)?)
            }
            "impl_trait" => format!("impl {}", self.bounds(v, cx, mode)?),
            "dyn_trait" => {
                let mut parts = Vec::new();
                for pt in v["traits"].as_array().into_iter().flatten() {
                    parts.push(format!(
                        "{}{}",
                        self.hrtb(&pt["generic_params"], cx, mode)?,
                        self.path(&pt["trait"], cx, mode)?
                    ));
                }
                if let Some(l) = v["lifetime"].as_str() {
                    parts.push(self.lifetime(l, cx, mode));
                }
                format!("dyn {}", parts.join(" + "))
            }
            "qualified_path" => {
                let self_ty = self.ty(&v["self_type"], cx, mode)?;
                let name = v["name"].as_str().unwrap_or_default();
                let args = self.args(&v["args"], cx, mode)?;
                match v.get("trait").filter(|t| !t.is_null()) {
                    Some(tr) => {
                        format!("<{self_ty} as {}>::{name}{args}", self.path(tr, cx, mode)?)
                    }
                    None => format!("{self_ty}::{name}{args}"),
                }
            }
            "function_pointer" => {
                let sig = &v["sig"];
                let ins = sig["inputs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| self.ty(&p[1], cx, mode))
                    .collect::<Result<Vec<_>, _>>()?;
                let out = match sig.get("output").filter(|o| !o.is_null()) {
                    Some(o) => format!(" -> {}", self.ty(o, cx, mode)?),
                    None => String::new(),
                };
                format!(
                    "{}fn({}){out}",
                    self.hrtb(&v["generic_params"], cx, mode)?,
                    ins.join(", ")
                )
            }
            other => return Err(format!("type kind {other} not handled: {t}")),
        })
    }

    fn path(&self, p: &Value, cx: &Ctx, mode: Mode) -> Result<String, String> {
        let id = id_key(&p["id"]);
        let written = p["path"].as_str().unwrap_or_default();
        Ok(format!(
            "{}{}",
            self.path_of(&id, written, mode)?,
            self.args(&p["args"], cx, mode)?
        ))
    }

    fn args(&self, a: &Value, cx: &Ctx, mode: Mode) -> Result<String, String> {
        if a.is_null() {
            return Ok(String::new());
        }
        if let Some(ab) = a.get("angle_bracketed") {
            let mut parts = Vec::new();
            for arg in ab["args"].as_array().into_iter().flatten() {
                if let Some(l) = arg.get("lifetime").and_then(Value::as_str) {
                    parts.push(self.lifetime(l, cx, mode));
                } else if let Some(t) = arg.get("type") {
                    parts.push(self.ty(t, cx, mode)?);
                } else if let Some(c) = arg.get("const") {
                    parts.push(c["expr"].as_str().unwrap_or("_").to_string());
                } else {
                    parts.push("_".to_string());
                }
            }
            for c in ab["constraints"].as_array().into_iter().flatten() {
                let name = c["name"].as_str().unwrap_or_default();
                let cargs = self.args(&c["args"], cx, mode)?;
                let b = &c["binding"];
                if let Some(eq) = b.get("equality") {
                    let rhs = match eq.get("type") {
                        Some(t) => self.ty(t, cx, mode)?,
                        None => eq["constant"]["expr"].as_str().unwrap_or("_").to_string(),
                    };
                    parts.push(format!("{name}{cargs} = {rhs}"));
                } else if let Some(bs) = b.get("constraint") {
                    parts.push(format!("{name}{cargs}: {}", self.bounds(bs, cx, mode)?));
                }
            }
            return Ok(if parts.is_empty() {
                String::new()
            } else {
                format!("<{}>", parts.join(", "))
            });
        }
        if let Some(pa) = a.get("parenthesized") {
            let ins = pa["inputs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| self.ty(t, cx, mode))
                .collect::<Result<Vec<_>, _>>()?;
            let out = match pa.get("output").filter(|o| !o.is_null()) {
                Some(o) => format!(" -> {}", self.ty(o, cx, mode)?),
                None => String::new(),
            };
            return Ok(format!("({}){out}", ins.join(", ")));
        }
        Err(format!("generic args {a}"))
    }

    fn hrtb(&self, params: &Value, cx: &Ctx, mode: Mode) -> Result<String, String> {
        let ps = params.as_array().cloned().unwrap_or_default();
        if ps.is_empty() {
            return Ok(String::new());
        }
        let names: Vec<String> = ps
            .iter()
            .map(|p| p["name"].as_str().unwrap_or_default().to_string())
            .collect();
        let _ = (cx, mode);
        Ok(format!("for<{}> ", names.join(", ")))
    }

    fn bounds(&self, bs: &Value, cx: &Ctx, mode: Mode) -> Result<String, String> {
        let mut parts = Vec::new();
        for b in bs.as_array().into_iter().flatten() {
            if let Some(tb) = b.get("trait_bound") {
                let m = match tb["modifier"].as_str() {
                    Some("maybe") => "?",
                    _ => "",
                };
                parts.push(format!(
                    "{m}{}{}",
                    self.hrtb(&tb["generic_params"], cx, mode)?,
                    self.path(&tb["trait"], cx, mode)?
                ));
            } else if let Some(l) = b.get("outlives").and_then(Value::as_str) {
                parts.push(self.lifetime(l, cx, mode));
            } else if let Some(u) = b.get("use") {
                let names: Vec<String> = u
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|x| {
                        x.get("lifetime")
                            .or(x.get("param"))
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string()
                    })
                    .collect();
                parts.push(format!("use<{}>", names.join(", ")));
            }
        }
        Ok(parts.join(" + "))
    }

    /// `<'a, T: Bound>` (without `impl Trait` arguments) and the where clause, for a wrapper.
    fn generics(&self, gens: &[&Value], cx: &Ctx, mode: Mode) -> Result<(String, String), String> {
        let mut lts = Vec::new();
        let mut tys = Vec::new();
        let mut preds = Vec::new();
        for g in gens {
            for p in g["params"].as_array().into_iter().flatten() {
                let name = p["name"].as_str().unwrap_or_default();
                let k = &p["kind"];
                if let Some(l) = k.get("lifetime") {
                    if cx.lifetimes.contains_key(name) {
                        continue;
                    }
                    let outlives: Vec<String> = l["outlives"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect();
                    lts.push(if outlives.is_empty() {
                        name.to_string()
                    } else {
                        format!("{name}: {}", outlives.join(" + "))
                    });
                } else if let Some(t) = k.get("type") {
                    if t["is_synthetic"].as_bool() == Some(true) {
                        continue;
                    }
                    let b = self.bounds(&t["bounds"], cx, mode)?;
                    tys.push(if b.is_empty() {
                        name.to_string()
                    } else {
                        format!("{name}: {b}")
                    });
                } else if let Some(c) = k.get("const") {
                    tys.push(format!("const {name}: {}", self.ty(&c["type"], cx, mode)?));
                }
            }
            for w in g["where_predicates"].as_array().into_iter().flatten() {
                if let Some(bp) = w.get("bound_predicate") {
                    let b = self.bounds(&bp["bounds"], cx, mode)?;
                    if !b.is_empty() {
                        preds.push(format!(
                            "{}{}: {b}",
                            self.hrtb(&bp["generic_params"], cx, mode)?,
                            self.ty(&bp["type"], cx, mode)?
                        ));
                    }
                } else if let Some(lp) = w.get("lifetime_predicate") {
                    let outlives: Vec<String> = lp["outlives"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect();
                    preds.push(format!(
                        "{}: {}",
                        lp["lifetime"].as_str().unwrap_or_default(),
                        outlives.join(" + ")
                    ));
                } else if let Some(eq) = w.get("eq_predicate") {
                    preds.push(format!(
                        "{} == {}",
                        self.ty(&eq["lhs"], cx, mode)?,
                        self.ty(&eq["rhs"]["type"], cx, mode)?
                    ));
                }
            }
        }
        lts.extend(tys);
        let params = if lts.is_empty() {
            String::new()
        } else {
            format!("<{}>", lts.join(", "))
        };
        let wh = if preds.is_empty() {
            String::new()
        } else {
            format!(" where {}", preds.join(", "))
        };
        Ok((params, wh))
    }

    /// The type `Self` of a struct or enum with its own generic parameters.
    fn self_ty(&self, item: &Value, path: &str, cx: &Ctx) -> String {
        let mut args = Vec::new();
        for p in inner(item)["generics"]["params"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let name = p["name"].as_str().unwrap_or_default();
            args.push(
                cx.lifetimes
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| name.to_string()),
            );
        }
        if args.is_empty() {
            path.to_string()
        } else {
            format!("{path}<{}>", args.join(", "))
        }
    }

    fn is_non_exhaustive(item: &Value) -> bool {
        item["attrs"].to_string().contains("non_exhaustive")
    }

    fn run(mut self) -> Result<Vec<Item>, String> {
        let root = self.root.clone();
        self.walk(&root, &[], &mut BTreeSet::new())?;
        let mut items = Vec::new();
        for m in &self.modules {
            let p = m.join("::");
            items.push(Item {
                line: format!("mod {p}"),
                check: format!("#[allow(unused_imports)]\nuse krate::{p} as _;"),
            });
        }
        for p in &self.opaque_uses {
            let p = p.join("::");
            items.push(Item {
                line: format!("use {p}"),
                check: format!("#[allow(unused_imports)]\nuse krate::{p} as _;"),
            });
        }
        let public = self.public.clone();
        for (id, paths) in &public {
            let item = self.item(id)?;
            let k = kind(item);
            for p in paths {
                let p = p.join("::");
                let (gp, wh) =
                    self.generics(&[&inner(item)["generics"]], &Ctx::default(), Mode::Check)?;
                let (ty_line, ty_check) = match k {
                    "struct" | "enum" | "union" | "type_alias" => (
                        format!("{k} {p}"),
                        format!(
                            "#[allow(unused_imports)]\nuse krate::{p} as _;\nfn _type_#N{gp}(_: ::core::marker::PhantomData<{}>){wh} {{}}",
                            self.self_ty(item, &format!("krate::{p}"), &Ctx::default())
                        ),
                    ),
                    "function" | "constant" | "static" | "trait" | "macro" | "module" => {
                        (format!("{k} {p}"), format!("#[allow(unused_imports)]\nuse krate::{p} as _;"))
                    }
                    _ => continue,
                };
                items.push(Item {
                    line: ty_line,
                    check: ty_check,
                });
            }
            let path = paths[0].join("::");
            match k {
                "struct" => self.structure(item, &path, &mut items)?,
                "enum" => self.enumeration(item, &path, &mut items)?,
                "function" => {
                    let sig = self.function(item, &path, None, &[], &Ctx::default(), &[])?;
                    items.push(sig);
                }
                _ => {}
            }
        }
        // Trait impls and inherent impls, whoever's list holds them.
        for (id, it) in self.index {
            if kind(it) != "impl" || it["crate_id"].as_u64() != Some(0) {
                continue;
            }
            self.implementation(id, it, &mut items)?;
        }
        items.sort_by(|a, b| a.line.cmp(&b.line));
        items.dedup_by(|a, b| a.line == b.line);
        Ok(items)
    }

    fn structure(&self, item: &Value, path: &str, items: &mut Vec<Item>) -> Result<(), String> {
        let s = inner(item);
        let cx = Ctx::default();
        let (gp, wh) = self.generics(&[&s["generics"]], &cx, Mode::Check)?;
        let self_check = self.self_ty(item, &format!("krate::{path}"), &cx);
        let kind = &s["kind"];
        if let Some(plain) = kind.get("plain") {
            let mut all = Vec::new();
            for f in plain["fields"].as_array().into_iter().flatten() {
                let f = self.item(&id_key(f))?;
                let name = ident(f["name"].as_str().unwrap_or_default());
                let t = inner(f);
                let (tl, tc) = (self.ty(t, &cx, Mode::List)?, self.ty(t, &cx, Mode::Check)?);
                items.push(Item {
                    line: format!("field {path}::{name}: {tl}"),
                    check: format!(
                        "fn _field_#N{gp}(x: {self_check}) -> {tc}{wh} {{\n    let krate::{path} {{ {name}, .. }} = x;\n    {name}\n}}"
                    ),
                });
                all.push((name, tl, tc));
            }
            if plain["has_stripped_fields"].as_bool() != Some(true)
                && !Self::is_non_exhaustive(item)
            {
                let line = all
                    .iter()
                    .map(|(n, t, _)| format!("{n}: {t}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let args = all
                    .iter()
                    .map(|(n, _, t)| format!("{n}: {t}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let names = all
                    .iter()
                    .map(|(n, _, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                items.push(Item {
                    line: format!("literal {path} {{ {line} }}"),
                    check: format!("fn _literal_#N{gp}({args}) -> {self_check}{wh} {{\n    krate::{path} {{ {names} }}\n}}"),
                });
            }
        } else if let Some(tuple) = kind.get("tuple") {
            let fields = tuple.as_array().cloned().unwrap_or_default();
            let mut all = Vec::new();
            for (i, f) in fields.iter().enumerate() {
                if f.is_null() {
                    continue;
                }
                let f = self.item(&id_key(f))?;
                let t = inner(f);
                let (tl, tc) = (self.ty(t, &cx, Mode::List)?, self.ty(t, &cx, Mode::Check)?);
                let skip = "_, ".repeat(i);
                items.push(Item {
                    line: format!("field {path}::{i}: {tl}"),
                    check: format!("fn _field_#N{gp}(x: {self_check}) -> {tc}{wh} {{\n    let krate::{path}({skip}f, ..) = x;\n    f\n}}"),
                });
                all.push((tl, tc));
            }
            if all.len() == fields.len() && !Self::is_non_exhaustive(item) {
                let line = all
                    .iter()
                    .map(|(t, _)| t.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                let args = all
                    .iter()
                    .enumerate()
                    .map(|(i, (_, t))| format!("f{i}: {t}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let names = (0..all.len())
                    .map(|i| format!("f{i}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                items.push(Item {
                    line: format!("literal {path}({line})"),
                    check: format!("fn _literal_#N{gp}({args}) -> {self_check}{wh} {{\n    krate::{path}({names})\n}}"),
                });
            }
        } else if kind == "unit" || kind.get("unit").is_some() {
            items.push(Item {
                line: format!("literal {path}"),
                check: format!("fn _literal_#N() -> krate::{path} {{\n    krate::{path}\n}}"),
            });
        }
        Ok(())
    }

    fn enumeration(&self, item: &Value, path: &str, items: &mut Vec<Item>) -> Result<(), String> {
        let e = inner(item);
        let cx = Ctx::default();
        let (gp, wh) = self.generics(&[&e["generics"]], &cx, Mode::Check)?;
        let self_check = self.self_ty(item, &format!("krate::{path}"), &cx);
        let mut arms = Vec::new();
        for v in e["variants"].as_array().into_iter().flatten() {
            let v = self.item(&id_key(v))?;
            let name = ident(v["name"].as_str().unwrap_or_default());
            let vk = &inner(v)["kind"];
            let ne = Self::is_non_exhaustive(v);
            if vk == "plain" || vk.get("plain").is_some() {
                items.push(Item {
                    line: format!("variant {path}::{name}"),
                    check: format!(
                        "#[allow(unreachable_patterns)]\nfn _variant_#N{gp}(x: {self_check}) -> ::core::option::Option<{self_check}>{wh} {{\n    match x {{\n        krate::{path}::{name} => ::core::option::Option::Some(krate::{path}::{name}),\n        _ => ::core::option::Option::None,\n    }}\n}}"
                    ),
                });
                arms.push(format!("krate::{path}::{name} => {{}}"));
            } else if let Some(tuple) = vk.get("tuple") {
                let fields = tuple.as_array().cloned().unwrap_or_default();
                let mut tl = Vec::new();
                let mut tc = Vec::new();
                for f in &fields {
                    if f.is_null() {
                        tl.push("_".to_string());
                        tc.push(None);
                        continue;
                    }
                    let t = inner(self.item(&id_key(f))?);
                    tl.push(self.ty(t, &cx, Mode::List)?);
                    tc.push(Some(self.ty(t, &cx, Mode::Check)?));
                }
                let known: Vec<(usize, &String)> = tc
                    .iter()
                    .enumerate()
                    .filter_map(|(i, t)| t.as_ref().map(|t| (i, t)))
                    .collect();
                let pat = (0..fields.len())
                    .map(|i| {
                        if tc[i].is_some() {
                            format!("f{i}")
                        } else {
                            "_".into()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let tup_ty = format!(
                    "({})",
                    known
                        .iter()
                        .map(|(_, t)| format!("{t}, "))
                        .collect::<String>()
                );
                let tup = format!(
                    "({})",
                    known
                        .iter()
                        .map(|(i, _)| format!("f{i}, "))
                        .collect::<String>()
                );
                let rest = if ne { ", .." } else { "" };
                let mut check = format!(
                    "#[allow(unreachable_patterns)]\nfn _variant_#N{gp}(x: {self_check}) -> ::core::option::Option<{tup_ty}>{wh} {{\n    match x {{\n        krate::{path}::{name}({pat}{rest}) => ::core::option::Option::Some({tup}),\n        _ => ::core::option::Option::None,\n    }}\n}}"
                );
                if !ne && known.len() == fields.len() {
                    let args = known
                        .iter()
                        .map(|(i, t)| format!("f{i}: {t}"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let _ = write!(check, "\nfn _variant_new_#N{gp}({args}) -> {self_check}{wh} {{\n    krate::{path}::{name}({pat})\n}}");
                }
                items.push(Item {
                    line: format!("variant {path}::{name}({})", tl.join(", ")),
                    check,
                });
                arms.push(format!("krate::{path}::{name}(..) => {{}}"));
            } else if let Some(st) = vk.get("struct") {
                let mut fl = Vec::new();
                let mut fc = Vec::new();
                for f in st["fields"].as_array().into_iter().flatten() {
                    let f = self.item(&id_key(f))?;
                    let n = ident(f["name"].as_str().unwrap_or_default());
                    fl.push(format!("{n}: {}", self.ty(inner(f), &cx, Mode::List)?));
                    fc.push((n, self.ty(inner(f), &cx, Mode::Check)?));
                }
                let names = fc.iter().map(|(n, _)| format!("{n}, ")).collect::<String>();
                let tup_ty = format!(
                    "({})",
                    fc.iter().map(|(_, t)| format!("{t}, ")).collect::<String>()
                );
                let mut check = format!(
                    "#[allow(unreachable_patterns)]\nfn _variant_#N{gp}(x: {self_check}) -> ::core::option::Option<{tup_ty}>{wh} {{\n    match x {{\n        krate::{path}::{name} {{ {names}.. }} => ::core::option::Option::Some(({names})),\n        _ => ::core::option::Option::None,\n    }}\n}}"
                );
                if !ne && st["has_stripped_fields"].as_bool() != Some(true) {
                    let args = fc
                        .iter()
                        .map(|(n, t)| format!("{n}: {t}"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let _ = write!(check, "\nfn _variant_new_#N{gp}({args}) -> {self_check}{wh} {{\n    krate::{path}::{name} {{ {names}}}\n}}");
                }
                items.push(Item {
                    line: format!("variant {path}::{name} {{ {} }}", fl.join(", ")),
                    check,
                });
                arms.push(format!("krate::{path}::{name} {{ .. }} => {{}}"));
            }
        }
        if !Self::is_non_exhaustive(item) {
            items.push(Item {
                line: format!("match {path} (exhaustive)"),
                check: format!("fn _match_#N{gp}(x: {self_check}){wh} {{\n    match x {{\n        {}\n    }}\n}}", arms.join("\n        ")),
            });
        }
        Ok(())
    }

    /// A wrapper with the function's signature that calls it (`owner`: the impl's self type and
    /// generics for a method).
    fn function(
        &self,
        item: &Value,
        path: &str,
        owner: Option<&str>,
        impl_gens: &[&Value],
        cx: &Ctx,
        extra_lts: &[String],
    ) -> Result<Item, String> {
        let f = inner(item);
        let sig = &f["sig"];
        let name = ident(item["name"].as_str().unwrap_or_default());
        let mut gens: Vec<&Value> = impl_gens.to_vec();
        gens.push(&f["generics"]);
        let (gp, wh) = self.generics(&gens, cx, Mode::Check)?;
        let (gl, whl) = self.generics(&[&f["generics"]], cx, Mode::List)?;
        // A method's elided output lifetimes are its receiver's: name it `'s` in the wrapper.
        let by_ref = sig["inputs"]
            .as_array()
            .and_then(|i| i.first())
            .is_some_and(|i| {
                i[0] == "self"
                    && self
                        .ty(&i[1], cx, Mode::Check)
                        .is_ok_and(|t| t.contains('&'))
            });
        let mut lts: Vec<String> = extra_lts.to_vec();
        if by_ref {
            lts.insert(0, "'s".to_string());
        }
        let gp = match (lts.is_empty(), gp.is_empty()) {
            (true, _) => gp,
            (false, true) => format!("<{}>", lts.join(", ")),
            (false, false) => format!("<{}, {}", lts.join(", "), &gp[1..]),
        };
        let out_cx = Ctx {
            elided: by_ref.then(|| "'s".to_string()),
            ..cx.clone()
        };
        let mut list_args = Vec::new();
        let mut check_args = Vec::new();
        let mut call_args = Vec::new();
        for (i, input) in sig["inputs"].as_array().into_iter().flatten().enumerate() {
            let n = input[0].as_str().unwrap_or_default();
            let t = &input[1];
            let tl = self.ty(t, cx, Mode::List)?;
            let tc = self.ty(t, cx, Mode::Check)?;
            if n == "self" {
                list_args.push(match tl.as_str() {
                    "Self" => "self".to_string(),
                    "&Self" => "&self".to_string(),
                    "&mut Self" => "&mut self".to_string(),
                    other => format!("self: {other}"),
                });
                check_args.push(format!(
                    "this: {}",
                    if by_ref {
                        tc.replacen('&', "&'s ", 1)
                    } else {
                        tc
                    }
                ));
                call_args.push("this".to_string());
            } else {
                list_args.push(format!("{}: {tl}", if n.is_empty() { "_" } else { n }));
                check_args.push(format!("a{i}: {tc}"));
                call_args.push(format!("a{i}"));
            }
        }
        let out = sig.get("output").filter(|o| !o.is_null());
        let (ol, oc) = match out {
            Some(o) => (
                format!(" -> {}", self.ty(o, cx, Mode::List)?),
                format!(" -> {}", self.ty(o, &out_cx, Mode::Check)?),
            ),
            None => (String::new(), String::new()),
        };
        let h = &f["header"];
        let is_async = h["is_async"].as_bool() == Some(true);
        let is_unsafe = h["is_unsafe"].as_bool() == Some(true);
        let is_const = h["is_const"].as_bool() == Some(true);
        let mut call = match owner {
            Some(o) => format!("{o}::{name}({})", call_args.join(", ")),
            None => format!("krate::{path}({})", call_args.join(", ")),
        };
        if is_async {
            call.push_str(".await");
        }
        if is_unsafe {
            call = format!("unsafe {{ {call} }}");
        }
        // `Result<T, io::Error>`: ours returns its own error, which converts with `?`.
        if let Some(o) = out {
            if self.is_io_result(o) {
                call = format!("::core::result::Result::Ok({call}?)");
            }
        }
        let quals = format!(
            "{}{}{}",
            if is_const { "const " } else { "" },
            if is_async { "async " } else { "" },
            if is_unsafe { "unsafe " } else { "" }
        );
        let fn_path = match owner {
            Some(_) => path.to_string(),
            None => path.to_string(),
        };
        Ok(Item {
            line: format!("fn {fn_path}{gl}({}){ol}{whl}{}", list_args.join(", "), if quals.is_empty() { String::new() } else { format!(" [{}]", quals.trim()) }),
            check: format!(
                "#[allow(clippy::too_many_arguments, clippy::needless_lifetimes)]\n{}fn _fn_#N{gp}({}){oc}{wh} {{\n    {call}\n}}",
                if is_async { "async " } else if is_unsafe { "unsafe " } else { "" },
                check_args.join(", ")
            ),
        })
    }

    fn is_io_result(&self, t: &Value) -> bool {
        let Some(rp) = t.get("resolved_path") else {
            return false;
        };
        let def = self.def_path(&id_key(&rp["id"]));
        if public_external(&def) == Some("::std::io::Result") {
            return true;
        }
        if public_external(&def) == Some("::core::result::Result") {
            let args = rp["args"]["angle_bracketed"]["args"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if let Some(e) = args
                .get(1)
                .and_then(|a| a.get("type"))
                .and_then(|t| t.get("resolved_path"))
            {
                return public_external(&self.def_path(&id_key(&e["id"])))
                    == Some("::std::io::Error");
            }
        }
        false
    }

    fn implementation(&self, id: &str, it: &Value, items: &mut Vec<Item>) -> Result<(), String> {
        let im = inner(it);
        if !im["blanket_impl"].is_null() || im["is_negative"].as_bool() == Some(true) {
            return Ok(());
        }
        // Only impls for types of the public API.
        let for_ty = &im["for"];
        let Some(rp) = for_ty.get("resolved_path") else {
            return Ok(());
        };
        let for_id = id_key(&rp["id"]);
        if self.paths.get(&for_id).and_then(|p| p["crate_id"].as_u64()) == Some(0)
            && !self.public.contains_key(&for_id)
        {
            return Ok(());
        }
        let _ = id;
        let lt_params: Vec<String> = im["generics"]["params"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["kind"].get("lifetime").is_some())
            .filter_map(|p| p["name"].as_str().map(String::from))
            .collect();
        let has_type_params = im["generics"]["params"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["kind"].get("lifetime").is_none());
        match im.get("trait").filter(|t| !t.is_null()) {
            None => {
                // Inherent: its methods and associated constants.
                // `impl X<'_>`: the anonymous lifetimes become named ones of each wrapper.
                let mut self_check = self.ty(for_ty, &Ctx::default(), Mode::Check)?;
                let mut anon = Vec::new();
                while let Some(at) = self_check.find("'_>").or_else(|| self_check.find("'_,")) {
                    let name = format!("'i{}", anon.len());
                    self_check.replace_range(at..at + 2, &name);
                    anon.push(name);
                }
                let self_list = self.ty(for_ty, &Ctx::default(), Mode::List)?;
                let owner_path = self.path_of(&for_id, "", Mode::List)?;
                let cx = Ctx {
                    self_ty: Some(self_check.clone()),
                    ..Ctx::default()
                };
                let owner_call = format!("krate::{}", owner_path);
                let _ = self_list;
                for m in im["items"].as_array().into_iter().flatten() {
                    let m = self.item(&id_key(m))?;
                    if m["visibility"] != "public" {
                        continue;
                    }
                    let mname = m["name"].as_str().unwrap_or_default();
                    match kind(m) {
                        "function" => {
                            let f = self.function(
                                m,
                                &format!("{owner_path}::{mname}"),
                                Some(&owner_call),
                                &[&im["generics"]],
                                &cx,
                                &anon,
                            )?;
                            items.push(f);
                        }
                        "assoc_const" => {
                            let t = &inner(m)["type"];
                            items.push(Item {
                                line: format!(
                                    "const {owner_path}::{mname}: {}",
                                    self.ty(t, &cx, Mode::List)?
                                ),
                                check: format!(
                                    "fn _const_#N() -> {} {{\n    {owner_call}::{mname}\n}}",
                                    self.ty(t, &cx, Mode::Check)?
                                ),
                            });
                        }
                        _ => {}
                    }
                }
            }
            Some(tr) => {
                let def = self.def_path(&id_key(&tr["id"]));
                if SKIPPED_TRAITS.contains(&def.as_str()) {
                    return Ok(());
                }
                // Lifetimes of the impl become 'static; type parameters stay generic.
                let cx = Ctx {
                    self_ty: None,
                    lifetimes: lt_params
                        .iter()
                        .map(|l| (l.clone(), "'static".to_string()))
                        .collect(),
                    elided: Some("'static".to_string()),
                };
                let trait_l = self.path(tr, &Ctx::default(), Mode::List)?;
                let for_l = self.ty(for_ty, &Ctx::default(), Mode::List)?;
                let trait_c = self.path(tr, &cx, Mode::Check)?;
                let for_c = self.ty(for_ty, &cx, Mode::Check)?;
                let (gp, wh) = self.generics(&[&im["generics"]], &cx, Mode::Check)?;
                let (gl, whl) = self.generics(&[&im["generics"]], &Ctx::default(), Mode::List)?;
                let auto = if im["is_synthetic"].as_bool() == Some(true) {
                    " (auto)"
                } else {
                    ""
                };
                let check = if has_type_params {
                    let tps: Vec<String> = im["generics"]["params"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|p| p["kind"].get("type").is_some())
                        .filter_map(|p| p["name"].as_str().map(String::from))
                        .collect();
                    let inner_gp = gp.trim_start_matches('<').trim_end_matches('>');
                    format!(
                        "fn _impl_#N{gp}(){wh} {{\n    fn ck<{inner_gp}, X: ?::core::marker::Sized + {trait_c}>(){wh} {{}}\n    ck::<{}, {for_c}>();\n}}",
                        tps.join(", ")
                    )
                } else {
                    format!("fn _impl_#N() {{\n    fn ck<X: ?::core::marker::Sized + {trait_c}>() {{}}\n    ck::<{for_c}>();\n}}")
                };
                items.push(Item {
                    line: format!("impl{gl} {trait_l} for {for_l}{whl}{auto}"),
                    check,
                });
                if !has_type_params {
                    for m in im["items"].as_array().into_iter().flatten() {
                        let m = self.item(&id_key(m))?;
                        if kind(m) != "assoc_type" {
                            continue;
                        }
                        let a = inner(m);
                        let Some(t) = a.get("type").filter(|t| !t.is_null()) else {
                            continue;
                        };
                        let name = m["name"].as_str().unwrap_or_default();
                        let cx_self = Ctx {
                            self_ty: Some(for_c.clone()),
                            ..cx.clone()
                        };
                        // An `io::Error` is checked as `?` would use it: ours converts into it.
                        let io_error = t.get("resolved_path").is_some_and(|p| {
                            public_external(&self.def_path(&id_key(&p["id"])))
                                == Some("::std::io::Error")
                        });
                        let body = if io_error {
                            "::core::convert::From::from(x)"
                        } else {
                            "x"
                        };
                        items.push(Item {
                            line: format!("type <{for_l} as {trait_l}>::{name} = {}", self.ty(t, &Ctx::default(), Mode::List)?),
                            check: format!(
                                "fn _assoc_#N(x: <{for_c} as {trait_c}>::{name}) -> {} {{\n    {body}\n}}",
                                self.ty(t, &cx_self, Mode::Check)?
                            ),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate `c` with `pub mod m { pub struct S<'a>; impl S<'_> { fn bytes(&self) -> &[u8];
    /// fn open(x: u8) -> io::Result<S<'static>> } }` and `impl Debug for S<'_>`, as rustdoc
    /// JSON has it.
    fn doc() -> Value {
        let generic_a = serde_json::json!({"params": [{"name": "'a", "kind": {"lifetime": {"outlives": []}}}], "where_predicates": []});
        let none = serde_json::json!({"params": [], "where_predicates": []});
        let header = serde_json::json!({"is_const": false, "is_unsafe": false, "is_async": false, "abi": "Rust"});
        let s_path = |lt: &str| serde_json::json!({"resolved_path": {"path": "S", "id": 2, "args": {"angle_bracketed": {"args": [{"lifetime": lt}], "constraints": []}}}});
        serde_json::json!({
            "root": 0,
            "format_version": 57,
            "index": {
                "0": {"id": 0, "crate_id": 0, "name": "c", "visibility": "public", "attrs": [], "inner": {"module": {"items": [1]}}},
                "1": {"id": 1, "crate_id": 0, "name": "m", "visibility": "public", "attrs": [], "inner": {"module": {"items": [2]}}},
                "2": {"id": 2, "crate_id": 0, "name": "S", "visibility": "public", "attrs": [], "inner": {"struct": {"kind": {"plain": {"fields": [], "has_stripped_fields": true}}, "generics": generic_a, "impls": [3, 6]}}},
                "3": {"id": 3, "crate_id": 0, "name": null, "visibility": "default", "attrs": [], "inner": {"impl": {
                    "trait": null, "for": s_path("'_"), "items": [4, 5], "generics": none, "blanket_impl": null, "is_synthetic": false, "is_negative": false}}},
                "4": {"id": 4, "crate_id": 0, "name": "bytes", "visibility": "public", "attrs": [], "inner": {"function": {
                    "sig": {"inputs": [["self", {"borrowed_ref": {"lifetime": null, "is_mutable": false, "type": {"generic": "Self"}}}]],
                            "output": {"borrowed_ref": {"lifetime": null, "is_mutable": false, "type": {"slice": {"primitive": "u8"}}}}},
                    "generics": none, "header": header}}},
                "5": {"id": 5, "crate_id": 0, "name": "open", "visibility": "public", "attrs": [], "inner": {"function": {
                    "sig": {"inputs": [["x", {"primitive": "u8"}]],
                            "output": {"resolved_path": {"path": "io::Result", "id": 9, "args": {"angle_bracketed": {"args": [{"type": s_path("'static")}], "constraints": []}}}}},
                    "generics": none, "header": header}}},
                "6": {"id": 6, "crate_id": 0, "name": null, "visibility": "default", "attrs": [], "inner": {"impl": {
                    "trait": {"path": "Debug", "id": 8, "args": null}, "for": s_path("'_"), "items": [], "generics": none,
                    "blanket_impl": null, "is_synthetic": false, "is_negative": false}}}
            },
            "paths": {
                "2": {"crate_id": 0, "path": ["c", "m", "S"], "kind": "struct"},
                "8": {"crate_id": 2, "path": ["core", "fmt", "Debug"], "kind": "trait"},
                "9": {"crate_id": 1, "path": ["std", "io", "error", "Result"], "kind": "type_alias"}
            }
        })
    }

    fn items() -> Vec<Item> {
        let d = doc();
        Gen::new(&d).unwrap().run().unwrap()
    }

    fn check_of<'a>(items: &'a [Item], line: &str) -> &'a str {
        let lines: Vec<&str> = items.iter().map(|i| i.line.as_str()).collect();
        &items
            .iter()
            .find(|i| i.line == line)
            .unwrap_or_else(|| panic!("no {line:?} in {lines:#?}"))
            .check
    }

    #[test]
    fn a_method_borrowing_self_names_its_lifetime() {
        let items = items();
        let check = check_of(&items, "fn m::S::bytes(&self) -> &[u8]");
        assert!(
            check.contains("fn _fn_#N<'s, 'i0>(this: &'s krate::m::S<'i0>) -> &'s [u8]"),
            "{check}"
        );
        assert!(check.contains("krate::m::S::bytes(this)"), "{check}");
    }

    #[test]
    fn an_io_result_is_checked_through_question_mark() {
        let items = items();
        let check = check_of(&items, "fn m::S::open(x: u8) -> io::Result<m::S<'static>>");
        assert!(
            check.contains("-> ::std::io::Result<krate::m::S<'static>>"),
            "{check}"
        );
        assert!(
            check.contains("::core::result::Result::Ok(krate::m::S::open(a0)?)"),
            "{check}"
        );
    }

    #[test]
    fn a_trait_impl_over_an_anonymous_lifetime_is_checked_at_static() {
        let items = items();
        let check = check_of(&items, "impl Debug for m::S<'_>");
        assert!(check.contains("ck::<krate::m::S<'static>>()"), "{check}");
        assert!(
            check.contains("X: ?::core::marker::Sized + ::core::fmt::Debug"),
            "{check}"
        );
    }

    #[test]
    fn every_public_path_is_listed() {
        let lines: Vec<String> = items().into_iter().map(|i| i.line).collect();
        for want in ["mod m", "struct m::S"] {
            assert!(lines.iter().any(|l| l == want), "{want} not in {lines:#?}");
        }
    }

    #[test]
    fn an_unknown_external_path_is_an_error_naming_it() {
        let mut d = doc();
        d["paths"]["8"]["path"] = serde_json::json!(["core", "fmt", "private", "Debug"]);
        let err = Gen::new(&d).unwrap().run().err().unwrap();
        assert!(err.contains("core::fmt::private::Debug"), "{err}");
    }
}
