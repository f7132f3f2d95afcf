//! The owned record types.

use std::ffi::CString;

use super::debug;
use super::decoded::*;
use super::CallChains;
use crate::count::Stat;

/// Where the CPU was when the record was made: the header's `misc & PERF_RECORD_MISC_CPUMODE_MASK`.
#[doc(alias = "PERF_RECORD_MISC_CPUMODE_MASK")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Priv {
    /// User space (`PERF_RECORD_MISC_USER`).
    #[doc(alias = "PERF_RECORD_MISC_USER")]
    User,
    /// The kernel (`PERF_RECORD_MISC_KERNEL`).
    #[doc(alias = "PERF_RECORD_MISC_KERNEL")]
    Kernel,
    /// The hypervisor (`PERF_RECORD_MISC_HYPERVISOR`).
    #[doc(alias = "PERF_RECORD_MISC_HYPERVISOR")]
    Hv,
    /// A guest's user space (`PERF_RECORD_MISC_GUEST_USER`).
    #[doc(alias = "PERF_RECORD_MISC_GUEST_USER")]
    GuestUser,
    /// A guest's kernel (`PERF_RECORD_MISC_GUEST_KERNEL`).
    #[doc(alias = "PERF_RECORD_MISC_GUEST_KERNEL")]
    GuestKernel,
    /// Not known (`PERF_RECORD_MISC_CPUMODE_UNKNOWN`, or a value without a name).
    #[doc(alias = "PERF_RECORD_MISC_CPUMODE_UNKNOWN")]
    Unknown,
}

/// A process and thread id pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Task {
    /// Process id (thread group id).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
}

/// The ids a record carries (`struct sample_id` with `sample_id_all`, or a sample's own fields): which
/// counter, task, CPU and time it belongs to. Each is `Some` when `record_id_format` asked for it.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RecordId {
    /// The counter's id (`PERF_SAMPLE_ID`, or `PERF_SAMPLE_IDENTIFIER`); compare with
    /// [`Counter::id`](crate::count::Counter::id).
    #[doc(alias = "PERF_SAMPLE_IDENTIFIER")]
    pub id: Option<u64>,
    /// The id of the counter the record's counter was inherited from (`PERF_SAMPLE_STREAM_ID`).
    pub stream_id: Option<u64>,
    /// The CPU (`PERF_SAMPLE_CPU`).
    pub cpu: Option<u32>,
    /// The task (`PERF_SAMPLE_TID`).
    pub task: Option<Task>,
    /// The time in perf clock nanoseconds (`PERF_SAMPLE_TIME`).
    pub time: Option<u64>,
}
debug!(RecordId { opt id, opt stream_id, opt cpu, opt task, opt time });

/// Register values and their ABI (`PERF_SAMPLE_REGS_ABI_32` / `_64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Abi {
    /// 32-bit registers (`PERF_SAMPLE_REGS_ABI_32`).
    #[doc(alias = "PERF_SAMPLE_REGS_ABI_32")]
    _32,
    /// 64-bit registers (`PERF_SAMPLE_REGS_ABI_64`).
    #[doc(alias = "PERF_SAMPLE_REGS_ABI_64")]
    _64,
}

/// A sample's weight (`PERF_SAMPLE_WEIGHT` or, since Linux 5.12, `PERF_SAMPLE_WEIGHT_STRUCT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Weight {
    /// One 64-bit weight (`PERF_SAMPLE_WEIGHT`).
    Full(u64),
    /// Three weights (`PERF_SAMPLE_WEIGHT_STRUCT`, Since Linux 5.12): usually latency, then
    /// instruction latency, then a PMU-specific one.
    Vars {
        /// `var1_dw`.
        var1: u32,
        /// `var2_w`.
        var2: u16,
        /// `var3_w`.
        var3: u16,
    },
}

