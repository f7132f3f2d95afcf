//! Event options ([`Opts`]) and targets ([`Proc`], [`Cpu`], [`Cgroup`]).
//!
//! [`Opts`] maps every field and bit of the kernel's `perf_event_attr` (newest headers). Options newer
//! than the running kernel are encoded all the same; if the kernel refuses them, the open fails with
//! [`Error::KernelTooOld`](crate::Error::KernelTooOld), which names the option, the Linux version that
//! added it and the running kernel. For anything not covered, edit the raw attr before the open with
//! [`Counter::new_with`](crate::count::Counter::new_with).
//!
//! ```
//! use perf_event::config::{Opts, SampleOn, Size};
//!
//! let mut opts = Opts::default();
//! opts.exclude.kernel = true; // count user space only
//! opts.stat_format.time_enabled = true;
//! opts.stat_format.time_running = true;
//! opts.sample_on = SampleOn::Count(50_000);
//! opts.sample_format.user_stack = Some(Size(8));
//! ```

pub(crate) mod attr;
pub mod sibling;
mod target;

pub use target::*;

pub use crate::sys::online_cpus;
pub use crate::version::KernelVersion;

/// Options of an event: what to count, when to sample, what to record.
///
/// `Opts::default()` counts everything (no exclusions), starts **disabled** (call
/// [`Counter::enable`](crate::count::Counter::enable)), reads only the count, and does not sample.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Opts {
    /// Privilege levels **not** to count (`exclude_user`, `exclude_kernel`, ...).
    pub exclude: Priv,
    /// This group should be the only group on the PMU while it runs (`exclusive`).
    pub only_group: bool,
    /// Keep the counter on the PMU at all times (`pinned`). If it cannot be, the counter goes into
    /// error state and [`stat`](crate::count::Counter::stat) returns
    /// [`Error::PinnedCounterInError`](crate::Error::PinnedCounterInError).
    pub pin_on_pmu: bool,
    /// Count in children created after the open (`inherit`, `inherit_thread`).
    pub inherit: Option<Inherit>,
    /// What happens on `execve(2)` (`enable_on_exec`, `remove_on_exec`).
    pub on_execve: Option<OnExecve>,
    /// What a read returns besides the count (`read_format`). A sampling counter also gets
    /// `lost_records` where the kernel has it, unless [`exact_stat_format`](Self::exact_stat_format).
    pub stat_format: StatFormat,
    /// Open with exactly [`stat_format`](Self::stat_format).
    ///
    /// By default (`false`) a sampling counter (a non-zero [`sample_on`](Self::sample_on)) also
    /// reads the kernel's own count of the records it lost (`PERF_FORMAT_LOST`), so that
    /// [`Sampler::lost`](crate::sample::Sampler::lost) and [`Stat::lost_records`] are exact: the
    /// kernel writes its last `PERF_RECORD_LOST` only once a later record fits. That is added only
    /// where the kernel takes it (Linux 6.0, and older stable kernels that have it): if the open is
    /// refused with `EINVAL` with it, it is opened again without, and not asked for again in this
    /// process. [`Counter::attr`](crate::count::Counter::attr) is the attr actually opened, and
    /// parsers follow it. Set this when your own code reads the counter, or the values of
    /// `sample_format.stat`, with a fixed layout. `stat_format.lost_records = true` asks for the
    /// count in every case (and fails on a kernel without it).
    ///
    /// [`Stat::lost_records`]: crate::count::Stat::lost_records
    #[doc(alias = "PERF_FORMAT_LOST")]
    #[cfg_attr(feature = "serde", serde(default))]
    pub exact_stat_format: bool,
    /// Start counting at once (`disabled = 0`). Default: start disabled.
    pub enable: bool,
    /// When to take a sample (`sample_period` / `sample_freq` + `freq`).
    pub sample_on: SampleOn,
    /// Skid constraint of samples (`precise_ip`).
    pub sample_skid: SampleSkid,
    /// What a sample contains (`sample_type` and its companion fields).
    pub sample_format: SampleFormat,
    /// Side-band records to generate (`mmap`, `comm`, `task`, `context_switch`, ...).
    pub extra_record: ExtraRecord,
    /// Append the record id fields to every non-sample record too (`sample_id_all`).
    pub record_id_all: bool,
    /// Which id fields samples and (with `record_id_all`) other records carry.
    pub record_id_format: RecordIdFormat,
    /// When the ring buffer reader is woken up (`wakeup_events`/`wakeup_watermark`, `aux_watermark`).
    pub wake_up: WakeUp,
    /// Send a synchronous `SIGTRAP` with this data to the target on every overflow (`sigtrap`,
    /// `sig_data`). Needs `on_execve = Some(OnExecve::Remove)`.
    ///
    /// Since Linux 5.13.
    #[doc(alias = "sigtrap")]
    pub sigtrap_on_sample: Option<SigData>,
    /// The clock of record timestamps (`use_clockid`, `clockid`). Since Linux 4.1.
    #[doc(alias = "clockid")]
    pub timer: Option<Clock>,
    /// Start the AUX area paused (`aux_start_paused`). Since Linux 6.13.
    #[doc(alias = "aux_start_paused")]
    pub pause_aux: bool,
    /// Write the ring buffer backwards, for overwrite (flight recorder) rings (`write_backward`).
    ///
    /// Since Linux 4.7.
    pub write_backward: bool,
    /// Samples of this event go into the AUX area of the group leader (`aux_output`).
    ///
    /// Since Linux 5.4.
    pub aux_output: bool,
    /// Pause or resume the group's AUX area on each overflow of this event (`aux_pause`,
    /// `aux_resume`). Since Linux 6.13.
    pub aux_on_sample: Option<sibling::AuxTracer>,
}

