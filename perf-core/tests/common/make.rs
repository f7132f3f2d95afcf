//! A generator of records that fit a given layout, driven by a seed (proptest picks the seed and the layout).

use perf_core::record::*;
use perf_sys::*;

pub struct Gen(u64);

impl Gen {
    pub fn new(seed: u64) -> Self {
        Gen(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn u64(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.u64() % n
    }
    pub fn bool(&mut self) -> bool {
        self.u64() & 1 == 1
    }
    pub fn u32(&mut self) -> u32 {
        self.u64() as u32
    }
    pub fn u16(&mut self) -> u16 {
        self.u64() as u16
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.u64() as u8).collect()
    }
    pub fn name(&mut self) -> Bytes<'static> {
        let n = self.below(40) as usize;
        (0..n)
            .map(|_| 1 + self.below(255) as u8)
            .collect::<Vec<_>>()
            .into()
    }
    pub fn words(&mut self, n: usize) -> Vec<u64> {
        (0..n).map(|_| self.u64()).collect()
    }
}

pub const KNOWN_SAMPLE_BITS: u64 = PERF_SAMPLE_MAX as u64 - 1;
pub const KNOWN_FORMAT_BITS: u64 = PERF_FORMAT_MAX as u64 - 1;

pub fn sample_id(rng: &mut Gen, cfg: &ParseConfig) -> SampleId {
    if !cfg.sample_id_all() {
        return SampleId::default();
    }
    let has = |b: u32| cfg.sample_type() & b as u64 != 0;
    SampleId {
        thread: has(PERF_SAMPLE_TID).then(|| ThreadId {
            pid: rng.u32(),
            tid: rng.u32(),
        }),
        time: has(PERF_SAMPLE_TIME).then(|| rng.u64()),
        id: has(PERF_SAMPLE_ID).then(|| rng.u64()),
        stream_id: has(PERF_SAMPLE_STREAM_ID).then(|| rng.u64()),
        cpu: has(PERF_SAMPLE_CPU).then(|| rng.u32()),
        identifier: has(PERF_SAMPLE_IDENTIFIER).then(|| rng.u64()),
    }
}

pub fn read_values(rng: &mut Gen, cfg: &ParseConfig) -> ReadValues<'static> {
    let f = cfg.read_format();
    let has = |b: u32| f & b as u64 != 0;
    if has(PERF_FORMAT_GROUP) {
        let n = rng.below(5) as usize;
        let entries: Vec<ReadEntry> = (0..n)
            .map(|_| ReadEntry {
                value: rng.u64(),
                id: has(PERF_FORMAT_ID).then(|| rng.u64()),
                lost: has(PERF_FORMAT_LOST).then(|| rng.u64()),
            })
            .collect();
        let mut g = ReadGroup::from_entries(
            has(PERF_FORMAT_TOTAL_TIME_ENABLED).then(|| rng.u64()),
            has(PERF_FORMAT_TOTAL_TIME_RUNNING).then(|| rng.u64()),
            &entries,
        );
        // With no entries, from_entries cannot tell which parts they carry: take them from the format.
        g.has_id = has(PERF_FORMAT_ID);
        g.has_lost = has(PERF_FORMAT_LOST);
        ReadValues::Group(g)
    } else {
        ReadValues::Single(ReadSingle {
            value: rng.u64(),
            time_enabled: has(PERF_FORMAT_TOTAL_TIME_ENABLED).then(|| rng.u64()),
            time_running: has(PERF_FORMAT_TOTAL_TIME_RUNNING).then(|| rng.u64()),
            id: has(PERF_FORMAT_ID).then(|| rng.u64()),
            lost: has(PERF_FORMAT_LOST).then(|| rng.u64()),
        })
    }
}

fn regs(rng: &mut Gen, mask: u64) -> Regs<'static> {
    let abi = rng.below(3);
    let n = if abi == 0 {
        0
    } else {
        mask.count_ones() as usize
    };
    Regs {
        abi,
        mask,
        values: rng.words(n).into(),
    }
}

fn callchain_words(rng: &mut Gen) -> Vec<u64> {
    let markers = [
        PERF_CONTEXT_HV,
        PERF_CONTEXT_KERNEL,
        PERF_CONTEXT_USER,
        PERF_CONTEXT_USER_DEFERRED,
        PERF_CONTEXT_GUEST,
        PERF_CONTEXT_GUEST_KERNEL,
        PERF_CONTEXT_GUEST_USER,
    ];
    let n = rng.below(20) as usize;
    (0..n)
        .map(|_| {
            if rng.below(4) == 0 {
                markers[rng.below(7) as usize]
            } else {
                rng.u64() >> 8
            }
        })
        .collect()
}

pub fn sample(rng: &mut Gen, cfg: &ParseConfig) -> Sample<'static> {
    Sample::from_fields(&sample_fields(rng, cfg), cfg).expect("generated fields fit their config")
}