/// A transaction abort (`PERF_SAMPLE_TRANSACTION`, `PERF_TXN_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Txn {
    /// Lock elision (`PERF_TXN_ELISION`).
    pub elision: bool,
    /// A transaction (`PERF_TXN_TRANSACTION`).
    pub tx: bool,
    /// Caused by the instruction (`PERF_TXN_SYNC`).
    pub is_sync: bool,
    /// Not caused by the instruction (`PERF_TXN_ASYNC`).
    pub is_async: bool,
    /// Retrying may succeed (`PERF_TXN_RETRY`).
    pub retry: bool,
    /// A conflict with another thread (`PERF_TXN_CONFLICT`).
    pub conflict: bool,
    /// Read capacity exceeded (`PERF_TXN_CAPACITY_READ`).
    pub capacity_read: bool,
    /// Write capacity exceeded (`PERF_TXN_CAPACITY_WRITE`).
    pub capacity_write: bool,
    /// The user abort code (`PERF_TXN_ABORT_MASK`).
    pub code: u32,
}

/// A branch stack (`PERF_SAMPLE_BRANCH_STACK`): the last branches taken, newest first.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Lbr {
    /// The hardware index of the newest entry (`PERF_SAMPLE_BRANCH_HW_INDEX`). Since Linux 5.7.
    pub hw_index: Option<u64>,
    /// The branches.
    pub entries: Vec<Entry>,
}
debug!(Lbr { opt hw_index, req entries });

/// One branch (`struct perf_branch_entry`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Entry {
    /// Branch source.
    pub from: u64,
    /// Branch target.
    pub to: u64,
    /// Mispredicted.
    pub mis: bool,
    /// Predicted.
    pub pred: bool,
    /// In a transaction.
    pub in_tx: bool,
    /// A transaction abort.
    pub abort: bool,
    /// Cycles since the previous branch (0 when not supported).
    pub cycles: u16,
    /// The branch's type (`type`, and `new_type` under `PERF_BR_EXTEND_ABI`), when the branch
    /// filter saves it (`PERF_SAMPLE_BRANCH_TYPE_SAVE`). Since Linux 4.14.
    pub branch_type: BranchType,
    /// Whether it was speculative (`spec`). Since Linux 6.1.
    pub branch_spec: BranchSpec,
    /// The privilege level of its target (`priv`), when the branch filter saves it
    /// (`PERF_SAMPLE_BRANCH_PRIV_SAVE`). Since Linux 6.1.
    pub branch_priv: BranchPriv,
    /// The branch counters (`PERF_SAMPLE_BRANCH_COUNTERS`). Since Linux 6.8.
    pub counter: Option<u64>,
}

