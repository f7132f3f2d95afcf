//! `perf record`, with the safe API: samples a command, every CPU or running processes, and writes a
//! perf.data file that `perf report` and `perf script` read.
//!
//! ```text
//! cargo run --release -p perf-event-safe --example record -- -F 999 -g -o perf.data -- CMD ARGS
//! perf report -i perf.data
//! ```
//!
//! # Design
//!
//! - **One ring per CPU.** An inherited event (`inherit`, needed to follow the command's threads and
//!   children) cannot be mapped when it counts on every CPU (`cpu = -1`), so, like `perf record`,
//!   the event is opened once per online CPU, each with its own [`Sampler`]. With `-p`, the counters
//!   of every thread on a CPU write into that CPU's ring ([`Sampler::attach`]).
//! - **The command without unsafe code.** [`perf_event::command::spawn`] opens the counters on a
//!   helper thread (`pid` 0), disabled, with `inherit` and `enable_on_exec`, and spawns the
//!   command from it: the child's inherited copies start at its `exec` (whose COMM and MMAP2
//!   records the kernel then writes), and the helper's never run since it never execs.
//! - **Events as perf names them.** `-e` is parsed by [`Machine`] in perf's grammar: each event of
//!   a list is its own attr in the file, a group `{a,b}` is opened as one (with `:S`, the leader's
//!   samples read the group and the members do not sample), and a hybrid CPU's generic event has
//!   one copy per core PMU, each opened only on its PMU's CPUs. On each CPU every counter writes
//!   into that CPU's ring; the first event asks for the side-band records.
//! - **Records as they come.** While the command runs, the rings are polled and drained, every
//!   record written to the file unchanged ([`PerfDataWriter::write_raw`]), with a
//!   `FINISHED_ROUND` after each pass, as perf does.
//! - **What predates the recording** is synthesized as perf does: COMM records for running threads
//!   and MMAP2 records of their executable mappings from `/proc/PID/maps` (`-p`, `-a`), and the
//!   kernel's MMAP (`[kernel.kallsyms]_text`) when kernel samples are recorded. Build ids the
//!   kernel put in MMAP2 records (Linux 5.12+), and the kernel's, go to the `BUILD_ID` feature.
//! - **Stopping.** Ctrl-C (SIGINT), SIGTERM (systemd's and docker's stop) and SIGHUP end the
//!   recording promptly (well under a second on an idle machine) with a complete file: a command still running is sent the same
//!   signal (as perf does), given a moment to exit, and killed after the file is written. A second
//!   signal ends the process at once.
//! - **The output** is created new (`O_CREAT|O_EXCL|O_NOFOLLOW`) once an old one is moved aside
//!   to `FILE.old`: a link planted in a shared folder such as /tmp is never followed.
#![forbid(unsafe_code)]

#[path = "record/args.rs"]
mod args;
#[path = "common/args.rs"]
mod cli;
#[path = "record/synth.rs"]
mod synth;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use perf_core::perf_data::{BuildIdEntry, EventAttr, Features, PerfDataWriter};
use perf_core::record::{CallchainContext, Mmap2File, Record};
use perf_core::{ParseConfig, RawRecord};
use perf_event::command::{self, FromExec};
use perf_event::config::{
    online_cpus, sibling, BranchType, CallChain, Cpu, EntryFormat, ExtraRecord, Inherit, Lbr, Opts,
    Proc, RegsMask, SampleOn, Size, TargetPriv, UseBuildId,
};
use perf_event::count::{Counter, CounterGroup};
use perf_event::event::spec::Machine;
use perf_event::event::Event;
use perf_event::perf_sys as sys;
use perf_event::sample::Sampler;
use perf_event::Error;
use rustix::event::{PollFd, PollFlags, Timespec};

use args::{Args, CallGraph, Rate};
use synth::Ids;

/// Why the run stopped early: a usage error (exit 2) or a failure (exit 1).
enum Fail {
    Usage(String),
    Error(String),
}

fn fail(e: impl std::fmt::Display) -> Fail {
    Fail::Error(e.to_string())
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        fail(e)
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(Fail::Usage(msg)) => {
            eprintln!("record: {msg}");
            eprintln!("{}", args::USAGE.lines().next().unwrap_or_default());
            eprintln!("Run 'record --help' for the options.");
            ExitCode::from(2)
        }
        Err(Fail::Error(msg)) => {
            eprintln!("record: {msg}");
            ExitCode::from(1)
        }
    }
}

