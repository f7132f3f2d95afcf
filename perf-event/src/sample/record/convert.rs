//! [`Parser`]: perf-core's parse of a record's bytes, converted to the owned types.

// The generated constants' types differ between the kernel headers perf-sys is generated from, so
// they are cast to the field's width even where that is the same type.
#![allow(clippy::unnecessary_cast)]

use std::ffi::CString;

use perf_core::record::{self as core, CpuMode, ReadValues, Regs, SampleView};
use perf_core::{Chunk, ParseConfig, RawRecord};
use perf_sys::*;

use super::decoded::*;
use super::types::*;
use super::CallChains;
use crate::count::{SiblingStat, Stat};
use crate::sample::CowChunk;

/// Turns a record's bytes into a typed [`Record`], with the layout of the counter that wrote it.
///
/// With the `serde` feature it serializes, so bytes captured now can be parsed later elsewhere.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Parser {
    cfg: ParseConfig,
}

impl Parser {
    /// A parser for the records of a counter opened with `attr` (its `sample_type`, `read_format`,
    /// `sample_id_all`, register masks and branch sample type).
    pub fn from_attr(attr: &perf_event_attr) -> Self {
        Self {
            cfg: ParseConfig::from_attr(attr),
        }
    }

    /// A parser with the layout perf-core describes.
    pub fn from_config(cfg: ParseConfig) -> Self {
        Self { cfg }
    }

    /// The layout.
    pub fn config(&self) -> &ParseConfig {
        &self.cfg
    }

    /// Parses one record (header included) from a [`CowIter`](crate::sample::CowIter) chunk.
    ///
    /// Never panics: bytes that do not parse as their header says come back as
    /// [`Record::Unknown`].
    pub fn parse(&self, chunk: CowChunk<'_>) -> (Priv, Record) {
        self.parse_chunk(chunk.as_chunk())
    }

    /// Parses one record (header included) from contiguous bytes, e.g. captured earlier.
    pub fn parse_bytes(&self, bytes: &[u8]) -> (Priv, Record) {
        self.parse_chunk(Chunk::contiguous(bytes))
    }

    /// Parses one record (header included) given as one or two slices.
    pub fn parse_chunk(&self, chunk: Chunk<'_>) -> (Priv, Record) {
        let Ok((raw, _)) = RawRecord::from_chunk(chunk) else {
            return unknown(chunk);
        };
        if raw.record_type() == PERF_RECORD_SAMPLE {
            // The sample's fields go straight from its bytes into the owned record (the view validates
            // the body in one pass); a sample the view refuses is one `parse` refuses too.
            return match raw.sample_view(&self.cfg) {
                Some(v) => (
                    priv_of(v.misc().cpumode()),
                    Record::Sample(sample(&v, &self.cfg)),
                ),
                None => unknown(chunk),
            };
        }
        match raw.parse(&self.cfg) {
            Ok(record) => convert(record, &self.cfg),
            Err(_) => unknown(chunk),
        }
    }
}

/// Bytes that do not parse as their header says, kept as they are.
#[cold]
fn unknown(chunk: Chunk<'_>) -> (Priv, Record) {
    let misc = chunk.read_u16(4).unwrap_or(0);
    (
        priv_of(core::Misc(misc).cpumode()),
        Record::Unknown(chunk.to_vec()),
    )
}

pub(crate) fn priv_of(mode: CpuMode) -> Priv {
    match mode {
        CpuMode::User => Priv::User,
        CpuMode::Kernel => Priv::Kernel,
        CpuMode::Hypervisor => Priv::Hv,
        CpuMode::GuestUser => Priv::GuestUser,
        CpuMode::GuestKernel => Priv::GuestKernel,
        _ => Priv::Unknown,
    }
}

fn task(pid: u32, tid: u32) -> Task {
    Task { pid, tid }
}