/// `PERF_RECORD_SAMPLE`: a sample. Fields are `Some` when `sample_format` asked for them.
#[doc(alias = "PERF_RECORD_SAMPLE")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Sample {
    /// Ids: counter, task, CPU, time. Since Linux 2.6.31.
    pub record_id: RecordId,
    /// The counter's values (`PERF_SAMPLE_READ`). Since Linux 2.6.31.
    pub stat: Option<Stat>,
    /// The sample period (`PERF_SAMPLE_PERIOD`). Since Linux 2.6.31.
    pub period: Option<u64>,
    /// The cgroup id (`PERF_SAMPLE_CGROUP`). Since Linux 5.7.
    pub cgroup: Option<u64>,
    /// The call chain (`PERF_SAMPLE_CALLCHAIN`): iterating it yields its [`CallChain`](super::CallChain) parts as
    /// 0.5.1 did; [`CallChains::ips`] is the kernel's form, `PERF_CONTEXT_*` markers in place.
    /// Since Linux 2.6.31.
    pub call_chain: Option<CallChains>,
    /// The valid (`dyn_size`) bytes of the user stack copy (`PERF_SAMPLE_STACK_USER`). Since Linux 3.7.
    pub user_stack: Option<Vec<u8>>,
    /// The data address (`PERF_SAMPLE_ADDR`), e.g. the faulting address of a page fault. Since Linux 2.6.31.
    pub data_addr: Option<u64>,
    /// The physical data address (`PERF_SAMPLE_PHYS_ADDR`). Since Linux 4.14.
    pub data_phys_addr: Option<u64>,
    /// The page size of the data address (`PERF_SAMPLE_DATA_PAGE_SIZE`). Since Linux 5.11.
    pub data_page_size: Option<u64>,
    /// Where the data was served (`PERF_SAMPLE_DATA_SRC`). Since Linux 3.10.
    pub data_source: Option<DataSource>,
    /// The instruction pointer, and whether it is exact (`PERF_SAMPLE_IP`, `PERF_RECORD_MISC_EXACT_IP`).
    /// Since Linux 2.6.31.
    pub code_addr: Option<(u64, bool)>,
    /// The page size of the code address (`PERF_SAMPLE_CODE_PAGE_SIZE`). Since Linux 5.11.
    pub code_page_size: Option<u64>,
    /// User registers (`PERF_SAMPLE_REGS_USER`); `None` when the task had none (a kernel thread).
    /// Since Linux 3.7.
    pub user_regs: Option<(Vec<u64>, Abi)>,
    /// Registers at the interrupt (`PERF_SAMPLE_REGS_INTR`). Since Linux 3.19.
    pub intr_regs: Option<(Vec<u64>, Abi)>,
    /// Raw PMU or tracepoint data (`PERF_SAMPLE_RAW`). Since Linux 2.6.31.
    pub raw: Option<Vec<u8>>,
    /// The branch stack (`PERF_SAMPLE_BRANCH_STACK`). Since Linux 3.4.
    pub lbr: Option<Lbr>,
    /// A snapshot of the AUX area (`PERF_SAMPLE_AUX`). Since Linux 5.5.
    pub aux: Option<Vec<u8>>,
    /// The transaction abort (`PERF_SAMPLE_TRANSACTION`). Since Linux 3.13.
    pub txn: Option<Txn>,
    /// The weight (`PERF_SAMPLE_WEIGHT`, Since Linux 3.10, or `PERF_SAMPLE_WEIGHT_STRUCT`, Since Linux 5.12).
    pub weight: Option<Weight>,
}
debug!(Sample {
    req record_id,
    opt stat,
    opt period,
    opt cgroup,
    opt call_chain,
    opt user_stack,
    opt data_source,
    opt data_addr,
    opt data_phys_addr,
    opt data_page_size,
    opt code_addr,
    opt code_page_size,
    opt user_regs,
    opt intr_regs,
    opt raw,
    opt lbr,
    opt aux,
    opt txn,
    opt weight,
});

/// MMAP2 extension fields.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Ext {
    /// `PROT_*` protection.
    pub prot: u32,
    /// `MAP_*` flags.
    pub flags: u32,
    /// Device and inode, or the build id.
    pub info: Info,
}

/// What identifies an MMAP2 mapping's file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Info {
    /// Device and inode.
    Device {
        /// Device major number.
        major: u32,
        /// Device minor number.
        minor: u32,
        /// Inode number.
        inode: u64,
        /// Inode generation.
        inode_gen: u64,
    },
    /// The ELF build id (`PERF_RECORD_MISC_MMAP_BUILD_ID`, `use_build_id`). Since Linux 5.12.
    /// Only a counter that asked (`extra_record.mmap.ext = Some(UseBuildId(true))`) reads one:
    /// kernels leave the misc bit on the device-and-inode records of other counters.
    BuildId(Vec<u8>),
}

/// `PERF_RECORD_MMAP` / `PERF_RECORD_MMAP2` (Since Linux 3.16): a mapping was made.
#[doc(alias = "PERF_RECORD_MMAP")]
#[doc(alias = "PERF_RECORD_MMAP2")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Mmap {
    /// Ids, with `sample_id_all`. Since Linux 3.12.
    pub record_id: Option<RecordId>,
    /// An executable mapping (`PERF_RECORD_MISC_MMAP_DATA` unset). Since Linux 2.6.31.
    pub executable: bool,
    /// The task. Since Linux 2.6.31.
    pub task: Task,
    /// Start address. Since Linux 2.6.31.
    pub addr: u64,
    /// Length in bytes. Since Linux 2.6.31.
    pub len: u64,
    /// The file name (or `[anon]`, `//anon`, `[heap]`...). Since Linux 2.6.31.
    pub file: CString,
    /// File offset. Since Linux 2.6.31.
    pub page_offset: u64,
    /// MMAP2 fields (`mmap2`). Since Linux 3.16.
    pub ext: Option<Ext>,
}
debug!(Mmap { opt record_id, req executable, req task, req addr, req len, req file, req page_offset, opt ext });