/// Where the counters are opened.
#[derive(Clone)]
enum Target {
    /// This process, inherited by the command and enabled by its exec.
    Child,
    /// Every task, on every CPU.
    AllCpus,
    /// These threads (of the `-p` processes) and their future children.
    Threads(Vec<u32>),
}

/// The opened counters: per CPU, the ones whose records go to that CPU's ring (the first owns it).
struct Opened {
    per_cpu: Vec<Vec<Unit>>,
    /// perf.data's name of each spec.
    names: Vec<String>,
    kernel: bool,
}

impl Opened {
    /// Every counter, with the index of its spec.
    fn counters(&self) -> Vec<(usize, &Counter)> {
        self.per_cpu
            .iter()
            .flatten()
            .flat_map(Unit::counters)
            .collect()
    }
}

type Writer = PerfDataWriter<BufWriter<File>>;

fn run() -> Result<ExitCode, Fail> {
    let mut a = args::parse(std::env::args_os().skip(1)).map_err(Fail::Usage)?;
    if a.help {
        println!("{}", args::USAGE);
        return Ok(ExitCode::SUCCESS);
    }
    // As perf: a frequency above the kernel's limit is lowered to it, with a warning.
    if let (Rate::Freq(f), Some(max)) = (a.rate, max_sample_rate()) {
        if f > max {
            eprintln!(
                "record: -F {f} is above kernel.perf_event_max_sample_rate ({max} Hz): sampling at \
                 {max} Hz (root can raise the limit: sysctl kernel.perf_event_max_sample_rate=N; \
                 the kernel lowers it when sampling interrupts take too long)"
            );
            a.rate = Rate::Freq(max);
        }
    }
    // The signal that ends the recording (0: none yet); a second one ends the process at once.
    let stopped_by = Arc::new(AtomicUsize::new(0));
    let again = Arc::new(AtomicBool::new(false));
    for sig in STOP_SIGNALS {
        signal_hook::flag::register_conditional_default(sig, Arc::clone(&again))
            .and_then(|_| signal_hook::flag::register(sig, Arc::clone(&again)))
            .and_then(|_| {
                signal_hook::flag::register_usize(sig, Arc::clone(&stopped_by), sig as usize)
            })
            .map_err(|e| fail(format!("cannot install the handler of signal {sig}: {e}")))?;
    }

    let cpus = online_cpus().map_err(fail)?;
    let target = if a.all_cpus {
        Target::AllCpus
    } else if !a.pids.is_empty() {
        let mut tids = Vec::new();
        for &pid in &a.pids {
            let t = synth::threads(pid);
            if t.is_empty() {
                return Err(fail(format!("no such process: pid {pid} does not exist")));
            }
            tids.extend(t);
        }
        Target::Threads(tids)
    } else {
        Target::Child
    };

    // The output first: a place it cannot be written fails before any counter is opened.
    let file = create_output(&a.output)?;

    // Open, map, write the header; with a command, then spawn it (perf_event::command: the
    // counters start at its exec and follow its children).
    let (prepared, child) = if matches!(target, Target::Child) {
        let mut cmd = Command::new(&a.command[0]);
        cmd.args(&a.command[1..]);
        match command::spawn(&mut cmd, |exec| {
            prepare(&a, &target, &cpus, Some(exec), file)
        }) {
            Ok((child, p)) => (p, Some(child)),
            Err(e) => {
                let _ = fs::remove_file(&a.output);
                return Err(e);
            }
        }
    } else {
        (prepare(&a, &target, &cpus, None, file)?, None)
    };
    let Prepared {
        opened,
        samplers,
        mut rec,
        kernel_build_id,
    } = prepared;
    let each = |f: &dyn Fn(&Counter) -> perf_event::Result<()>| -> Result<(), Fail> {
        for (_, c) in opened.counters() {
            f(c).map_err(fail)?;
        }
        Ok(())
    };
    let manual = !matches!(target, Target::Child);
    if manual {
        each(&|c| c.enable())?;
    }
    // -a with a command: the command runs while every CPU is recorded, until it exits.
    let child = match child {
        None if !a.command.is_empty() => {
            match Command::new(&a.command[0]).args(&a.command[1..]).spawn() {
                Ok(c) => Some(c),
                Err(e) => {
                    drop(rec);
                    let _ = fs::remove_file(&a.output);
                    return Err(fail(format!(
                        "cannot run {}: {e}",
                        a.command[0].to_string_lossy()
                    )));
                }
            }
        }
        c => c,
    };
    let mut exit = ExitCode::SUCCESS;
    let mut still_running = None;
    match child {
        None => {
            let pids = a.pids.clone();
            rec.pump(&samplers, || {
                stopped_by.load(Ordering::Relaxed) != 0
                    || (!pids.is_empty() && pids.iter().all(|&p| !alive(p)))
            })?;
        }
        Some(mut child) => {
            let mut status = None;
            // When the signal that ends the recording was handed on to the command.
            let mut told: Option<Instant> = None;
            rec.pump(&samplers, || {
                match try_wait(&mut child) {
                    Ok(Some(s)) => {
                        status = Some(Ok(s));
                        return true;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        status = Some(Err(e));
                        return true;
                    }
                }
                let sig = stopped_by.load(Ordering::Relaxed);
                if sig == 0 {
                    return false;
                }
                match told {
                    None => {
                        hand_on(&child, sig);
                        told = Some(Instant::now());
                        false
                    }
                    // Its exit records are worth a moment; the file is not worth more.
                    Some(at) => at.elapsed() >= GRACE,
                }
            })?;
            let code = match status {
                Some(s) => {
                    let s = s.map_err(|e| fail(format!("waiting for the command: {e}")))?;
                    match (s.code(), s.signal()) {
                        (Some(c), _) => c,
                        (None, Some(sig)) => 128 + sig,
                        _ => 1,
                    }
                }
                // Still running past the grace: killed once the file is written.
                None => {
                    still_running = Some(child);
                    128 + stopped_by.load(Ordering::Relaxed) as i32
                }
            };
            exit = ExitCode::from(code.clamp(0, 255) as u8);
        }
    }
    if manual {
        each(&|c| c.disable())?;
    }
    // The records written until the end: the command's exit, the last samples.
    rec.drain(&samplers)?;
    let finished = finish(&a, &samplers, rec, kernel_build_id);
    if let Some(mut child) = still_running {
        eprintln!("record: the command did not end on the signal: killing it");
        let _ = child.kill();
        let _ = child.wait();
    }
    finished?;
    Ok(exit)
}

