//! Generalized hardware events of the CPU PMU (`PERF_TYPE_HARDWARE`, `PERF_TYPE_HW_CACHE`).
//!
//! Virtual machines often have no CPU PMU; opening then fails with
//! [`Error::NotSupported`](crate::Error::NotSupported) saying so. On hybrid CPUs (Intel P/E cores,
//! Arm big.LITTLE) pick the core type with [`Hardware::on_pmu`].

use perf_sys as sys;

use super::Event;

/// A generalized hardware event.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[doc(alias = "PERF_TYPE_HARDWARE")]
pub enum Hardware {
    /// CPU cycles (`PERF_COUNT_HW_CPU_CYCLES`, "cycles").
    CpuCycle,
    /// Bus cycles (`PERF_COUNT_HW_BUS_CYCLES`).
    BusCycle,
    /// Cycles not affected by frequency scaling (`PERF_COUNT_HW_REF_CPU_CYCLES`).
    RefCpuCycle,
    /// A cache event (`PERF_TYPE_HW_CACHE`).
    Cache(Type, Op, OpResult),
    /// Cache misses, usually last level (`PERF_COUNT_HW_CACHE_MISSES`).
    CacheMiss,
    /// Cache accesses, usually last level (`PERF_COUNT_HW_CACHE_REFERENCES`).
    CacheAccess,
    /// Mispredicted branches (`PERF_COUNT_HW_BRANCH_MISSES`).
    BranchMiss,
    /// Retired branch instructions (`PERF_COUNT_HW_BRANCH_INSTRUCTIONS`).
    BranchInstr,
    /// Stalled cycles in the back end (`PERF_COUNT_HW_STALLED_CYCLES_BACKEND`).
    BackendStalledCycle,
    /// Stalled cycles in the front end (`PERF_COUNT_HW_STALLED_CYCLES_FRONTEND`).
    FrontendStalledCycle,
    /// Retired instructions (`PERF_COUNT_HW_INSTRUCTIONS`, "instructions").
    Instr,
}

/// The cache of a [`Hardware::Cache`] event.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Type {
    /// Level 1 data.
    L1d,
    /// Level 1 instructions.
    L1i,
    /// Last level.
    Ll,
    /// Data TLB.
    Dtlb,
    /// Instruction TLB.
    Itlb,
    /// Branch prediction unit.
    Bpu,
    /// Local memory accesses (NUMA node).
    Node,
}

/// The operation of a [`Hardware::Cache`] event.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Op {
    /// Reads.
    Read,
    /// Writes.
    Write,
    /// Prefetches.
    Prefetch,
}

/// The result of a [`Hardware::Cache`] event.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum OpResult {
    /// Misses.
    Miss,
    /// Accesses.
    Access,
}

impl Hardware {
    /// `(type, config)` of the event.
    pub fn encode(&self) -> (u32, u64) {
        let hw = |c: u32| (sys::PERF_TYPE_HARDWARE, u64::from(c));
        match self {
            Self::CpuCycle => hw(sys::PERF_COUNT_HW_CPU_CYCLES),
            Self::BusCycle => hw(sys::PERF_COUNT_HW_BUS_CYCLES),
            Self::RefCpuCycle => hw(sys::PERF_COUNT_HW_REF_CPU_CYCLES),
            Self::CacheMiss => hw(sys::PERF_COUNT_HW_CACHE_MISSES),
            Self::CacheAccess => hw(sys::PERF_COUNT_HW_CACHE_REFERENCES),
            Self::BranchMiss => hw(sys::PERF_COUNT_HW_BRANCH_MISSES),
            Self::BranchInstr => hw(sys::PERF_COUNT_HW_BRANCH_INSTRUCTIONS),
            Self::BackendStalledCycle => hw(sys::PERF_COUNT_HW_STALLED_CYCLES_BACKEND),
            Self::FrontendStalledCycle => hw(sys::PERF_COUNT_HW_STALLED_CYCLES_FRONTEND),
            Self::Instr => hw(sys::PERF_COUNT_HW_INSTRUCTIONS),
            Self::Cache(ty, op, res) => {
                let id = match ty {
                    Type::L1d => sys::PERF_COUNT_HW_CACHE_L1D,
                    Type::L1i => sys::PERF_COUNT_HW_CACHE_L1I,
                    Type::Ll => sys::PERF_COUNT_HW_CACHE_LL,
                    Type::Dtlb => sys::PERF_COUNT_HW_CACHE_DTLB,
                    Type::Itlb => sys::PERF_COUNT_HW_CACHE_ITLB,
                    Type::Bpu => sys::PERF_COUNT_HW_CACHE_BPU,
                    Type::Node => sys::PERF_COUNT_HW_CACHE_NODE,
                };
                let op = match op {
                    Op::Read => sys::PERF_COUNT_HW_CACHE_OP_READ,
                    Op::Write => sys::PERF_COUNT_HW_CACHE_OP_WRITE,
                    Op::Prefetch => sys::PERF_COUNT_HW_CACHE_OP_PREFETCH,
                };
                let res = match res {
                    OpResult::Access => sys::PERF_COUNT_HW_CACHE_RESULT_ACCESS,
                    OpResult::Miss => sys::PERF_COUNT_HW_CACHE_RESULT_MISS,
                };
                let config = u64::from(id) | u64::from(op) << 8 | u64::from(res) << 16;
                (sys::PERF_TYPE_HW_CACHE, config)
            }
        }
    }

    /// The event on one PMU of a hybrid CPU: the PMU's type goes in the high 32 bits of `config`
    /// (`PERF_PMU_TYPE_SHIFT`, Linux 6.0). See [`hybrid_pmus`].
    #[doc(alias = "PERF_PMU_TYPE_SHIFT")]
    pub fn on_pmu(&self, pmu_type: u32) -> Event {
        let mut e = Event::from(self);
        e.config |= u64::from(pmu_type) << sys::PERF_PMU_TYPE_SHIFT;
        e.name = format!("{}/{}", pmu_type, e.name);
        e
    }

    fn perf_name(&self) -> String {
        match self {
            Self::CpuCycle => "cycles".into(),
            Self::BusCycle => "bus-cycles".into(),
            Self::RefCpuCycle => "ref-cycles".into(),
            Self::CacheMiss => "cache-misses".into(),
            Self::CacheAccess => "cache-references".into(),
            Self::BranchMiss => "branch-misses".into(),
            Self::BranchInstr => "branches".into(),
            Self::BackendStalledCycle => "stalled-cycles-backend".into(),
            Self::FrontendStalledCycle => "stalled-cycles-frontend".into(),
            Self::Instr => "instructions".into(),
            Self::Cache(t, o, r) => format!("{t:?}-{o:?}-{r:?}").to_lowercase(),
        }
    }
}

super::into_event!(Hardware, v => {
    let (ty, config) = v.encode();
    Event::new(ty, config, v.perf_name())
});

/// The core PMUs of a hybrid CPU (`cpu_core`, `cpu_atom`, one `armv8_*` per Arm cluster) with
/// their type numbers; empty on a machine with one CPU PMU or none. Core PMUs are those perf
/// counts as such: `cpu`, or any PMU with a `cpus` file (see
/// [`Machine::core_pmus`](super::spec::Machine::core_pmus)).
pub fn hybrid_pmus() -> Vec<(String, u32)> {
    let cores = super::spec::Machine::current().core_pmus();
    if cores.len() > 1 {
        cores
            .iter()
            .map(|p| (p.name().to_owned(), p.ty()))
            .collect()
    } else {
        Vec::new()
    }
}