/// `PERF_RECORD_READ`: the values of an inherited counter in an exiting child (`inherit_stat`).
#[doc(alias = "PERF_RECORD_READ")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Read {
    /// Ids, with `sample_id_all`. Since Linux 3.12.
    pub record_id: Option<RecordId>,
    /// The task. Since Linux 2.6.31.
    pub task: Task,
    /// The values. Since Linux 2.6.31.
    pub stat: Stat,
}
debug!(Read { opt record_id, req task, req stat });

/// `PERF_RECORD_CGROUP`: a cgroup was created. Since Linux 5.7.
#[doc(alias = "PERF_RECORD_CGROUP")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Cgroup {
    /// Ids, with `sample_id_all`. Since Linux 5.7.
    pub record_id: Option<RecordId>,
    /// The cgroup id (its inode number in cgroupfs). Since Linux 5.7.
    pub id: u64,
    /// Its path from the cgroup root. Since Linux 5.7.
    pub path: CString,
}
debug!(Cgroup { opt record_id, req id, req path });

/// Kernel symbol types (`PERF_RECORD_KSYMBOL_TYPE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum KsymbolType {
    /// A BPF program (`PERF_RECORD_KSYMBOL_TYPE_BPF`). Since Linux 5.1.
    Bpf,
    /// Out-of-line code such as kprobe trampolines (`PERF_RECORD_KSYMBOL_TYPE_OOL`). Since Linux 5.9.
    OutOfLine,
    /// Unknown (`PERF_RECORD_KSYMBOL_TYPE_UNKNOWN` or newer).
    Unknown,
}

/// Whether a kernel symbol appeared or went away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum KsymbolState {
    /// Registered.
    Reg,
    /// Unregistered (`PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER`).
    Unreg,
}

/// `PERF_RECORD_KSYMBOL`: a kernel symbol (a BPF program, a trampoline) was registered or
/// unregistered. Since Linux 5.1.
#[doc(alias = "PERF_RECORD_KSYMBOL")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Ksymbol {
    /// Ids, with `sample_id_all`. Since Linux 5.1.
    pub record_id: Option<RecordId>,
    /// The type. Since Linux 5.1.
    pub ty: KsymbolType,
    /// The name. Since Linux 5.1.
    pub name: CString,
    /// Registered or unregistered. Since Linux 5.1.
    pub state: KsymbolState,
    /// Address. Since Linux 5.1.
    pub addr: u64,
    /// Length in bytes. Since Linux 5.1.
    pub len: u32,
}
debug!(Ksymbol { opt record_id, req ty, req name, req state, req addr, req len });

/// `PERF_RECORD_TEXT_POKE`: kernel text changed. Since Linux 5.9.
#[doc(alias = "PERF_RECORD_TEXT_POKE")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TextPoke {
    /// Ids, with `sample_id_all`. Since Linux 5.9.
    pub record_id: Option<RecordId>,
    /// Address. Since Linux 5.9.
    pub addr: u64,
    /// The bytes before. Since Linux 5.9.
    pub old_bytes: Vec<u8>,
    /// The bytes after. Since Linux 5.9.
    pub new_bytes: Vec<u8>,
}
debug!(TextPoke { opt record_id, req addr, req old_bytes, req new_bytes });

/// BPF event types (`PERF_BPF_EVENT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum BpfEventType {
    /// A program was loaded (`PERF_BPF_EVENT_PROG_LOAD`).
    ProgLoad,
    /// A program was unloaded (`PERF_BPF_EVENT_PROG_UNLOAD`).
    ProgUnload,
    /// Unknown.
    Unknown,
}