/// The signals that end a recording with a complete file.
const STOP_SIGNALS: [i32; 3] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
];

/// How long a command sent the signal that ended the recording may take to exit before the file
/// is finished without its last records.
const GRACE: Duration = Duration::from_millis(300);

/// Sends `child` the signal `sig` (one of [`STOP_SIGNALS`]).
fn hand_on(child: &Child, sig: usize) {
    if let Some(sig) = i32::try_from(sig)
        .ok()
        .and_then(rustix::process::Signal::from_named_raw)
    {
        let _ = rustix::process::kill_process(rustix::process::Pid::from_child(child), sig);
    }
}

/// The output, created new (`O_CREAT|O_EXCL|O_NOFOLLOW`) once an old file is moved aside: a link
/// planted at its name in a shared folder is moved aside, never followed, and one planted again
/// meanwhile fails the create instead of redirecting the write.
fn create_output(path: &Path) -> Result<File, Fail> {
    keep_old(path)?;
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| fail(format!("cannot create {}: {e}", path.display())))
}

/// The counters, their rings, and the file with what predates the recording written.
struct Prepared {
    opened: Opened,
    samplers: Vec<Sampler>,
    rec: Recorder,
    kernel_build_id: Option<Vec<u8>>,
}

/// Opens the counters (on `exec`'s target when it follows a command), maps one ring per CPU, and
/// writes the file's header and the records of what predates the recording.
fn prepare(
    a: &Args,
    target: &Target,
    cpus: &[u32],
    exec: Option<&FromExec>,
    file: File,
) -> Result<Prepared, Fail> {
    let opened = open(a, target, cpus, exec)?;
    let samplers = map_rings(&opened, a.pages_exp)?;
    let counters = opened.counters();
    let &(_, first) = counters
        .first()
        .ok_or_else(|| fail("no event counts on an online CPU"))?;
    // One attr per event that was opened somewhere, with the ids of all its counters.
    let mut events: Vec<(usize, EventAttr)> = Vec::new();
    for &(i, c) in &counters {
        let id = c.id().map_err(fail)?;
        match events.iter_mut().find(|(j, _)| *j == i) {
            Some((_, e)) => e.ids.push(id),
            None => events.push((
                i,
                EventAttr::new(*c.attr())
                    .with_ids(vec![id])
                    .with_name(opened.names[i].clone()),
            )),
        }
    }
    events.sort_by_key(|(i, _)| *i);
    let cfg = ParseConfig::from_attr(first.attr());
    let synth_ids = Ids {
        cfg,
        id: first.id().map_err(fail)?,
    };

    // The file, and what predates the recording.
    let mut w = PerfDataWriter::new(
        BufWriter::with_capacity(1 << 16, file),
        events.into_iter().map(|(_, e)| e).collect(),
    )
    .map_err(|e| fail(format!("cannot write {}: {e}", a.output.display())))?;
    let mut kernel_build_id = None;
    if opened.kernel {
        match synth::kernel_text() {
            Some(text) => {
                w.write_record(0, &synth::kernel_mmap(text, &synth_ids))
                    .map_err(fail)?;
                kernel_build_id = synth::kernel_build_id();
            }
            None => eprintln!(
                "record: the kernel's address is hidden (/proc/kallsyms, kptr_restrict): kernel \
                 samples will not be resolved to symbols"
            ),
        }
    }
    let existing = match target {
        Target::Child => Vec::new(),
        Target::AllCpus => synth::all_pids(),
        Target::Threads(_) => a.pids.clone(),
    };
    for pid in existing {
        for rec in synth::process(pid, &synth_ids) {
            w.write_record(0, &rec).map_err(fail)?;
        }
    }
    w.finish_round().map_err(fail)?;

    let rec = Recorder {
        w,
        cfg,
        build_ids: BTreeMap::new(),
        wakeups: 0,
        fp_chains: (a.call_graph == Some(CallGraph::Fp)).then_some((0, 0)),
    };
    Ok(Prepared {
        opened,
        samplers,
        rec,
        kernel_build_id,
    })
}

