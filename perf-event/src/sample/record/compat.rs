//! perf-event-open 0.5's module per record kind (`sample::record::mmap::Mmap`, ...): the same
//! types as the flat re-exports of [`record`](super), under the paths code written for that crate
//! names. See the crate docs' "Migrating from perf-event-open" section.

/// `PERF_RECORD_AUX` and `PERF_RECORD_AUX_OUTPUT_HW_ID`.
pub mod auxiliary {
    pub use super::super::{Aux, AuxOutputHwId};
}

/// `PERF_RECORD_BPF_EVENT`.
pub mod bpf {
    pub use super::super::BpfEvent;
    pub use super::super::BpfEventType as Type;
}

/// `PERF_RECORD_CALLCHAIN_DEFERRED`.
pub mod call_chain {
    pub use super::super::CallChainDeferred;
}

/// `PERF_RECORD_CGROUP`.
pub mod cgroup {
    pub use super::super::Cgroup;
}

/// `PERF_RECORD_COMM`.
pub mod comm {
    pub use super::super::Comm;
}

/// `PERF_RECORD_SWITCH` and `PERF_RECORD_SWITCH_CPU_WIDE`.
pub mod ctx {
    pub use super::super::{CtxSwitch, Switch};
}

/// `PERF_RECORD_ITRACE_START`.
pub mod itrace {
    pub use super::super::ItraceStart;
}

/// `PERF_RECORD_KSYMBOL`.
pub mod ksymbol {
    pub use super::super::Ksymbol;
    pub use super::super::KsymbolState as State;
    pub use super::super::KsymbolType as Type;
}

/// `PERF_RECORD_LOST` and `PERF_RECORD_LOST_SAMPLES`.
pub mod lost {
    pub use super::super::{LostRecords, LostSamples};
}

/// `PERF_RECORD_MMAP` and `PERF_RECORD_MMAP2`.
pub mod mmap {
    pub use super::super::{Ext, Info, Mmap};
}

/// `PERF_RECORD_NAMESPACES`.
pub mod ns {
    pub use super::super::{LinkInfo, Namespaces};
}

/// `PERF_RECORD_READ`.
pub mod read {
    pub use super::super::Read;
}

/// `PERF_RECORD_SAMPLE` and the types of its fields.
pub mod sample {
    pub use super::super::{
        Abi, BranchPriv, BranchSpec, BranchType, CallChain, DataSource, Entry, Lbr, MemBlock,
        MemHop, MemLevel, MemLevel2, MemLock, MemOp, MemSnoop, MemTlb, Sample, Txn, Weight,
    };
}

/// `PERF_RECORD_EXIT` and `PERF_RECORD_FORK`.
pub mod task {
    pub use super::super::{Exit, Fork};
}

/// `PERF_RECORD_TEXT_POKE`.
pub mod text_poke {
    pub use super::super::TextPoke;
}

/// `PERF_RECORD_THROTTLE` and `PERF_RECORD_UNTHROTTLE`.
pub mod throttle {
    pub use super::super::{Throttle, Unthrottle};
}

use super::*;

/// `Record::from(Box::new(mmap))` and friends, as perf-event-open 0.5 has them: one per boxed
/// record kind.
macro_rules! from_boxed {
    ($($kind:ident),* $(,)?) => {$(
        impl From<Box<$kind>> for Record {
            fn from(r: Box<$kind>) -> Self {
                Record::$kind(r)
            }
        }
    )*};
}
from_boxed!(
    Sample,
    Mmap,
    Read,
    Cgroup,
    Ksymbol,
    TextPoke,
    BpfEvent,
    CtxSwitch,
    Namespaces,
    ItraceStart,
    Aux,
    AuxOutputHwId,
    Comm,
    Exit,
    Fork,
    Throttle,
    Unthrottle,
    LostRecords,
    LostSamples,
    CallChainDeferred,
);