/// `PERF_RECORD_BPF_EVENT`: a BPF program was loaded or unloaded. Since Linux 5.1.
#[doc(alias = "PERF_RECORD_BPF_EVENT")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BpfEvent {
    /// Ids, with `sample_id_all`. Since Linux 5.1.
    pub record_id: Option<RecordId>,
    /// What happened. Since Linux 5.1.
    pub ty: BpfEventType,
    /// The program id. Since Linux 5.1.
    pub id: u32,
    /// The program tag. Since Linux 5.1.
    pub tag: [u8; 8],
    /// Flags. Since Linux 5.1.
    pub flags: u16,
}
debug!(BpfEvent { opt record_id, req ty, req id, req tag, req flags });

/// A context switch's direction and the other task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Switch {
    /// Switched out (`PERF_RECORD_MISC_SWITCH_OUT`).
    OutTo {
        /// The task switched to (CPU-wide records only).
        task: Option<Task>,
        /// Preempted while runnable (`PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`). Since Linux 4.17.
        preempt: bool,
    },
    /// Switched in; the task switched from (CPU-wide records only).
    InFrom(Option<Task>),
}

/// `PERF_RECORD_SWITCH` / `PERF_RECORD_SWITCH_CPU_WIDE`: a context switch. Since Linux 4.3.
#[doc(alias = "PERF_RECORD_SWITCH")]
#[doc(alias = "PERF_RECORD_SWITCH_CPU_WIDE")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CtxSwitch {
    /// Ids, with `sample_id_all`. Since Linux 4.3.
    pub record_id: Option<RecordId>,
    /// Direction and the other task. Since Linux 4.3.
    pub info: Switch,
}
debug!(CtxSwitch { opt record_id, req info });

/// A namespace's device and inode (`struct perf_ns_link_info`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LinkInfo {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub inode: u64,
}

/// `PERF_RECORD_NAMESPACES`: a new task's namespaces. Since Linux 4.12.
#[doc(alias = "PERF_RECORD_NAMESPACES")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Namespaces {
    /// Ids, with `sample_id_all`. Since Linux 4.12.
    pub record_id: Option<RecordId>,
    /// The task. Since Linux 4.12.
    pub task: Task,
    /// UTS namespace. Since Linux 4.12.
    pub ns_uts: LinkInfo,
    /// PID namespace. Since Linux 4.12.
    pub ns_pid: LinkInfo,
    /// IPC namespace. Since Linux 4.12.
    pub ns_ipc: LinkInfo,
    /// Mount namespace. Since Linux 4.12.
    pub ns_mnt: LinkInfo,
    /// Network namespace. Since Linux 4.12.
    pub ns_net: LinkInfo,
    /// User namespace. Since Linux 4.12.
    pub ns_user: LinkInfo,
    /// Cgroup namespace. Since Linux 4.12.
    pub ns_cgroup: LinkInfo,
}
debug!(Namespaces {
    opt record_id,
    req task,
    req ns_uts,
    req ns_pid,
    req ns_ipc,
    req ns_mnt,
    req ns_net,
    req ns_user,
    req ns_cgroup,
});

/// `PERF_RECORD_ITRACE_START`: instruction tracing started for a task. Since Linux 4.1.
#[doc(alias = "PERF_RECORD_ITRACE_START")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ItraceStart {
    /// Ids, with `sample_id_all`. Since Linux 4.1.
    pub record_id: Option<RecordId>,
    /// The task. Since Linux 4.1.
    pub task: Task,
}
debug!(ItraceStart { opt record_id, req task });