/// Ends the file (features, build ids) and prints perf's summary.
fn finish(
    a: &Args,
    samplers: &[Sampler],
    rec: Recorder,
    kernel_build_id: Option<Vec<u8>>,
) -> Result<(), Fail> {
    let mut lost = 0u64;
    for s in samplers {
        let l = s.lost().map_err(fail)?;
        lost += l.lost_records + l.lost_samples;
    }
    let mut features = Features::from_host();
    features.build_ids = rec
        .build_ids
        .iter()
        .map(|(file, id)| BuildIdEntry::user(id.clone(), file.clone()))
        .collect();
    if let Some(id) = kernel_build_id {
        features
            .build_ids
            .push(BuildIdEntry::kernel(id, "[kernel.kallsyms]"));
    }
    let samples = rec.w.samples_written();
    let fp_chains = rec.fp_chains;
    let wakeups = rec.wakeups;
    rec.w
        .finish(&features)
        .map_err(|e| fail(format!("cannot finish {}: {e}", a.output.display())))?;
    let size = fs::metadata(&a.output).map(|m| m.len()).unwrap_or(0);

    eprintln!("[ perf record: Woken up {wakeups} times to write data ]");
    if lost > 0 {
        eprintln!(
            "record: lost {lost} records: the rings were full (try a larger -m or a lower -F)"
        );
    }
    eprintln!(
        "[ perf record: Captured and wrote {:.3} MB {} ({samples} samples) ]",
        size as f64 / (1024.0 * 1024.0),
        a.output.display()
    );
    if let Some(w) = frame_pointer_warning(fp_chains, &a.command) {
        eprintln!("{w}");
    }
    Ok(())
}