fn c_string(bytes: Vec<u8>) -> CString {
    // perf-core cut the string at its first NUL, so there is none inside.
    CString::new(bytes).unwrap_or_default()
}

fn record_id(id: &core::SampleId, cfg: &ParseConfig) -> Option<RecordId> {
    cfg.sample_id_all().then(|| RecordId {
        id: id.id.or(id.identifier),
        stream_id: id.stream_id,
        cpu: id.cpu,
        task: id.thread.map(|t| task(t.pid, t.tid)),
        time: id.time,
    })
}

fn stat(values: &ReadValues<'_>) -> Stat {
    match values {
        ReadValues::Single(s) => Stat {
            count: s.value,
            id: s.id,
            time_enabled: s.time_enabled,
            time_running: s.time_running,
            lost_records: s.lost,
            siblings: Vec::new(),
        },
        ReadValues::Group(g) => {
            let mut entries = g.entries();
            let leader = entries.next().unwrap_or_default();
            Stat {
                count: leader.value,
                id: leader.id,
                time_enabled: g.time_enabled,
                time_running: g.time_running,
                lost_records: leader.lost,
                siblings: entries
                    .map(|e| SiblingStat {
                        count: e.value,
                        id: e.id,
                        lost_records: e.lost,
                    })
                    .collect(),
            }
        }
    }
}

fn regs(r: &Regs<'_>) -> Option<(Vec<u64>, Abi)> {
    let abi = match r.abi {
        x if x == u64::from(PERF_SAMPLE_REGS_ABI_32) => Abi::_32,
        x if x == u64::from(PERF_SAMPLE_REGS_ABI_64) => Abi::_64,
        _ => return None,
    };
    Some((r.values.to_vec(), abi))
}

fn txn(bits: u64) -> Txn {
    let has = |flag| bits & (flag as u64) != 0;
    Txn {
        elision: has(PERF_TXN_ELISION),
        tx: has(PERF_TXN_TRANSACTION),
        is_sync: has(PERF_TXN_SYNC),
        is_async: has(PERF_TXN_ASYNC),
        retry: has(PERF_TXN_RETRY),
        conflict: has(PERF_TXN_CONFLICT),
        capacity_read: has(PERF_TXN_CAPACITY_READ),
        capacity_write: has(PERF_TXN_CAPACITY_WRITE),
        code: ((bits & PERF_TXN_ABORT_MASK as u64) >> PERF_TXN_ABORT_SHIFT as u64) as u32,
    }
}

/// The owned sample, each field read from the validated bytes of its view and written into the box in
/// place (a sample is over 500 bytes: building it on the stack and moving it into the box would copy it).
#[inline]
fn sample(v: &SampleView<'_>, cfg: &ParseConfig) -> Box<Sample> {
    let mut s = Box::new(Sample {
        record_id: RecordId::default(),
        stat: None,
        period: None,
        cgroup: None,
        call_chain: None,
        user_stack: None,
        data_addr: None,
        data_phys_addr: None,
        data_page_size: None,
        data_source: None,
        code_addr: None,
        code_page_size: None,
        user_regs: None,
        intr_regs: None,
        raw: None,
        lbr: None,
        aux: None,
        txn: None,
        weight: None,
    });
    s.record_id = RecordId {
        id: v.id().or_else(|| v.identifier()),
        stream_id: v.stream_id(),
        cpu: v.cpu(),
        task: v.thread().map(|t| task(t.pid, t.tid)),
        time: v.time(),
    };
    s.period = v.period();
    s.code_addr = v.ip().map(|ip| (ip, v.misc().exact_ip()));
    s.data_addr = v.addr();
    s.call_chain = v.callchain().map(|c| CallChains::from(c.ips.to_vec()));
    s.raw = v.raw().map(|r| r.to_vec());
    let st = cfg.sample_type();
    // The rarer fields, behind one test.
    const RARE: u32 = PERF_SAMPLE_READ
        | PERF_SAMPLE_BRANCH_STACK
        | PERF_SAMPLE_REGS_USER
        | PERF_SAMPLE_STACK_USER
        | PERF_SAMPLE_WEIGHT
        | PERF_SAMPLE_DATA_SRC
        | PERF_SAMPLE_TRANSACTION
        | PERF_SAMPLE_REGS_INTR
        | PERF_SAMPLE_PHYS_ADDR
        | PERF_SAMPLE_AUX
        | PERF_SAMPLE_WEIGHT_STRUCT
        | PERF_SAMPLE_DATA_PAGE_SIZE
        | PERF_SAMPLE_CODE_PAGE_SIZE
        | PERF_SAMPLE_CGROUP;
    if st & u64::from(RARE) != 0 {
        rare_fields(v, cfg, &mut s);
    }
    s
}