/// Random fields for each `PERF_SAMPLE_*` bit of `cfg` (and none for the others).
pub fn sample_fields(rng: &mut Gen, cfg: &ParseConfig) -> SampleFields<'static> {
    let has = |b: u32| cfg.sample_type() & b as u64 != 0;
    let bst = cfg.branch_sample_type();
    SampleFields {
        misc: Misc(rng.u16()),
        identifier: has(PERF_SAMPLE_IDENTIFIER).then(|| rng.u64()),
        ip: has(PERF_SAMPLE_IP).then(|| rng.u64()),
        thread: has(PERF_SAMPLE_TID).then(|| ThreadId {
            pid: rng.u32(),
            tid: rng.u32(),
        }),
        time: has(PERF_SAMPLE_TIME).then(|| rng.u64()),
        addr: has(PERF_SAMPLE_ADDR).then(|| rng.u64()),
        id: has(PERF_SAMPLE_ID).then(|| rng.u64()),
        stream_id: has(PERF_SAMPLE_STREAM_ID).then(|| rng.u64()),
        cpu: has(PERF_SAMPLE_CPU).then(|| rng.u32()),
        period: has(PERF_SAMPLE_PERIOD).then(|| rng.u64()),
        read: has(PERF_SAMPLE_READ).then(|| read_values(rng, cfg)),
        callchain: has(PERF_SAMPLE_CALLCHAIN).then(|| Callchain {
            ips: callchain_words(rng).into(),
        }),
        raw: has(PERF_SAMPLE_RAW).then(|| {
            let n = 8 * rng.below(6) as usize + 4;
            rng.bytes(n).into()
        }),
        branch_stack: has(PERF_SAMPLE_BRANCH_STACK).then(|| {
            let nr = rng.below(5) as usize;
            BranchStack {
                hw_idx: (bst & PERF_SAMPLE_BRANCH_HW_INDEX as u64 != 0).then(|| rng.u64()),
                words: rng.words(3 * nr).into(),
                counters: (bst & PERF_SAMPLE_BRANCH_COUNTERS as u64 != 0)
                    .then(|| rng.words(nr).into()),
            }
        }),
        regs_user: has(PERF_SAMPLE_REGS_USER).then(|| regs(rng, cfg.regs_user_mask())),
        stack_user: has(PERF_SAMPLE_STACK_USER).then(|| {
            let n = 8 * rng.below(5) as usize;
            let dyn_size = if n == 0 { 0 } else { rng.below(n as u64 + 1) };
            StackUser {
                data: rng.bytes(n).into(),
                dyn_size,
            }
        }),
        weight: (has(PERF_SAMPLE_WEIGHT) || has(PERF_SAMPLE_WEIGHT_STRUCT))
            .then(|| Weight(rng.u64())),
        data_src: has(PERF_SAMPLE_DATA_SRC).then(|| rng.u64()),
        transaction: has(PERF_SAMPLE_TRANSACTION).then(|| rng.u64()),
        regs_intr: has(PERF_SAMPLE_REGS_INTR).then(|| regs(rng, cfg.regs_intr_mask())),
        phys_addr: has(PERF_SAMPLE_PHYS_ADDR).then(|| rng.u64()),
        cgroup: has(PERF_SAMPLE_CGROUP).then(|| rng.u64()),
        data_page_size: has(PERF_SAMPLE_DATA_PAGE_SIZE).then(|| rng.u64()),
        code_page_size: has(PERF_SAMPLE_CODE_PAGE_SIZE).then(|| rng.u64()),
        aux: has(PERF_SAMPLE_AUX).then(|| {
            let n = 8 * rng.below(4) as usize;
            rng.bytes(n).into()
        }),
    }
}