/// `PERF_RECORD_AUX`: new data is available in the AUX area. Since Linux 4.1.
#[doc(alias = "PERF_RECORD_AUX")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Aux {
    /// Ids, with `sample_id_all`. Since Linux 4.1.
    pub record_id: Option<RecordId>,
    /// Data offset in the AUX area (free-running, like `aux_head`). Since Linux 4.1.
    pub offset: u64,
    /// Data size. Since Linux 4.1.
    pub size: u64,
    /// The record was truncated to fit (`PERF_AUX_FLAG_TRUNCATED`). Since Linux 4.1.
    pub truncated: bool,
    /// A snapshot from overwrite mode (`PERF_AUX_FLAG_OVERWRITE`). Since Linux 4.1.
    pub overwrite: bool,
    /// The record contains gaps (`PERF_AUX_FLAG_PARTIAL`). Since Linux 4.12.
    pub partial: bool,
    /// The sample collided with another (`PERF_AUX_FLAG_COLLISION`). Since Linux 4.15.
    pub collision: bool,
    /// PMU-specific trace format type (`PERF_AUX_FLAG_PMU_FORMAT_TYPE_MASK`). Since Linux 5.13.
    pub pmu_format_type: u8,
}
debug!(Aux {
    opt record_id,
    req offset,
    req size,
    req truncated,
    req overwrite,
    req partial,
    req collision,
    req pmu_format_type,
});

/// `PERF_RECORD_AUX_OUTPUT_HW_ID`: the hardware id of an `aux_output` event. Since Linux 5.16.
#[doc(alias = "PERF_RECORD_AUX_OUTPUT_HW_ID")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AuxOutputHwId {
    /// Ids, with `sample_id_all`. Since Linux 5.16.
    pub record_id: Option<RecordId>,
    /// The hardware id. Since Linux 5.16.
    pub hw_id: u64,
}
debug!(AuxOutputHwId { opt record_id, req hw_id });

/// `PERF_RECORD_COMM`: a task's name changed. Since Linux 2.6.31.
#[doc(alias = "PERF_RECORD_COMM")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Comm {
    /// Ids, with `sample_id_all`. Since Linux 3.12.
    pub record_id: Option<RecordId>,
    /// The change came from exec (`PERF_RECORD_MISC_COMM_EXEC`). Since Linux 3.16.
    pub by_execve: bool,
    /// The task. Since Linux 2.6.31.
    pub task: Task,
    /// The new name. Since Linux 2.6.31.
    pub comm: CString,
}
debug!(Comm { opt record_id, req by_execve, req task, req comm });

/// `PERF_RECORD_EXIT`: a task exited. Since Linux 2.6.31.
#[doc(alias = "PERF_RECORD_EXIT")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Exit {
    /// Ids, with `sample_id_all`. Since Linux 3.12.
    pub record_id: Option<RecordId>,
    /// The task. Since Linux 2.6.31.
    pub task: Task,
    /// Its parent. Since Linux 2.6.31.
    pub parent_task: Task,
    /// Timestamp. Since Linux 2.6.31.
    pub time: u64,
}
debug!(Exit { opt record_id, req task, req parent_task, req time });

/// `PERF_RECORD_FORK`: a task was created. Since Linux 2.6.31.
#[doc(alias = "PERF_RECORD_FORK")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Fork {
    /// Ids, with `sample_id_all`. Since Linux 3.12.
    pub record_id: Option<RecordId>,
    /// The new task. Since Linux 2.6.31.
    pub task: Task,
    /// Its parent. Since Linux 2.6.31.
    pub parent_task: Task,
    /// Timestamp. Since Linux 2.6.31.
    pub time: u64,
}
debug!(Fork { opt record_id, req task, req parent_task, req time });

/// `PERF_RECORD_THROTTLE`: the kernel throttled sampling (too many samples per second). Since Linux 2.6.31.
#[doc(alias = "PERF_RECORD_THROTTLE")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Throttle {
    /// Ids, with `sample_id_all`. Since Linux 3.12.
    pub record_id: Option<RecordId>,
    /// Timestamp. Since Linux 2.6.31.
    pub time: u64,
    /// Counter id. Since Linux 2.6.31.
    pub id: u64,
    /// Stream id. Since Linux 2.6.31.
    pub stream_id: u64,
}
debug!(Throttle { opt record_id, req time, req id, req stream_id });