/// The fields most samplers do not ask for.
#[inline(never)]
fn rare_fields(v: &SampleView<'_>, cfg: &ParseConfig, s: &mut Sample) {
    s.stat = v.read().as_ref().map(stat);
    s.cgroup = v.cgroup();
    s.user_stack = v.stack_user().map(|st| {
        let valid = usize::try_from(st.dyn_size).map_or(st.data.len(), |d| d.min(st.data.len()));
        st.data.chunk().get(0, valid).unwrap_or_default().to_vec()
    });
    s.data_phys_addr = v.phys_addr();
    s.data_page_size = v.data_page_size();
    s.data_source = v.data_src().map(DataSource::from_bits);
    s.code_page_size = v.code_page_size();
    s.user_regs = v.regs_user().as_ref().and_then(regs);
    s.intr_regs = v.regs_intr().as_ref().and_then(regs);
    s.lbr = v.branch_stack().as_ref().map(lbr);
    s.aux = v.aux().map(|a| a.to_vec());
    s.txn = v.transaction().map(txn);
    s.weight = v.weight().map(|w| {
        if cfg.sample_type() & u64::from(PERF_SAMPLE_WEIGHT_STRUCT) != 0 {
            Weight::Vars {
                var1: w.var1_dw(),
                var2: w.var2_w(),
                var3: w.var3_w(),
            }
        } else {
            Weight::Full(w.full())
        }
    });
}

fn lbr(b: &core::BranchStack<'_>) -> Lbr {
    let counters = b.counters.as_ref();
    Lbr {
        hw_index: b.hw_idx,
        entries: b
            .entries()
            .enumerate()
            .map(|(i, e)| Entry {
                from: e.from,
                to: e.to,
                mis: e.flags.mispred(),
                pred: e.flags.predicted(),
                in_tx: e.flags.in_tx(),
                abort: e.flags.abort(),
                cycles: e.flags.cycles(),
                branch_type: BranchType::from_bits(e.flags.branch_type(), e.flags.new_type()),
                branch_spec: BranchSpec::from_bits(e.flags.spec()),
                branch_priv: BranchPriv::from_bits(e.flags.privilege()),
                counter: counters.and_then(|c| c.get(i)),
            })
            .collect(),
    }
}