/// Privilege levels, used as exclusions: `true` means *not counted*.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Priv {
    /// User space (`exclude_user`).
    pub user: bool,
    /// Kernel space (`exclude_kernel`). Unprivileged users need this at `perf_event_paranoid` 2.
    pub kernel: bool,
    /// The hypervisor (`exclude_hv`).
    pub hv: bool,
    /// The host, when running virtual machines (`exclude_host`).
    pub host: bool,
    /// Guests (`exclude_guest`).
    pub guest: bool,
    /// The idle task (`exclude_idle`).
    pub idle: bool,
}

/// Which children inherit the counter.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Inherit {
    /// Tasks (processes and threads) created after the open (`inherit`).
    #[doc(alias = "inherit")]
    NewChild,
    /// Only threads created after the open (`inherit` + `inherit_thread`). Since Linux 5.13.
    #[doc(alias = "inherit_thread")]
    NewThread,
}

/// What happens to the counter on `execve(2)`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum OnExecve {
    /// Enable the counter on exec (`enable_on_exec`): count only the new program.
    #[doc(alias = "enable_on_exec")]
    Enable,
    /// Remove the counter from the task on exec (`remove_on_exec`). Since Linux 5.13.
    #[doc(alias = "remove_on_exec")]
    Remove,
}

/// What a read returns besides the count (`read_format`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct StatFormat {
    /// The event id (`PERF_FORMAT_ID`).
    #[doc(alias = "PERF_FORMAT_ID")]
    pub id: bool,
    /// Time the event was enabled (`PERF_FORMAT_TOTAL_TIME_ENABLED`).
    #[doc(alias = "PERF_FORMAT_TOTAL_TIME_ENABLED")]
    pub time_enabled: bool,
    /// Time the event was on the PMU (`PERF_FORMAT_TOTAL_TIME_RUNNING`); less than enabled when
    /// multiplexed.
    #[doc(alias = "PERF_FORMAT_TOTAL_TIME_RUNNING")]
    pub time_running: bool,
    /// Number of lost records (`PERF_FORMAT_LOST`). Since Linux 6.0.
    ///
    /// `true` asks for it (the open fails with [`KernelTooOld`](crate::Error::KernelTooOld) on a
    /// kernel without it). `false` leaves it to the default: sampling counters get it where the
    /// kernel has it; see [`Opts::exact_stat_format`].
    #[doc(alias = "PERF_FORMAT_LOST")]
    pub lost_records: bool,
    /// Read the whole group in one read (`PERF_FORMAT_GROUP`).
    #[doc(alias = "PERF_FORMAT_GROUP")]
    pub siblings: bool,
}

/// When to take a sample.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum SampleOn {
    /// At this average frequency in Hz (`freq = 1`, `sample_freq`); the kernel adjusts the period.
    #[doc(alias = "sample_freq")]
    Freq(u64),
    /// Every N events (`sample_period`). `Count(0)`, the default, does not sample.
    #[doc(alias = "sample_period")]
    Count(u64),
}

impl Default for SampleOn {
    fn default() -> Self {
        Self::Count(0)
    }
}

/// Skid constraint of samples (`precise_ip`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[doc(alias = "precise_ip")]
pub enum SampleSkid {
    /// Any skid (0).
    #[default]
    Arbitrary,
    /// Constant skid (1).
    Const,
    /// Zero skid requested (2).
    ReqZero,
    /// Zero skid required (3).
    Zero,
}

impl SampleSkid {
    pub(crate) fn precise_ip(self) -> u64 {
        self as u64
    }
}

