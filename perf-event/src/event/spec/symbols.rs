//! perf's fixed event names: generalized hardware, software, tool and hardware-cache events.
//!
//! Names are case-sensitive, as perf's lexer has them.

use perf_sys as sys;

/// A generalized hardware event: (perf's names, the first being the one `perf list` prints,
/// `PERF_COUNT_HW_*`, description).
pub(crate) const HARDWARE: &[(&[&str], u32, &str)] = &[
    (
        &["cpu-cycles", "cycles"],
        sys::PERF_COUNT_HW_CPU_CYCLES,
        "CPU cycles",
    ),
    (
        &["instructions"],
        sys::PERF_COUNT_HW_INSTRUCTIONS,
        "Retired instructions",
    ),
    (
        &["cache-references"],
        sys::PERF_COUNT_HW_CACHE_REFERENCES,
        "Cache accesses, usually of the last level cache",
    ),
    (
        &["cache-misses"],
        sys::PERF_COUNT_HW_CACHE_MISSES,
        "Cache misses, usually of the last level cache",
    ),
    (
        &["branch-instructions", "branches"],
        sys::PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
        "Retired branch instructions",
    ),
    (
        &["branch-misses"],
        sys::PERF_COUNT_HW_BRANCH_MISSES,
        "Mispredicted branch instructions",
    ),
    (&["bus-cycles"], sys::PERF_COUNT_HW_BUS_CYCLES, "Bus cycles"),
    (
        &["stalled-cycles-frontend", "idle-cycles-frontend"],
        sys::PERF_COUNT_HW_STALLED_CYCLES_FRONTEND,
        "Stalled cycles during issue",
    ),
    (
        &["stalled-cycles-backend", "idle-cycles-backend"],
        sys::PERF_COUNT_HW_STALLED_CYCLES_BACKEND,
        "Stalled cycles during retirement",
    ),
    (
        &["ref-cycles"],
        sys::PERF_COUNT_HW_REF_CPU_CYCLES,
        "Cycles not affected by frequency scaling",
    ),
];

/// A software event: (names, `PERF_COUNT_SW_*`, description).
pub(crate) const SOFTWARE: &[(&[&str], u32, &str)] = &[
    (
        &["cpu-clock"],
        sys::PERF_COUNT_SW_CPU_CLOCK,
        "Per-CPU high-resolution timer, in ns",
    ),
    (
        &["task-clock"],
        sys::PERF_COUNT_SW_TASK_CLOCK,
        "Time the task ran, in ns",
    ),
    (
        &["page-faults", "faults"],
        sys::PERF_COUNT_SW_PAGE_FAULTS,
        "Page faults",
    ),
    (
        &["context-switches", "cs"],
        sys::PERF_COUNT_SW_CONTEXT_SWITCHES,
        "Context switches",
    ),
    (
        &["cpu-migrations", "migrations"],
        sys::PERF_COUNT_SW_CPU_MIGRATIONS,
        "Migrations of the task to another CPU",
    ),
    (
        &["minor-faults"],
        sys::PERF_COUNT_SW_PAGE_FAULTS_MIN,
        "Page faults served without I/O",
    ),
    (
        &["major-faults"],
        sys::PERF_COUNT_SW_PAGE_FAULTS_MAJ,
        "Page faults that needed I/O",
    ),
    (
        &["alignment-faults"],
        sys::PERF_COUNT_SW_ALIGNMENT_FAULTS,
        "Unaligned accesses fixed up by the kernel",
    ),
    (
        &["emulation-faults"],
        sys::PERF_COUNT_SW_EMULATION_FAULTS,
        "Instructions emulated by the kernel",
    ),
    (
        &["dummy"],
        sys::PERF_COUNT_SW_DUMMY,
        "Counts nothing; carries side-band records",
    ),
    (
        &["bpf-output"],
        sys::PERF_COUNT_SW_BPF_OUTPUT,
        "Output of bpf_perf_event_output",
    ),
    (
        &["cgroup-switches"],
        sys::PERF_COUNT_SW_CGROUP_SWITCHES,
        "Switches to a task of another cgroup (Linux 5.13)",
    ),
];