/// The owned form of a parsed record, with the cpumode of its header.
pub(crate) fn convert(record: core::Record<'_>, cfg: &ParseConfig) -> (Priv, Record) {
    use core::Record as C;
    let cpumode = priv_of(record.misc().cpumode());
    let rid = |id: &core::SampleId| record_id(id, cfg);
    let out = match record {
        // Samples are converted from their view (`Parser::parse_chunk`), never from here.
        C::Sample(_) => Record::Unknown(Vec::new()),
        C::Mmap(m) => Record::Mmap(Box::new(Mmap {
            record_id: rid(&m.sample_id),
            executable: !m.misc.mmap_data(),
            task: task(m.pid, m.tid),
            addr: m.addr,
            len: m.len,
            file: c_string(m.filename.to_vec()),
            page_offset: m.pgoff,
            ext: None,
        })),
        C::Mmap2(m) => {
            let info = match m.file {
                core::Mmap2File::Inode {
                    maj,
                    min,
                    ino,
                    ino_generation,
                } => Info::Device {
                    major: maj,
                    minor: min,
                    inode: ino,
                    inode_gen: ino_generation,
                },
                core::Mmap2File::BuildId(b) => Info::BuildId(b.as_bytes().to_vec()),
            };
            Record::Mmap(Box::new(Mmap {
                record_id: rid(&m.sample_id),
                executable: !m.misc.mmap_data(),
                task: task(m.pid, m.tid),
                addr: m.addr,
                len: m.len,
                file: c_string(m.filename.to_vec()),
                page_offset: m.pgoff,
                ext: Some(Ext {
                    prot: m.prot,
                    flags: m.flags,
                    info,
                }),
            }))
        }
        C::Lost(l) => Record::LostRecords(Box::new(LostRecords {
            record_id: rid(&l.sample_id),
            id: l.id,
            lost_records: l.lost,
        })),
        C::Comm(c) => Record::Comm(Box::new(Comm {
            record_id: rid(&c.sample_id),
            by_execve: c.misc.comm_exec(),
            task: task(c.pid, c.tid),
            comm: c_string(c.comm.to_vec()),
        })),
        C::Exit(t) => Record::Exit(Box::new(Exit {
            record_id: rid(&t.sample_id),
            task: task(t.pid, t.tid),
            parent_task: task(t.ppid, t.ptid),
            time: t.time,
        })),
        C::Fork(t) => Record::Fork(Box::new(Fork {
            record_id: rid(&t.sample_id),
            task: task(t.pid, t.tid),
            parent_task: task(t.ppid, t.ptid),
            time: t.time,
        })),
        C::Throttle(t) => Record::Throttle(Box::new(Throttle {
            record_id: rid(&t.sample_id),
            time: t.time,
            id: t.id,
            stream_id: t.stream_id,
        })),
        C::Unthrottle(t) => Record::Unthrottle(Box::new(Unthrottle {
            record_id: rid(&t.sample_id),
            time: t.time,
            id: t.id,
            stream_id: t.stream_id,
        })),
        C::Read(r) => Record::Read(Box::new(Read {
            record_id: rid(&r.sample_id),
            task: task(r.pid, r.tid),
            stat: stat(&r.values),
        })),
        C::Aux(a) => Record::Aux(Box::new(Aux {
            record_id: rid(&a.sample_id),
            offset: a.aux_offset,
            size: a.aux_size,
            truncated: a.flags.truncated(),
            overwrite: a.flags.overwrite(),
            partial: a.flags.partial(),
            collision: a.flags.collision(),
            pmu_format_type: ((a.flags.0 & PERF_AUX_FLAG_PMU_FORMAT_TYPE_MASK as u64) >> 8) as u8,
        })),
        C::ItraceStart(i) => Record::ItraceStart(Box::new(ItraceStart {
            record_id: rid(&i.sample_id),
            task: task(i.pid, i.tid),
        })),
        C::LostSamples(l) => Record::LostSamples(Box::new(LostSamples {
            record_id: rid(&l.sample_id),
            lost_samples: l.lost,
        })),
        C::Switch(s) => Record::CtxSwitch(Box::new(CtxSwitch {
            record_id: rid(&s.sample_id),
            info: switch(s.misc, None),
        })),
        C::SwitchCpuWide(s) => Record::CtxSwitch(Box::new(CtxSwitch {
            record_id: rid(&s.sample_id),
            info: switch(s.misc, Some(task(s.next_prev_pid, s.next_prev_tid))),
        })),
        C::Namespaces(n) => {
            // `NET_NS_INDEX` 0, `UTS_NS_INDEX` 1, `IPC_NS_INDEX` 2, `PID_NS_INDEX` 3, `USER_NS_INDEX` 4,
            // `MNT_NS_INDEX` 5, `CGROUP_NS_INDEX` 6 (include/uapi/linux/perf_event.h).
            let ns = |i: u32| LinkInfo {
                dev: n.words.get(2 * i as usize).unwrap_or(0),
                inode: n.words.get(2 * i as usize + 1).unwrap_or(0),
            };
            Record::Namespaces(Box::new(Namespaces {
                record_id: rid(&n.sample_id),
                task: task(n.pid, n.tid),
                ns_uts: ns(1),
                ns_pid: ns(3),
                ns_ipc: ns(2),
                ns_mnt: ns(5),
                ns_net: ns(0),
                ns_user: ns(4),
                ns_cgroup: ns(6),
            }))
        }
        C::Ksymbol(k) => Record::Ksymbol(Box::new(Ksymbol {
            record_id: rid(&k.sample_id),
            ty: match k.ksym_type as u32 {
                x if x == PERF_RECORD_KSYMBOL_TYPE_BPF as u32 => KsymbolType::Bpf,
                x if x == PERF_RECORD_KSYMBOL_TYPE_OOL as u32 => KsymbolType::OutOfLine,
                _ => KsymbolType::Unknown,
            },
            name: c_string(k.name.to_vec()),
            state: if k.flags as u32 & PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER as u32 != 0 {
                KsymbolState::Unreg
            } else {
                KsymbolState::Reg
            },
            addr: k.addr,
            len: k.len,
        })),
        C::BpfEvent(b) => Record::BpfEvent(Box::new(BpfEvent {
            record_id: rid(&b.sample_id),
            ty: match b.event_type as u32 {
                x if x == PERF_BPF_EVENT_PROG_LOAD as u32 => BpfEventType::ProgLoad,
                x if x == PERF_BPF_EVENT_PROG_UNLOAD as u32 => BpfEventType::ProgUnload,
                _ => BpfEventType::Unknown,
            },
            id: b.id,
            tag: b.tag,
            flags: b.flags,
        })),
        C::Cgroup(c) => Record::Cgroup(Box::new(Cgroup {
            record_id: rid(&c.sample_id),
            id: c.id,
            path: c_string(c.path.to_vec()),
        })),
        C::TextPoke(t) => Record::TextPoke(Box::new(TextPoke {
            record_id: rid(&t.sample_id),
            addr: t.addr,
            old_bytes: t.old_bytes.to_vec(),
            new_bytes: t.new_bytes.to_vec(),
        })),
        C::AuxOutputHwId(a) => Record::AuxOutputHwId(Box::new(AuxOutputHwId {
            record_id: rid(&a.sample_id),
            hw_id: a.hw_id,
        })),
        C::CallchainDeferred(c) => Record::CallChainDeferred(Box::new(CallChainDeferred {
            record_id: rid(&c.sample_id),
            cookie: c.cookie,
            call_chain: c.ips.to_vec(),
        })),
        C::Unknown(u) => {
            let mut bytes = Vec::with_capacity(8 + u.data.len());
            bytes.extend_from_slice(&u.record_type.to_ne_bytes());
            bytes.extend_from_slice(&u.misc.0.to_ne_bytes());
            let size = u16::try_from(8 + u.data.len()).unwrap_or(u16::MAX);
            bytes.extend_from_slice(&size.to_ne_bytes());
            bytes.extend(u.data.iter());
            Record::Unknown(bytes)
        }
        // A record type added to perf-core later: keep what we know.
        other => Record::Unknown(other.record_type().to_ne_bytes().to_vec()),
    };
    (cpumode, out)
}

fn switch(misc: core::Misc, other: Option<Task>) -> Switch {
    if misc.switch_out() {
        Switch::OutTo {
            task: other,
            preempt: misc.switch_out_preempt(),
        }
    } else {
        Switch::InFrom(other)
    }
}