/// What a sample record contains (`sample_type` bits and their companion fields).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SampleFormat {
    /// The counter values (`PERF_SAMPLE_READ`), in [`Opts::stat_format`].
    #[doc(alias = "PERF_SAMPLE_READ")]
    pub stat: bool,
    /// The sample period (`PERF_SAMPLE_PERIOD`).
    #[doc(alias = "PERF_SAMPLE_PERIOD")]
    pub period: bool,
    /// The cgroup id (`PERF_SAMPLE_CGROUP`). Since Linux 5.7.
    #[doc(alias = "PERF_SAMPLE_CGROUP")]
    pub cgroup: bool,
    /// The call chain (`PERF_SAMPLE_CALLCHAIN`).
    #[doc(alias = "PERF_SAMPLE_CALLCHAIN")]
    pub call_chain: Option<CallChain>,
    /// A copy of this many bytes of the user stack (`PERF_SAMPLE_STACK_USER`,
    /// `sample_stack_user`); a multiple of 8.
    #[doc(alias = "PERF_SAMPLE_STACK_USER")]
    pub user_stack: Option<Size>,
    /// The data address (`PERF_SAMPLE_ADDR`).
    #[doc(alias = "PERF_SAMPLE_ADDR")]
    pub data_addr: bool,
    /// The physical data address (`PERF_SAMPLE_PHYS_ADDR`). Since Linux 4.14.
    #[doc(alias = "PERF_SAMPLE_PHYS_ADDR")]
    pub data_phys_addr: bool,
    /// The page size of the data address (`PERF_SAMPLE_DATA_PAGE_SIZE`). Since Linux 5.11.
    #[doc(alias = "PERF_SAMPLE_DATA_PAGE_SIZE")]
    pub data_page_size: bool,
    /// The data source (`PERF_SAMPLE_DATA_SRC`).
    #[doc(alias = "PERF_SAMPLE_DATA_SRC")]
    pub data_source: bool,
    /// The instruction pointer (`PERF_SAMPLE_IP`).
    #[doc(alias = "PERF_SAMPLE_IP")]
    pub code_addr: bool,
    /// The page size of the code address (`PERF_SAMPLE_CODE_PAGE_SIZE`). Since Linux 5.11.
    #[doc(alias = "PERF_SAMPLE_CODE_PAGE_SIZE")]
    pub code_page_size: bool,
    /// User registers in this mask (`PERF_SAMPLE_REGS_USER`, `sample_regs_user`).
    #[doc(alias = "PERF_SAMPLE_REGS_USER")]
    pub user_regs: Option<RegsMask>,
    /// Registers at the interrupt in this mask (`PERF_SAMPLE_REGS_INTR`, `sample_regs_intr`).
    #[doc(alias = "PERF_SAMPLE_REGS_INTR")]
    pub intr_regs: Option<RegsMask>,
    /// The raw tracepoint or PMU data (`PERF_SAMPLE_RAW`).
    #[doc(alias = "PERF_SAMPLE_RAW")]
    pub raw: bool,
    /// The last branch records (`PERF_SAMPLE_BRANCH_STACK`, `branch_sample_type`).
    #[doc(alias = "PERF_SAMPLE_BRANCH_STACK")]
    pub lbr: Option<Lbr>,
    /// A snapshot of this many bytes of the AUX area (`PERF_SAMPLE_AUX`, `aux_sample_size`).
    /// Since Linux 5.5.
    #[doc(alias = "PERF_SAMPLE_AUX")]
    pub aux: Option<Size>,
    /// The transaction flags (`PERF_SAMPLE_TRANSACTION`).
    #[doc(alias = "PERF_SAMPLE_TRANSACTION")]
    pub txn: bool,
    /// The sample weight (`PERF_SAMPLE_WEIGHT` or `PERF_SAMPLE_WEIGHT_STRUCT`).
    #[doc(alias = "PERF_SAMPLE_WEIGHT")]
    pub weight: Option<Repr>,
}

/// Branch record options (`branch_sample_type`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Lbr {
    /// Privilege levels of branch targets to record; `None` follows the event's exclusions.
    pub target_priv: Option<TargetPriv>,
    /// Which branches to record.
    pub branch_type: BranchType,
    /// Record the hardware index of the branch stack (`PERF_SAMPLE_BRANCH_HW_INDEX`). Since Linux 5.7.
    pub hw_index: bool,
    /// What each entry holds.
    pub entry_format: EntryFormat,
}

