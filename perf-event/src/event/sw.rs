//! Software events: counted by the kernel, available everywhere (`PERF_TYPE_SOFTWARE`).

use perf_sys as sys;

use super::Event;

/// A software event (`PERF_TYPE_SOFTWARE`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[doc(alias = "PERF_TYPE_SOFTWARE")]
pub enum Software {
    /// Wall time on the CPU in ns, per CPU (`PERF_COUNT_SW_CPU_CLOCK`, "cpu-clock").
    #[doc(alias = "PERF_COUNT_SW_CPU_CLOCK")]
    CpuClock,
    /// Time the task ran in ns (`PERF_COUNT_SW_TASK_CLOCK`, "task-clock").
    #[doc(alias = "PERF_COUNT_SW_TASK_CLOCK")]
    TaskClock,
    /// Page faults (`PERF_COUNT_SW_PAGE_FAULTS`, "page-faults").
    #[doc(alias = "PERF_COUNT_SW_PAGE_FAULTS")]
    PageFault,
    /// Minor page faults (`PERF_COUNT_SW_PAGE_FAULTS_MIN`, "minor-faults").
    #[doc(alias = "PERF_COUNT_SW_PAGE_FAULTS_MIN")]
    MinorPageFault,
    /// Major page faults, those that needed I/O (`PERF_COUNT_SW_PAGE_FAULTS_MAJ`, "major-faults").
    #[doc(alias = "PERF_COUNT_SW_PAGE_FAULTS_MAJ")]
    MajorPageFault,
    /// Instructions emulated by the kernel (`PERF_COUNT_SW_EMULATION_FAULTS`).
    #[doc(alias = "PERF_COUNT_SW_EMULATION_FAULTS")]
    EmuFault,
    /// Unaligned accesses fixed up by the kernel (`PERF_COUNT_SW_ALIGNMENT_FAULTS`).
    #[doc(alias = "PERF_COUNT_SW_ALIGNMENT_FAULTS")]
    AlignFault,
    /// Context switches (`PERF_COUNT_SW_CONTEXT_SWITCHES`, "context-switches"). They happen in the
    /// kernel: with `exclude.kernel` nothing is counted.
    #[doc(alias = "PERF_COUNT_SW_CONTEXT_SWITCHES")]
    CtxSwitch,
    /// Switches to a task of another cgroup (`PERF_COUNT_SW_CGROUP_SWITCHES`). Since Linux 5.13.
    #[doc(alias = "PERF_COUNT_SW_CGROUP_SWITCHES")]
    CgroupSwitch,
    /// Counts nothing; a carrier for side-band records (`PERF_COUNT_SW_DUMMY`).
    #[doc(alias = "PERF_COUNT_SW_DUMMY")]
    Dummy,
    /// Output of `bpf_perf_event_output` (`PERF_COUNT_SW_BPF_OUTPUT`). Since Linux 4.4.
    #[doc(alias = "PERF_COUNT_SW_BPF_OUTPUT")]
    BpfOutput,
    /// Migrations to another CPU (`PERF_COUNT_SW_CPU_MIGRATIONS`, "cpu-migrations").
    #[doc(alias = "PERF_COUNT_SW_CPU_MIGRATIONS")]
    CpuMigration,
}

impl Software {
    /// Every software event.
    pub const ALL: [Software; 12] = [
        Self::CpuClock,
        Self::TaskClock,
        Self::PageFault,
        Self::MinorPageFault,
        Self::MajorPageFault,
        Self::EmuFault,
        Self::AlignFault,
        Self::CtxSwitch,
        Self::CgroupSwitch,
        Self::Dummy,
        Self::BpfOutput,
        Self::CpuMigration,
    ];

    /// The `PERF_COUNT_SW_*` number.
    pub fn config(self) -> u64 {
        u64::from(match self {
            Self::CpuClock => sys::PERF_COUNT_SW_CPU_CLOCK,
            Self::TaskClock => sys::PERF_COUNT_SW_TASK_CLOCK,
            Self::PageFault => sys::PERF_COUNT_SW_PAGE_FAULTS,
            Self::MinorPageFault => sys::PERF_COUNT_SW_PAGE_FAULTS_MIN,
            Self::MajorPageFault => sys::PERF_COUNT_SW_PAGE_FAULTS_MAJ,
            Self::EmuFault => sys::PERF_COUNT_SW_EMULATION_FAULTS,
            Self::AlignFault => sys::PERF_COUNT_SW_ALIGNMENT_FAULTS,
            Self::CtxSwitch => sys::PERF_COUNT_SW_CONTEXT_SWITCHES,
            Self::CgroupSwitch => sys::PERF_COUNT_SW_CGROUP_SWITCHES,
            Self::Dummy => sys::PERF_COUNT_SW_DUMMY,
            Self::BpfOutput => sys::PERF_COUNT_SW_BPF_OUTPUT,
            Self::CpuMigration => sys::PERF_COUNT_SW_CPU_MIGRATIONS,
        })
    }

    /// The name `perf list` uses.
    pub fn perf_name(self) -> &'static str {
        match self {
            Self::CpuClock => "cpu-clock",
            Self::TaskClock => "task-clock",
            Self::PageFault => "page-faults",
            Self::MinorPageFault => "minor-faults",
            Self::MajorPageFault => "major-faults",
            Self::EmuFault => "emulation-faults",
            Self::AlignFault => "alignment-faults",
            Self::CtxSwitch => "context-switches",
            Self::CgroupSwitch => "cgroup-switches",
            Self::Dummy => "dummy",
            Self::BpfOutput => "bpf-output",
            Self::CpuMigration => "cpu-migrations",
        }
    }
}

super::into_event!(Software, v => Event::new(sys::PERF_TYPE_SOFTWARE, v.config(), v.perf_name()));