/// A record of type `ty` (1..=22; anything else gives an unknown record) that fits `cfg`.
pub fn record(rng: &mut Gen, cfg: &ParseConfig, ty: u32) -> Record<'static> {
    let misc = Misc(rng.u16());
    let sid = sample_id(rng, cfg);
    match ty {
        PERF_RECORD_MMAP => Record::Mmap(Mmap {
            misc,
            pid: rng.u32(),
            tid: rng.u32(),
            addr: rng.u64(),
            len: rng.u64(),
            pgoff: rng.u64(),
            filename: rng.name(),
            sample_id: sid,
        }),
        PERF_RECORD_LOST => Record::Lost(Lost {
            misc,
            id: rng.u64(),
            lost: rng.u64(),
            sample_id: sid,
        }),
        PERF_RECORD_COMM => Record::Comm(Comm {
            misc,
            pid: rng.u32(),
            tid: rng.u32(),
            comm: rng.name(),
            sample_id: sid,
        }),
        PERF_RECORD_EXIT | PERF_RECORD_FORK => {
            let t = Task {
                misc,
                pid: rng.u32(),
                ppid: rng.u32(),
                tid: rng.u32(),
                ptid: rng.u32(),
                time: rng.u64(),
                sample_id: sid,
            };
            if ty == PERF_RECORD_EXIT {
                Record::Exit(t)
            } else {
                Record::Fork(t)
            }
        }
        PERF_RECORD_THROTTLE | PERF_RECORD_UNTHROTTLE => {
            let t = Throttle {
                misc,
                time: rng.u64(),
                id: rng.u64(),
                stream_id: rng.u64(),
                sample_id: sid,
            };
            if ty == PERF_RECORD_THROTTLE {
                Record::Throttle(t)
            } else {
                Record::Unthrottle(t)
            }
        }
        PERF_RECORD_READ => Record::Read(Read {
            misc,
            pid: rng.u32(),
            tid: rng.u32(),
            values: read_values(rng, cfg),
            sample_id: sid,
        }),
        PERF_RECORD_SAMPLE => Record::Sample(sample(rng, cfg)),
        PERF_RECORD_MMAP2 => {
            // The misc bit alone, without the config's build_id, is what kernels leave on other
            // events' records: device and inode follow.
            let bit = rng.bool();
            let build_id = bit && cfg.build_id();
            let bits = PERF_RECORD_MISC_MMAP_BUILD_ID as u16;
            let misc = Misc(if bit { misc.0 | bits } else { misc.0 & !bits });
            let file = if build_id {
                let mut bytes = [0u8; 20];
                bytes.copy_from_slice(&rng.bytes(20));
                Mmap2File::BuildId(BuildId {
                    size: rng.below(21) as u8,
                    bytes,
                })
            } else {
                Mmap2File::Inode {
                    maj: rng.u32(),
                    min: rng.u32(),
                    ino: rng.u64(),
                    ino_generation: rng.u64(),
                }
            };
            Record::Mmap2(Mmap2 {
                misc,
                pid: rng.u32(),
                tid: rng.u32(),
                addr: rng.u64(),
                len: rng.u64(),
                pgoff: rng.u64(),
                file,
                prot: rng.u32(),
                flags: rng.u32(),
                filename: rng.name(),
                sample_id: sid,
            })
        }
        PERF_RECORD_AUX => Record::Aux(Aux {
            misc,
            aux_offset: rng.u64(),
            aux_size: rng.u64(),
            flags: AuxFlags(rng.u64()),
            sample_id: sid,
        }),
        PERF_RECORD_ITRACE_START => Record::ItraceStart(ItraceStart {
            misc,
            pid: rng.u32(),
            tid: rng.u32(),
            sample_id: sid,
        }),
        PERF_RECORD_LOST_SAMPLES => Record::LostSamples(LostSamples {
            misc,
            lost: rng.u64(),
            sample_id: sid,
        }),
        PERF_RECORD_SWITCH => Record::Switch(Switch {
            misc,
            sample_id: sid,
        }),
        PERF_RECORD_SWITCH_CPU_WIDE => Record::SwitchCpuWide(SwitchCpuWide {
            misc,
            next_prev_pid: rng.u32(),
            next_prev_tid: rng.u32(),
            sample_id: sid,
        }),
        PERF_RECORD_NAMESPACES => {
            let n = rng.below(9) as usize;
            Record::Namespaces(Namespaces {
                misc,
                pid: rng.u32(),
                tid: rng.u32(),
                words: rng.words(2 * n).into(),
                sample_id: sid,
            })
        }
        PERF_RECORD_KSYMBOL => Record::Ksymbol(Ksymbol {
            misc,
            addr: rng.u64(),
            len: rng.u32(),
            ksym_type: rng.u16(),
            flags: rng.u16(),
            name: rng.name(),
            sample_id: sid,
        }),
        PERF_RECORD_BPF_EVENT => {
            let mut tag = [0u8; 8];
            tag.copy_from_slice(&rng.bytes(8));
            Record::BpfEvent(BpfEvent {
                misc,
                event_type: rng.u16(),
                flags: rng.u16(),
                id: rng.u32(),
                tag,
                sample_id: sid,
            })
        }
        PERF_RECORD_CGROUP => Record::Cgroup(Cgroup {
            misc,
            id: rng.u64(),
            path: rng.name(),
            sample_id: sid,
        }),
        PERF_RECORD_TEXT_POKE => {
            let (o, n) = (rng.below(24) as usize, rng.below(24) as usize);
            Record::TextPoke(TextPoke {
                misc,
                addr: rng.u64(),
                old_bytes: rng.bytes(o).into(),
                new_bytes: rng.bytes(n).into(),
                sample_id: sid,
            })
        }
        PERF_RECORD_AUX_OUTPUT_HW_ID => Record::AuxOutputHwId(AuxOutputHwId {
            misc,
            hw_id: rng.u64(),
            sample_id: sid,
        }),
        PERF_RECORD_CALLCHAIN_DEFERRED => Record::CallchainDeferred(CallchainDeferred {
            misc,
            cookie: rng.u64(),
            ips: callchain_words(rng).into(),
            sample_id: sid,
        }),
        other => {
            let n = 8 * rng.below(6) as usize;
            Record::Unknown(Unknown {
                record_type: other,
                misc,
                data: rng.bytes(n).into(),
            })
        }
    }
}