/// perf's tool events: measured by perf itself, opened as the dummy software event.
pub(crate) const TOOL: &[(&str, &str)] = &[
    ("duration_time", "Wall-clock time of the measurement, in ns"),
    (
        "user_time",
        "User CPU time of the measured processes, in ns",
    ),
    (
        "system_time",
        "System CPU time of the measured processes, in ns",
    ),
];

/// Looks up a hardware name; `PERF_COUNT_HW_*`.
pub(crate) fn hardware(name: &str) -> Option<u32> {
    HARDWARE
        .iter()
        .find(|(names, _, _)| names.contains(&name))
        .map(|&(_, c, _)| c)
}

/// Looks up a software name; `PERF_COUNT_SW_*`.
pub(crate) fn software(name: &str) -> Option<u32> {
    SOFTWARE
        .iter()
        .find(|(names, _, _)| names.contains(&name))
        .map(|&(_, c, _)| c)
}

/// Cache names: (names, `PERF_COUNT_HW_CACHE_*`, the operations it has: read, write, prefetch).
pub(crate) const CACHES: &[(&[&str], u32, [bool; 3])] = &[
    (
        &["L1-dcache", "l1-d", "l1d", "L1-data"],
        sys::PERF_COUNT_HW_CACHE_L1D,
        [true, true, true],
    ),
    (
        &["L1-icache", "l1-i", "l1i", "L1-instruction"],
        sys::PERF_COUNT_HW_CACHE_L1I,
        [true, false, true],
    ),
    (
        &["LLC", "L2"],
        sys::PERF_COUNT_HW_CACHE_LL,
        [true, true, true],
    ),
    (
        &["dTLB", "d-tlb", "Data-TLB"],
        sys::PERF_COUNT_HW_CACHE_DTLB,
        [true, true, true],
    ),
    (
        &["iTLB", "i-tlb", "Instruction-TLB"],
        sys::PERF_COUNT_HW_CACHE_ITLB,
        [true, false, false],
    ),
    (
        &["branch", "branches", "bpu", "btb", "bpc"],
        sys::PERF_COUNT_HW_CACHE_BPU,
        [true, false, false],
    ),
    (&["node"], sys::PERF_COUNT_HW_CACHE_NODE, [true, true, true]),
];

/// Operation names: (names, `PERF_COUNT_HW_CACHE_OP_*`); `perf list` prints the second.
pub(crate) const CACHE_OPS: &[(&[&str], u32)] = &[
    (&["load", "loads", "read"], sys::PERF_COUNT_HW_CACHE_OP_READ),
    (
        &["store", "stores", "write"],
        sys::PERF_COUNT_HW_CACHE_OP_WRITE,
    ),
    (
        &[
            "prefetch",
            "prefetches",
            "speculative-read",
            "speculative-load",
        ],
        sys::PERF_COUNT_HW_CACHE_OP_PREFETCH,
    ),
];

/// Result names: (names, `PERF_COUNT_HW_CACHE_RESULT_*`).
pub(crate) const CACHE_RESULTS: &[(&[&str], u32)] = &[
    (
        &["refs", "Reference", "ops", "access"],
        sys::PERF_COUNT_HW_CACHE_RESULT_ACCESS,
    ),
    (&["misses", "miss"], sys::PERF_COUNT_HW_CACHE_RESULT_MISS),
];

/// Why a cache name was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CacheError {
    /// Not a cache name at all.
    NotCache,
    /// A real cache, but it has no such operation (`L1-icache-stores`).
    BadOp,
}