/// `PERF_RECORD_UNTHROTTLE`: sampling resumed. Since Linux 2.6.31.
#[doc(alias = "PERF_RECORD_UNTHROTTLE")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Unthrottle {
    /// Ids, with `sample_id_all`. Since Linux 3.12.
    pub record_id: Option<RecordId>,
    /// Timestamp. Since Linux 2.6.31.
    pub time: u64,
    /// Counter id. Since Linux 2.6.31.
    pub id: u64,
    /// Stream id. Since Linux 2.6.31.
    pub stream_id: u64,
}
debug!(Unthrottle { opt record_id, req time, req id, req stream_id });

/// `PERF_RECORD_LOST`: records dropped because the ring was full. Since Linux 2.6.31.
///
/// The kernel writes it only once a later record fits in the ring, so a loss at the very end of a
/// capture never shows as a `LostRecords`: read [`Sampler::lost`](crate::sample::Sampler::lost)
/// (its [`total`](crate::sample::LostCounts::total) includes the kernel's own count,
/// `PERF_FORMAT_LOST`) after the last drain.
#[doc(alias = "PERF_RECORD_LOST")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LostRecords {
    /// Ids, with `sample_id_all`. Since Linux 3.12.
    pub record_id: Option<RecordId>,
    /// The counter whose records were lost. Since Linux 2.6.31.
    pub id: u64,
    /// How many. Since Linux 2.6.31.
    pub lost_records: u64,
}
debug!(LostRecords { opt record_id, req id, req lost_records });

/// `PERF_RECORD_LOST_SAMPLES`: samples dropped (e.g. by the PMU hardware). Since Linux 4.2.
#[doc(alias = "PERF_RECORD_LOST_SAMPLES")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LostSamples {
    /// Ids, with `sample_id_all`. Since Linux 4.2.
    pub record_id: Option<RecordId>,
    /// How many. Since Linux 4.2.
    pub lost_samples: u64,
}
debug!(LostSamples { opt record_id, req lost_samples });

/// `PERF_RECORD_CALLCHAIN_DEFERRED`: the user part of earlier samples' call chains. Since Linux 6.19.
#[doc(alias = "PERF_RECORD_CALLCHAIN_DEFERRED")]
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CallChainDeferred {
    /// Ids, with `sample_id_all`. Since Linux 6.19.
    pub record_id: Option<RecordId>,
    /// Matches the `PERF_CONTEXT_USER_DEFERRED` cookie in the samples to stitch. Since Linux 6.19.
    pub cookie: u64,
    /// The user call chain. Since Linux 6.19.
    pub call_chain: Vec<u64>,
}
debug!(CallChainDeferred { opt record_id, req cookie, req call_chain });