/// Privilege levels of branch targets to record.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TargetPriv {
    /// User space (`PERF_SAMPLE_BRANCH_USER`).
    pub user: bool,
    /// Kernel space (`PERF_SAMPLE_BRANCH_KERNEL`).
    pub kernel: bool,
    /// The hypervisor (`PERF_SAMPLE_BRANCH_HV`).
    pub hv: bool,
}

/// Which branches to record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BranchType {
    /// Any branch (`PERF_SAMPLE_BRANCH_ANY`).
    pub any: bool,
    /// Any return (`PERF_SAMPLE_BRANCH_ANY_RETURN`).
    pub any_return: bool,
    /// Conditional branches (`PERF_SAMPLE_BRANCH_COND`).
    pub cond: bool,
    /// Indirect jumps (`PERF_SAMPLE_BRANCH_IND_JUMP`). Since Linux 4.2.
    pub ind_jump: bool,
    /// The call stack (`PERF_SAMPLE_BRANCH_CALL_STACK`). Since Linux 4.1.
    pub call_stack: bool,
    /// Direct calls (`PERF_SAMPLE_BRANCH_CALL`). Since Linux 4.4.
    pub call: bool,
    /// Indirect calls (`PERF_SAMPLE_BRANCH_IND_CALL`).
    pub ind_call: bool,
    /// Any call (`PERF_SAMPLE_BRANCH_ANY_CALL`).
    pub any_call: bool,
    /// Branches in a transaction (`PERF_SAMPLE_BRANCH_IN_TX`).
    pub in_tx: bool,
    /// Branches outside transactions (`PERF_SAMPLE_BRANCH_NO_TX`).
    pub no_tx: bool,
    /// Transaction aborts (`PERF_SAMPLE_BRANCH_ABORT_TX`).
    pub abort_tx: bool,
}

/// What each branch entry holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct EntryFormat {
    /// The flags (mispredicted, ...); `false` sets `PERF_SAMPLE_BRANCH_NO_FLAGS` (Linux 4.5).
    pub flags: bool,
    /// The cycle counts; `false` sets `PERF_SAMPLE_BRANCH_NO_CYCLES` (Linux 4.5).
    pub cycles: bool,
    /// Event occurrences between branches (`PERF_SAMPLE_BRANCH_COUNTERS`). Since Linux 6.8.
    pub counter: bool,
    /// The branch type (`PERF_SAMPLE_BRANCH_TYPE_SAVE`). Since Linux 4.14.
    pub branch_type: bool,
    /// The branch privilege level (`PERF_SAMPLE_BRANCH_PRIV_SAVE`). Since Linux 6.1.
    pub branch_priv: bool,
}

/// A size in bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Size(pub u32);

/// How the sample weight is represented.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Repr {
    /// One u64 (`PERF_SAMPLE_WEIGHT`).
    Full,
    /// Several smaller fields (`PERF_SAMPLE_WEIGHT_STRUCT`). Since Linux 5.12.
    Vars,
}

/// Call chain options ([`SampleFormat::call_chain`]).
///
/// `CallChain::default()` is the kernel's own default: kernel and user frames, none excluded, no
/// deferral, and up to `kernel.perf_event_max_stack` frames (127 unless the sysctl was changed).
/// Setting `call_chain = Some(..)` is what turns call chains on; `Default` only fills in the
/// options, so spelling out every field (as the spec's examples do) still works:
///
/// ```
/// use perf_event::config::{CallChain, Opts, SampleOn};
///
/// let mut opts = Opts::default();
/// opts.sample_on = SampleOn::Count(100_000);
/// opts.exclude.kernel = true; // unprivileged: user space only...
/// opts.sample_format.call_chain = Some(CallChain {
///     exclude_kernel: true, // ...so leave the kernel frames out of the chain too
///     ..CallChain::default()
/// });
/// # let full = CallChain { exclude_user: false, exclude_kernel: false, defer_user: false, max_stack_frames: 0 };
/// # assert_eq!(full, CallChain::default());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CallChain {
    /// Leave out user frames (`exclude_callchain_user`).
    pub exclude_user: bool,
    /// Leave out kernel frames (`exclude_callchain_kernel`).
    pub exclude_kernel: bool,
    /// Defer the user part to a separate record (`defer_callchain`). Since Linux 6.19.
    pub defer_user: bool,
    /// At most this many frames (`sample_max_stack`; 0 = the system maximum,
    /// `kernel.perf_event_max_stack`). Above that maximum the open fails (`EOVERFLOW`, explained).
    /// Since Linux 4.8.
    pub max_stack_frames: u16,
}

/// A register mask for [`SampleFormat::user_regs`] and [`SampleFormat::intr_regs`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RegsMask(pub u64);