/// Decodes `TYPE[-OP_OR_RESULT[-OP_OR_RESULT]]` (`L1-dcache-load-misses`, `LLC-misses`,
/// `dTLB-loads`) into the `PERF_TYPE_HW_CACHE` config. The operation defaults to read, the
/// result to access. As perf does, the first word of each kind counts: a second operation or
/// result is ignored.
pub(crate) fn cache(name: &str) -> Result<u64, CacheError> {
    for (names, id, ops) in CACHES {
        for ty in *names {
            let Some(rest) = name.strip_prefix(ty) else {
                continue;
            };
            if !(rest.is_empty() || rest.starts_with('-')) {
                continue;
            }
            let words = split_words(rest).ok_or(CacheError::NotCache)?;
            if words.len() > 2 {
                return Err(CacheError::NotCache);
            }
            let (mut op, mut res) = (None, None);
            for w in words {
                let as_op = CACHE_OPS.iter().find(|(n, _)| n.contains(&w)).map(|x| x.1);
                let as_res = CACHE_RESULTS
                    .iter()
                    .find(|(n, _)| n.contains(&w))
                    .map(|x| x.1);
                if op.is_none() && as_op.is_some() {
                    op = as_op;
                    let o = as_op.unwrap_or_default() as usize;
                    if !ops.get(o).copied().unwrap_or(false) {
                        return Err(CacheError::BadOp);
                    }
                } else if res.is_none() && as_res.is_some() {
                    res = as_res;
                }
            }
            let op = op.unwrap_or(sys::PERF_COUNT_HW_CACHE_OP_READ);
            let res = res.unwrap_or(sys::PERF_COUNT_HW_CACHE_RESULT_ACCESS);
            return Ok(u64::from(*id) | u64::from(op) << 8 | u64::from(res) << 16);
        }
    }
    Err(CacheError::NotCache)
}

/// Splits `-w1-w2` into operation/result words, some of which contain a dash themselves
/// (`speculative-read`); `None` when a piece is no such word.
fn split_words(mut rest: &str) -> Option<Vec<&str>> {
    let all = || {
        CACHE_OPS
            .iter()
            .chain(CACHE_RESULTS)
            .flat_map(|(n, _)| n.iter().copied())
    };
    let mut out = Vec::new();
    while !rest.is_empty() {
        rest = rest.strip_prefix('-')?;
        // Longest word first, so `speculative-read` wins over a shorter prefix.
        let w = all()
            .filter(|w| {
                rest.strip_prefix(w)
                    .is_some_and(|r| r.is_empty() || r.starts_with('-'))
            })
            .max_by_key(|w| w.len())?;
        out.push(w);
        rest = &rest[w.len()..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_names_decode_as_perf_does() {
        assert_eq!(cache("L1-dcache-load-misses"), Ok(0x10000));
        assert_eq!(cache("L1-dcache"), Ok(0));
        assert_eq!(cache("l1d-loads"), Ok(0));
        assert_eq!(cache("LLC-prefetch-misses"), Ok(0x10202));
        assert_eq!(cache("dTLB-store-misses"), Ok(0x10103));
        assert_eq!(cache("branch-loads"), Ok(5));
        assert_eq!(cache("L1-dcache-speculative-read-refs"), Ok(0x200));
        assert_eq!(cache("L1-dcache-miss-refs"), Ok(0x10000));
        assert_eq!(cache("L1-dcache-load-loads"), Ok(0));
        assert_eq!(cache("Instruction-TLB-read-Reference"), Ok(4));
        assert_eq!(cache("L1-icache-stores"), Err(CacheError::BadOp));
        assert_eq!(cache("L1-DCACHE-loads"), Err(CacheError::NotCache));
        assert_eq!(cache("L1-dcache-foo"), Err(CacheError::NotCache));
        assert_eq!(
            cache("L1-dcache-load-misses-refs"),
            Err(CacheError::NotCache)
        );
        assert_eq!(cache("L1-dcachex"), Err(CacheError::NotCache));
    }

    #[test]
    fn fixed_names() {
        assert_eq!(hardware("cycles"), Some(sys::PERF_COUNT_HW_CPU_CYCLES));
        assert_eq!(hardware("Cycles"), None);
        assert_eq!(software("cs"), Some(sys::PERF_COUNT_SW_CONTEXT_SWITCHES));
    }
}
