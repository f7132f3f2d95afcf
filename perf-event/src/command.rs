//! Counting or sampling a command from its `exec` to its exit, its children and threads included:
//! what `perf stat CMD` and `perf record CMD` do.
//!
//! [`spawn`] opens your counters on a short-lived helper thread of this process, disabled, with
//! `inherit` and `enable_on_exec` ([`FromExec::opts`]), then spawns the command from that thread:
//! the child inherits copies of the counters, which the kernel enables at its `exec`, so they
//! count the new program and nothing of this process, and follow every task the command creates.
//! When a task of the command exits, the kernel adds its counts to the counter you hold, so one
//! read after [`Child::wait`] gives the command's totals; a [`Sampler`](crate::sample::Sampler)
//! mapped on a counter receives the samples of every inherited copy.
//!
//! No code runs between `fork` and `exec` (which safe Rust cannot do), and the command needs no
//! cooperation (no "wait for stdin" gate): the helper thread is what makes it safe to use from a
//! program with other threads. Only the helper forks while the counters are inheritable, and it
//! exits right after the spawn, so threads and processes this program starts later, from any
//! thread, are not counted.
//!
//! ```
//! use std::process::Command;
//!
//! use perf_event::command;
//! use perf_event::config::{Cpu, Opts};
//! use perf_event::count::Counter;
//! use perf_event::event::sw::Software;
//!
//! let mut opts = Opts::default();
//! opts.exclude.kernel = true; // what an unprivileged user may count at perf_event_paranoid 2
//! let mut cmd = Command::new("sh");
//! cmd.args(["-c", "ls / > /dev/null; cat /proc/self/status > /dev/null"]);
//! let (mut child, faults) = command::spawn(&mut cmd, |exec| {
//!     Counter::new(Software::PageFault, (exec.target(), Cpu::ALL), exec.opts(&opts))
//! })?;
//! child.wait()?;
//! // The shell's faults and those of its two children, from their exec on.
//! let n = faults.stat()?.count;
//! println!("{n} page faults");
//! assert!(n > 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Samplers follow the same way, with one counter (and ring) per CPU: the kernel cannot map an
//! inherited counter that counts on every CPU at once (see
//! [`PerCpuSampler`](crate::sample::PerCpuSampler) for a process that already runs).

use std::process::{Child, Command};

use crate::config::{sibling, Inherit, OnExecve, Opts, Proc};
use crate::{Error, Result};

/// How counters that follow the command are opened: handed to the `open` closure of [`spawn`].
///
/// Open every counter on [`target`](Self::target) (with any CPU), with options passed through
/// [`opts`](Self::opts) (group members through [`sibling_opts`](Self::sibling_opts)).
#[derive(Debug)]
pub struct FromExec {
    _private: (),
}

impl FromExec {
    /// The task to open the counters on: the calling (helper) thread, whose child the command
    /// becomes (`pid` 0).
    pub fn target(&self) -> Proc {
        Proc::CURRENT
    }

    /// `opts` for a counter that starts at the command's `exec` and follows its children and
    /// threads: disabled, with `inherit` ([`Inherit::NewChild`]: the command is a new process,
    /// which [`Inherit::NewThread`] would not follow) and `enable_on_exec`.
    #[doc(alias = "enable_on_exec")]
    #[doc(alias = "inherit")]
    pub fn opts(&self, opts: &Opts) -> Opts {
        let mut o = opts.clone();
        o.enable = false;
        o.on_execve = Some(OnExecve::Enable);
        o.inherit = Some(Inherit::NewChild);
        o
    }

    /// A group member's options to go with a leader opened with [`opts`](Self::opts): inherited
    /// as the leader is (a member counts while its leader does, so it needs no `enable_on_exec`).
    pub fn sibling_opts(&self, opts: &sibling::Opts) -> sibling::Opts {
        let mut o = opts.clone();
        o.inherit = Some(Inherit::NewChild);
        o
    }
}

/// Spawns `cmd` with counters that start at its `exec` and follow its children and threads;
/// returns the child and what `open` returned (the counters).
///
/// `open` runs on a helper thread, right before the spawn from that same thread; it opens the
/// counters on [`FromExec::target`] with [`FromExec::opts`] (anything else it opens is not tied
/// to the command). Its error, or the spawn's, is returned; the counters are then dropped.
///
/// # Errors
///
/// `open`'s error, or [`Error::Io`] when the command cannot be started (its program missing or
/// not executable: "cannot run PROGRAM: ...").
///
/// # Panics
///
/// Only if `open` panics (the panic is passed on).
pub fn spawn<T, E>(
    cmd: &mut Command,
    open: impl FnOnce(&FromExec) -> std::result::Result<T, E> + Send,
) -> std::result::Result<(Child, T), E>
where
    T: Send,
    E: From<Error> + Send,
{
    std::thread::scope(|s| {
        let helper = s.spawn(move || {
            let counters = open(&FromExec { _private: () })?;
            let child = cmd.spawn().map_err(|e| {
                Error::io(
                    format!("cannot run {}", cmd.get_program().to_string_lossy()),
                    e,
                )
            })?;
            Ok((child, counters))
        });
        match helper.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// [`spawn`] with one counter: `event` opened with `opts` on every CPU (a counter to read, not to
/// map: see the module's notes on sampling).
///
/// # Errors
///
/// As [`Counter::new`](crate::count::Counter::new) and [`spawn`].
pub fn spawn_counted<E>(
    cmd: &mut Command,
    event: E,
    opts: &Opts,
) -> Result<(Child, crate::count::Counter)>
where
    E: TryInto<crate::event::Event> + Send,
    Error: From<E::Error>,
{
    spawn(cmd, |exec| {
        crate::count::Counter::new(
            event,
            (exec.target(), crate::config::Cpu::ALL),
            exec.opts(opts),
        )
    })
}