/// `Child::try_wait`, retried when a signal interrupts it.
fn try_wait(child: &mut Child) -> io::Result<Option<std::process::ExitStatus>> {
    loop {
        match child.try_wait() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Moves an existing output file aside to `FILE.old`, as perf does.
fn keep_old(path: &Path) -> Result<(), Fail> {
    if fs::symlink_metadata(path).is_ok() {
        let mut old = path.as_os_str().to_owned();
        old.push(".old");
        let old = PathBuf::from(old);
        fs::rename(path, &old).map_err(|e| {
            fail(format!(
                "cannot move the old {} to {}: {e}",
                path.display(),
                old.display()
            ))
        })?;
    }
    Ok(())
}

/// The file being written, and what is learned from the records on the way.
struct Recorder {
    w: Writer,
    cfg: ParseConfig,
    /// Build ids from MMAP2 records, by file name.
    build_ids: BTreeMap<String, Vec<u8>>,
    /// Passes that found records.
    wakeups: u64,
    /// `-g`: samples with a user call chain, and those of them only 1 or 2 frames deep.
    fp_chains: Option<(u64, u64)>,
}

impl Recorder {
    /// Drains and waits for records until `done` says so.
    fn pump(&mut self, samplers: &[Sampler], mut done: impl FnMut() -> bool) -> Result<(), Fail> {
        loop {
            if self.drain(samplers)? > 0 {
                self.wakeups += 1;
            }
            if done() {
                return Ok(());
            }
            poll(samplers, Duration::from_millis(100));
        }
    }

    /// Writes every record in the rings now, then ends the round. Returns how many there were.
    fn drain(&mut self, samplers: &[Sampler]) -> Result<usize, Fail> {
        let mut n = 0;
        let mut err = None;
        for s in samplers {
            let mut cow = s.iter().into_cow();
            n += cow.drain(usize::MAX, |chunk, _| {
                if err.is_some() {
                    return;
                }
                let written = RawRecord::from_chunk(chunk.as_chunk()).and_then(|(raw, _)| {
                    self.note(&raw);
                    self.w.write_raw(&raw)
                });
                if let Err(e) = written {
                    err = Some(e);
                }
            });
        }
        if let Some(e) = err {
            return Err(fail(format!("writing the records: {e}")));
        }
        if n > 0 {
            self.w.finish_round().map_err(fail)?;
        }
        Ok(n)
    }

    /// Keeps the build id of an MMAP2 record that carries one.
    fn note(&mut self, raw: &RawRecord<'_>) {
        if raw.record_type() == sys::PERF_RECORD_SAMPLE {
            self.note_chain(raw);
            return;
        }
        if raw.record_type() != sys::PERF_RECORD_MMAP2 || !raw.misc().mmap_build_id() {
            return;
        }
        if let Ok(Record::Mmap2(m)) = raw.parse(&self.cfg) {
            if let Mmap2File::BuildId(id) = m.file {
                let name = m.filename.to_string_lossy().into_owned();
                if name.starts_with('/') && !id.as_bytes().is_empty() {
                    self.build_ids
                        .entry(name)
                        .or_insert_with(|| id.as_bytes().to_vec());
                }
            }
        }
    }
}

impl Recorder {
    /// With `-g`, counts the user call chains and the shallow ones (1-2 frames): see
    /// [`frame_pointer_warning`].
    fn note_chain(&mut self, raw: &RawRecord<'_>) {
        let Some((chains, shallow)) = self.fp_chains.as_mut() else {
            return;
        };
        let Ok(Record::Sample(s)) = raw.parse(&self.cfg) else {
            return;
        };
        let Some(chain) = s.callchain() else {
            return;
        };
        let user: usize = chain
            .contexts()
            .filter(|(c, _)| *c == CallchainContext::User)
            .map(|(_, frames)| frames.len())
            .sum();
        if user > 0 {
            *chains += 1;
            *shallow += u64::from(user <= 2);
        }
    }
}

/// `-g` on code built without frame pointers (Rust release builds, C at -O2 on x86_64): the
/// kernel's walk stops after the sampled function, or one frame above it. The heuristic: most
/// user call chains (more than half, of at least 20) are 1 or 2 frames deep, where any program
/// built with frame pointers shows its function, `main` and the C library's start-up frames
/// below it (3 or more). `None` when the chains look whole.
fn frame_pointer_warning(
    fp_chains: Option<(u64, u64)>,
    command: &[std::ffi::OsString],
) -> Option<String> {
    let (chains, shallow) = fp_chains?;
    if chains < 20 || shallow * 2 <= chains {
        return None;
    }
    let what = command.first().map_or_else(
        || "the code sampled".to_owned(),
        |c| c.to_string_lossy().into_owned(),
    );
    Some(format!(
        "record: -g: {shallow} of {chains} user call chains are only 1-2 frames deep: {what} looks \
         built without frame pointers (Rust release builds are, and C at -O2 on x86_64), which \
         the kernel's -g walk needs. Record with --call-graph dwarf, or rebuild with frame \
         pointers (RUSTFLAGS=\"-C force-frame-pointers=yes\"; -fno-omit-frame-pointer in C)"
    ))
}

/// Waits until a ring has records to read (its wakeup watermark) or `timeout` passes.
fn poll(samplers: &[Sampler], timeout: Duration) {
    let fds: Vec<BorrowedFd<'_>> = samplers.iter().map(AsFd::as_fd).collect();
    let mut pfds: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(fd, PollFlags::IN))
        .collect();
    let ts = Timespec {
        tv_sec: 0,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    // An interrupted poll (Ctrl-C) just ends the wait early.
    let _ = rustix::event::poll(&mut pfds, Some(&ts));
}

/// The options every counter is opened with.
fn base_opts(a: &Args, target: &Target) -> Opts {
    let mut o = Opts {
        sample_on: match a.rate {
            Rate::Freq(f) => SampleOn::Freq(f),
            Rate::Period(p) => SampleOn::Count(p),
        },
        ..Opts::default()
    };
    o.sample_format.code_addr = true;
    o.sample_format.period = true;
    let chain = |exclude_user| CallChain {
        exclude_user,
        exclude_kernel: false,
        defer_user: false,
        max_stack_frames: 0,
    };
    match a.call_graph {
        None => {}
        Some(CallGraph::Fp) => o.sample_format.call_chain = Some(chain(false)),
        // As perf: the kernel's frames from the chain, the user's unwound from the registers and
        // the stack copy, which needs every mapping (data too: perf finds .eh_frame_hdr through
        // the non-executable mappings of the binary).
        Some(CallGraph::Dwarf(size)) => {
            o.sample_format.call_chain = Some(chain(true));
            o.sample_format.user_regs = Some(RegsMask::DWARF_UNWIND);
            o.sample_format.user_stack = Some(Size(size));
            o.extra_record.mmap.data = true;
        }
        Some(CallGraph::Lbr) => {
            o.sample_format.call_chain = Some(chain(false));
            o.sample_format.lbr = Some(Lbr {
                target_priv: Some(TargetPriv {
                    user: true,
                    kernel: false,
                    hv: false,
                }),
                branch_type: BranchType {
                    call_stack: true,
                    ..BranchType::default()
                },
                hw_index: false,
                entry_format: EntryFormat::default(),
            });
        }
    }
    // perf's layout for several CPUs: the id first (one ring may hold several counters' records),
    // task, time, CPU, on samples and, with sample_id_all, on every other record.
    o.record_id_format.identifier = true;
    o.record_id_format.task = true;
    o.record_id_format.time = true;
    o.record_id_format.cpu = true;
    o.record_id_all = true;
    o.extra_record.task = true;
    o.extra_record.comm = true;
    o.extra_record.comm_exec = true;
    o.extra_record.mmap.code = true;
    o.extra_record.mmap.ext = Some(UseBuildId(true));
    match target {
        // A command's: `FromExec::opts` (perf_event::command).
        Target::Child | Target::AllCpus => {}
        Target::Threads(_) => o.inherit = Some(Inherit::NewChild),
    }
    o
}

/// One event of `-e`: a hybrid CPU's `cycles` is one per core PMU (`cpu_core/cycles/`,
/// `cpu_atom/cycles/`), each opened on its PMU's CPUs only, each its own attr in perf.data.
struct Spec {
    event: Event,
    /// The name perf.data gives it (perf's: `pmu/text/` for a per-PMU copy).
    name: String,
    /// The CPUs its PMU counts on; `None`: every CPU.
    cpus: Option<Vec<u32>>,
    /// In a group of several (`{a,b}`): the index of the group's leader among the specs.
    leader: Option<usize>,
    /// `:S` on a group: the leader's samples read the whole group (`PERF_SAMPLE_READ`).
    sample_read: bool,
}

impl Spec {
    fn counts_on(&self, cpu: u32) -> bool {
        self.cpus.as_ref().is_none_or(|c| c.contains(&cpu))
    }
}

/// The PMUs events are looked up in: this machine's, or the sysfs tree `PERF_EVENT_PMU_ROOT` names.
fn machine() -> Machine {
    match std::env::var_os("PERF_EVENT_PMU_ROOT") {
        Some(root) => Machine::from_sysfs(PathBuf::from(root)),
        None => Machine::current(),
    }
}

/// The events of the `-e` texts in perf's grammar, in order (several `-e` are one list, as in perf).
fn parse_specs(machine: &Machine, texts: &[String]) -> Result<Vec<Spec>, Fail> {
    let mut specs = Vec::new();
    for text in texts {
        let list = machine.parse(text).map_err(|e| {
            // On a line of its own, so that the parser's pointer lines up.
            fail(format!(
                "cannot use -e {text}:\n{e}\n(events are named as `perf list` prints them, e.g. \
                 cpu-clock, cycles:u, page-faults; groups as {{cpu-clock,page-faults}})"
            ))
        })?;
        let sizes: Vec<usize> = list.groups().map(<[_]>::len).collect();
        let mut leader = None;
        for e in &list {
            if e.is_leader() {
                leader = Some(specs.len());
            }
            let grouped = e
                .group()
                .is_some_and(|g| sizes.get(g).copied().unwrap_or(0) > 1);
            // Only the event's text sets PERF_SAMPLE_READ; no option of this example does.
            let read = u64::from(sys::PERF_SAMPLE_READ);
            let sample_read = e.to_attr(&Opts::default()).sample_type & read != 0;
            specs.push(Spec {
                event: e.event().clone(),
                name: e.name().to_owned(),
                cpus: e.cpus().map(<[u32]>::to_vec),
                leader: if grouped { leader } else { None },
                sample_read: grouped && sample_read,
            });
        }
    }
    Ok(specs)
}

/// What one open produced on a CPU for one task: an event, or a group (leader first).
enum Unit {
    One(usize, Counter),
    Group(Vec<usize>, CounterGroup),
}

impl Unit {
    /// The counters with the index of their spec.
    fn counters(&self) -> Vec<(usize, &Counter)> {
        match self {
            Unit::One(i, c) => vec![(*i, c)],
            Unit::Group(specs, g) => std::iter::once(g.leader())
                .chain(g.siblings().iter().map(|m| &**m))
                .zip(specs.iter().copied())
                .map(|(c, i)| (i, c))
                .collect(),
        }
    }
}

/// Opens the events on every CPU for the target, falling back as perf does: `cycles` to
/// `cpu-clock` without a hardware PMU, user space only when the kernel is not permitted, MMAP2
/// without build ids on kernels before 5.12.
fn open(a: &Args, target: &Target, cpus: &[u32], exec: Option<&FromExec>) -> Result<Opened, Fail> {
    let machine = machine();
    let default = a.events.is_empty();
    if a.call_graph == Some(CallGraph::Lbr) && machine.core_pmus().is_empty() {
        let names: Vec<String> = machine.pmus().iter().map(|p| p.name().to_owned()).collect();
        return Err(fail(format!(
            "--call-graph lbr needs a hardware PMU with last-branch records (Intel CPUs); this \
             machine has none (its PMUs: {}): use --call-graph dwarf, or fp for code built with \
             frame pointers",
            names.join(" ")
        )));
    }
    // perf's default: cycles, or cpu-clock without a hardware PMU (a VM), decided before the open
    // so that any error names the event actually used.
    let mut specs = if default && machine.core_pmus().is_empty() {
        parse_specs(&machine, &["cpu-clock".to_owned()])?
    } else if default {
        parse_specs(&machine, &["cycles".to_owned()])?
    } else {
        parse_specs(&machine, &a.events)?
    };
    let mut opts = base_opts(a, target);
    if let Some(exec) = exec {
        opts = exec.opts(&opts);
    }
    let mut user_only = false;
    loop {
        match open_on(&specs, target, cpus, &opts) {
            Ok(per_cpu) => {
                let names = specs
                    .iter()
                    .map(|s| {
                        let mut n = s.name.clone();
                        if user_only && !n.contains(':') {
                            n.push_str(":u");
                        }
                        n
                    })
                    .collect();
                return Ok(Opened {
                    per_cpu,
                    names,
                    kernel: !opts.exclude.kernel,
                });
            }
            Err(Error::NotSupported { .. }) if default && specs[0].name != "cpu-clock" => {
                // No hardware PMU (a VM): perf's fallback.
                specs = parse_specs(&machine, &["cpu-clock".to_owned()])?;
            }
            Err(Error::Permission { .. }) if !opts.exclude.kernel => {
                eprintln!(
                    "record: sampling the kernel is not permitted ({}); recording user space only",
                    paranoid_text()
                );
                opts.exclude.kernel = true;
                opts.exclude.hv = true;
                user_only = true;
            }
            // The library's message says what the paranoid level allows and what would work.
            Err(e @ (Error::Permission { .. } | Error::NoSuchProcess { .. })) => {
                return Err(fail(e));
            }
            Err(Error::NotSupported { .. } | Error::KernelTooOld { .. } | Error::Io { .. })
                if opts.extra_record.mmap.ext == Some(UseBuildId(true)) =>
            {
                // Build ids in MMAP2 need Linux 5.12.
                opts.extra_record.mmap.ext = Some(UseBuildId(false));
            }
            Err(e) if inherit_reads(&specs, target) => {
                return Err(fail(format!(
                    "{e}\n(`:S` makes the leader's samples read the group; inherited counters, \
                     which follow a command or -p's threads, can do that since Linux 6.12 only: \
                     on older kernels record -a instead)"
                )))
            }
            Err(e) => return Err(fail(e)),
        }
    }
}

/// Whether a group samples its counts (`:S`) on inherited counters (Linux 6.12+).
fn inherit_reads(specs: &[Spec], target: &Target) -> bool {
    !matches!(target, Target::AllCpus) && specs.iter().any(|s| s.sample_read)
}

/// Opens every event that counts on each CPU, for each task of the target. Per CPU and task, the
/// first event also asks for the side-band records (comm, mmap2, fork/exit), as perf's first
/// event does, so that each is written once.
fn open_on(
    specs: &[Spec],
    target: &Target,
    cpus: &[u32],
    opts: &Opts,
) -> perf_event::Result<Vec<Vec<Unit>>> {
    let tasks = match target {
        // `FromExec::target`: the helper thread that spawns the command.
        Target::Child => vec![Some(Proc::CURRENT)],
        // Every task.
        Target::AllCpus => vec![None],
        Target::Threads(tids) => tids.iter().map(|&t| Some(Proc(t))).collect(),
    };
    let mut out = Vec::with_capacity(cpus.len());
    for &cpu in cpus {
        let mut units = Vec::new();
        let mut gone = None;
        for &task in &tasks {
            match open_task(specs, task, cpu, opts) {
                Ok(u) => units.extend(u),
                // The thread exited since it was listed.
                Err(e @ Error::NoSuchProcess { .. }) if matches!(target, Target::Threads(_)) => {
                    gone = Some(e)
                }
                Err(e) => return Err(e),
            }
        }
        match gone {
            Some(e) if units.is_empty() => return Err(e),
            _ => out.push(units),
        }
    }
    Ok(out)
}

/// Opens the events of `specs` that count on `cpu` for one task (`None`: every task).
fn open_task(
    specs: &[Spec],
    task: Option<Proc>,
    cpu: u32,
    opts: &Opts,
) -> perf_event::Result<Vec<Unit>> {
    let new = |e: &Event, o: &Opts| match task {
        Some(p) => Counter::new(e, (p, Cpu(cpu)), o),
        None => Counter::new(e, (Proc::ALL, Cpu(cpu)), o),
    };
    let mut units = Vec::new();
    let mut tracking = true;
    for (i, s) in specs.iter().enumerate() {
        if !s.counts_on(cpu) || s.leader.is_some_and(|l| l != i) {
            continue;
        }
        let mut o = opts.clone();
        if !std::mem::take(&mut tracking) {
            o.extra_record = ExtraRecord::default();
        }
        if s.leader.is_none() {
            units.push(Unit::One(i, new(&s.event, &o)?));
            continue;
        }
        // `{a,b}:S`: the leader's samples carry the whole group's counts, and the members do not
        // sample (unless their own period= or freq= says so), as perf opens them.
        let sample_read = s.sample_read;
        if sample_read {
            o.stat_format.siblings = true;
            o.stat_format.id = true;
        }
        let member = sibling::Opts {
            exclude: o.exclude.clone(),
            inherit: o.inherit,
            // Members count while the leader does.
            enable: true,
            sample_on: if sample_read {
                SampleOn::Count(0)
            } else {
                o.sample_on.clone()
            },
            sample_format: o.sample_format.clone(),
            record_id_all: o.record_id_all,
            record_id_format: o.record_id_format.clone(),
            wake_up: o.wake_up.clone(),
            ..Default::default()
        };
        let mut g = CounterGroup::from(new(&s.event, &o)?);
        // Every counter of a ring reads the same way (one parser reads its records), so the
        // members take the leader's read format, group flag included, as perf gives them.
        let read_format = g.leader().attr().read_format;
        let mut members = vec![i];
        for (j, m) in specs.iter().enumerate().skip(i + 1) {
            if m.leader == Some(i) {
                g.add_with(&m.event, &member, |a| a.read_format = read_format)?;
                members.push(j);
            }
        }
        units.push(Unit::Group(members, g));
    }
    Ok(units)
}

/// One ring per CPU: the CPU's first counter maps it, the others write into it.
fn map_rings(opened: &Opened, exp: u8) -> Result<Vec<Sampler>, Fail> {
    let mut samplers = Vec::with_capacity(opened.per_cpu.len());
    for units in &opened.per_cpu {
        let counters: Vec<&Counter> = units
            .iter()
            .flat_map(|u| u.counters().into_iter().map(|(_, c)| c))
            .collect();
        let Some((first, rest)) = counters.split_first() else {
            continue;
        };
        let s = first.sampler(exp).map_err(|e| {
            fail(format!(
                "cannot map a ring of {} pages: {e}\n(try fewer pages with -m)",
                1u64 << exp
            ))
        })?;
        for c in rest {
            s.attach(c).map_err(fail)?;
        }
        samplers.push(s);
    }
    Ok(samplers)
}

/// Whether the process runs (a zombie counts as gone).
fn alive(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X" | "x") | None)
}

/// `kernel.perf_event_max_sample_rate`, when readable.
fn max_sample_rate() -> Option<u64> {
    fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn paranoid_text() -> String {
    match fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
    {
        Some(p) => format!("perf_event_paranoid is {p}"),
        None => "perf_event_paranoid is unreadable".into(),
    }
}