impl RegsMask {
    /// The user registers an offline DWARF unwinder needs, as perf records them for
    /// `--call-graph dwarf`: every general-purpose register of this architecture's
    /// `perf_regs.h` (x86_64: `0xff0fff`, without the segment registers; aarch64: x0-x30, sp, pc);
    /// 0 on other architectures.
    pub const DWARF_UNWIND: RegsMask = RegsMask(if cfg!(target_arch = "x86_64") {
        0xff_0fff
    } else if cfg!(target_arch = "aarch64") {
        (1 << 33) - 1
    } else {
        0
    });
}

/// Side-band records to generate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ExtraRecord {
    /// Fork and exit (`task`).
    pub task: bool,
    /// Per-task counts on exit (`inherit_stat`).
    #[doc(alias = "inherit_stat")]
    pub read: bool,
    /// Process name changes (`comm`).
    pub comm: bool,
    /// Mark comm records caused by exec (`comm_exec`).
    pub comm_exec: bool,
    /// Memory mappings (`mmap`, `mmap_data`, `mmap2`, `build_id`).
    pub mmap: Mmap,
    /// Cgroup creation (`cgroup`). Since Linux 5.7.
    pub cgroup: bool,
    /// Kernel symbol changes (`ksymbol`). Since Linux 5.1.
    pub ksymbol: bool,
    /// BPF program loads and unloads (`bpf_event`). Since Linux 5.1.
    pub bpf_event: bool,
    /// Kernel text changes (`text_poke`). Since Linux 5.9.
    pub text_poke: bool,
    /// Context switches (`context_switch`). Since Linux 4.3.
    #[doc(alias = "context_switch")]
    pub ctx_switch: bool,
    /// Namespace changes (`namespaces`). Since Linux 4.12.
    pub namespaces: bool,
    /// Deferred call chain records (`defer_output`). Since Linux 6.19.
    #[doc(alias = "defer_output")]
    pub call_chain_deferred: bool,
}

/// Which id fields records carry (`sample_type` id bits).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RecordIdFormat {
    /// The event id (`PERF_SAMPLE_ID`).
    pub id: bool,
    /// The stream id (`PERF_SAMPLE_STREAM_ID`).
    pub stream_id: bool,
    /// The CPU (`PERF_SAMPLE_CPU`).
    pub cpu: bool,
    /// The pid and tid (`PERF_SAMPLE_TID`).
    pub task: bool,
    /// The timestamp (`PERF_SAMPLE_TIME`).
    pub time: bool,
    /// The event id at a fixed position in every record (`PERF_SAMPLE_IDENTIFIER`).
    pub identifier: bool,
}

/// When the reader of the ring buffer is woken up.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct WakeUp {
    /// After so many samples or bytes.
    pub on: WakeUpOn,
    /// After so many AUX bytes (`aux_watermark`). Since Linux 4.1.
    pub on_aux_bytes: u32,
}

/// Wake up after samples or bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum WakeUpOn {
    /// After this many bytes (`watermark = 1`, `wakeup_watermark`; 0 = half the buffer).
    Bytes(u32),
    /// After this many samples (`wakeup_events`; 0 = at the default watermark).
    Samples(u32),
}

impl Default for WakeUpOn {
    fn default() -> Self {
        Self::Samples(0)
    }
}

/// Data sent with `SIGTRAP` (`sig_data`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SigData(pub u64);

/// The clock of timestamps (`clockid`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Clock {
    /// `CLOCK_TAI`.
    Tai,
    /// `CLOCK_REALTIME`.
    RealTime,
    /// `CLOCK_BOOTTIME`.
    BootTime,
    /// `CLOCK_MONOTONIC`.
    Monotonic,
    /// `CLOCK_MONOTONIC_RAW`.
    MonotonicRaw,
}

impl Clock {
    pub(crate) fn clockid(self) -> i32 {
        match self {
            Self::RealTime => libc::CLOCK_REALTIME,
            Self::Monotonic => libc::CLOCK_MONOTONIC,
            Self::MonotonicRaw => libc::CLOCK_MONOTONIC_RAW,
            Self::BootTime => libc::CLOCK_BOOTTIME,
            Self::Tai => libc::CLOCK_TAI,
        }
    }
}

/// Memory mapping records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Mmap {
    /// Executable mappings (`mmap`).
    pub code: bool,
    /// Data mappings (`mmap_data`).
    pub data: bool,
    /// Extended records with inode data (`mmap2`), or with the build id instead (`build_id`,
    /// Linux 5.12).
    pub ext: Option<UseBuildId>,
}

/// Whether extended mmap records carry the build id (`build_id`) instead of inode data.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct UseBuildId(pub bool);