/// A record. `{:-?}` prints the record alone, compactly.
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Record {
    /// `PERF_RECORD_SAMPLE`.
    Sample(Box<Sample>),
    /// `PERF_RECORD_MMAP` / `PERF_RECORD_MMAP2`.
    Mmap(Box<Mmap>),
    /// `PERF_RECORD_READ`.
    Read(Box<Read>),
    /// `PERF_RECORD_CGROUP`. Since Linux 5.7.
    Cgroup(Box<Cgroup>),
    /// `PERF_RECORD_KSYMBOL`. Since Linux 5.1.
    Ksymbol(Box<Ksymbol>),
    /// `PERF_RECORD_TEXT_POKE`. Since Linux 5.9.
    TextPoke(Box<TextPoke>),
    /// `PERF_RECORD_BPF_EVENT`. Since Linux 5.1.
    BpfEvent(Box<BpfEvent>),
    /// `PERF_RECORD_SWITCH` / `PERF_RECORD_SWITCH_CPU_WIDE`. Since Linux 4.3.
    CtxSwitch(Box<CtxSwitch>),
    /// `PERF_RECORD_NAMESPACES`. Since Linux 4.12.
    Namespaces(Box<Namespaces>),
    /// `PERF_RECORD_ITRACE_START`. Since Linux 4.1.
    ItraceStart(Box<ItraceStart>),
    /// `PERF_RECORD_AUX`. Since Linux 4.1.
    Aux(Box<Aux>),
    /// `PERF_RECORD_AUX_OUTPUT_HW_ID`. Since Linux 5.16.
    AuxOutputHwId(Box<AuxOutputHwId>),
    /// `PERF_RECORD_COMM`.
    Comm(Box<Comm>),
    /// `PERF_RECORD_EXIT`.
    Exit(Box<Exit>),
    /// `PERF_RECORD_FORK`.
    Fork(Box<Fork>),
    /// `PERF_RECORD_THROTTLE`.
    Throttle(Box<Throttle>),
    /// `PERF_RECORD_UNTHROTTLE`.
    Unthrottle(Box<Unthrottle>),
    /// `PERF_RECORD_LOST`.
    LostRecords(Box<LostRecords>),
    /// `PERF_RECORD_LOST_SAMPLES`. Since Linux 4.2.
    LostSamples(Box<LostSamples>),
    /// `PERF_RECORD_CALLCHAIN_DEFERRED`. Since Linux 6.19.
    CallChainDeferred(Box<CallChainDeferred>),
    /// A record of a type this crate does not know, or one that did not parse: its bytes, header
    /// included.
    Unknown(Vec<u8>),
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Record::Sample(r) => r.fmt(f),
            Record::Mmap(r) => r.fmt(f),
            Record::Read(r) => r.fmt(f),
            Record::Cgroup(r) => r.fmt(f),
            Record::Ksymbol(r) => r.fmt(f),
            Record::TextPoke(r) => r.fmt(f),
            Record::BpfEvent(r) => r.fmt(f),
            Record::CtxSwitch(r) => r.fmt(f),
            Record::Namespaces(r) => r.fmt(f),
            Record::ItraceStart(r) => r.fmt(f),
            Record::Aux(r) => r.fmt(f),
            Record::AuxOutputHwId(r) => r.fmt(f),
            Record::Comm(r) => r.fmt(f),
            Record::Exit(r) => r.fmt(f),
            Record::Fork(r) => r.fmt(f),
            Record::Throttle(r) => r.fmt(f),
            Record::Unthrottle(r) => r.fmt(f),
            Record::LostRecords(r) => r.fmt(f),
            Record::LostSamples(r) => r.fmt(f),
            Record::CallChainDeferred(r) => r.fmt(f),
            Record::Unknown(bytes) => write!(f, "Unknown({bytes:?})"),
        }
    }
}

impl Record {
    /// The record's ids: a sample's own, or the `sample_id` trailer of the others (`None` without
    /// `sample_id_all`, and for unknown records).
    pub fn record_id(&self) -> Option<&RecordId> {
        match self {
            Record::Sample(r) => Some(&r.record_id),
            Record::Mmap(r) => r.record_id.as_ref(),
            Record::Read(r) => r.record_id.as_ref(),
            Record::Cgroup(r) => r.record_id.as_ref(),
            Record::Ksymbol(r) => r.record_id.as_ref(),
            Record::TextPoke(r) => r.record_id.as_ref(),
            Record::BpfEvent(r) => r.record_id.as_ref(),
            Record::CtxSwitch(r) => r.record_id.as_ref(),
            Record::Namespaces(r) => r.record_id.as_ref(),
            Record::ItraceStart(r) => r.record_id.as_ref(),
            Record::Aux(r) => r.record_id.as_ref(),
            Record::AuxOutputHwId(r) => r.record_id.as_ref(),
            Record::Comm(r) => r.record_id.as_ref(),
            Record::Exit(r) => r.record_id.as_ref(),
            Record::Fork(r) => r.record_id.as_ref(),
            Record::Throttle(r) => r.record_id.as_ref(),
            Record::Unthrottle(r) => r.record_id.as_ref(),
            Record::LostRecords(r) => r.record_id.as_ref(),
            Record::LostSamples(r) => r.record_id.as_ref(),
            Record::CallChainDeferred(r) => r.record_id.as_ref(),
            Record::Unknown(_) => None,
        }
    }
}
