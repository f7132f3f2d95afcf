//! Differential test: the `perf_event_attr` our event-name parser builds equals the one Debian's
//! `perf` builds for the same string (`perf stat -vv -e STRING -- true`, or `perf record -vv` for
//! sampling terms), on this machine's sysfs and on fixture trees of real machines
//! (`perf-event/tests/fixtures/sysfs`); strings perf rejects, we reject.
//!
//! perf prints the attr before it opens the event, so this works without a hardware PMU: an
//! event that cannot open still shows what perf would have asked for. Fixture trees are
//! bind-mounted over `/sys/bus/event_source/devices`, and tracefs mounted, inside a private mount
//! namespace (`unshare -m`), so the host is never changed.
//!
//! Compared: type, config, config1, config2, bp_type, exclude_{user,kernel,hv,idle,host,guest},
//! precise_ip, pinned, exclusive, group membership, and with `perf record` the sampling settings
//! the string sets (period/freq, call chains, stack, sample_type bits, write_backward, ...).
//! perf 6.1's implicit `exclude_guest` is compared through `EventSpec::perf_excludes_guest`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use perf_event::config::Opts;
use perf_event::event::spec::{CpuId, EventList, EventSpec, Machine};
use perf_event::perf_sys as sys;
use tests::{require, Skip};

/// Perf stat (`s`), perf record (`r`), or a string perf must reject (`x`: stat, rejected).
type Case = (char, &'static str);

/// On this machine's sysfs (msr, uprobe, breakpoint, software, tracepoint here) and tracefs.
const HOST: &[Case] = &[
    // Generalized hardware events and their aliases.
    ('s', "cycles"),
    ('s', "cpu-cycles"),
    ('s', "instructions"),
    ('s', "cycles:u"),
    ('s', "cycles:k"),
    ('s', "cycles:uk"),
    ('s', "cycles:pp"),
    ('s', "cycles:ppp"),
    ('s', "instructions:upp"),
    ('s', "branches"),
    ('s', "branch-instructions"),
    ('s', "branch-misses"),
    ('s', "cache-references"),
    ('s', "cache-misses:k"),
    ('s', "bus-cycles"),
    ('s', "ref-cycles"),
    ('s', "stalled-cycles-frontend"),
    ('s', "idle-cycles-backend"),
    ('s', "cycles,instructions"),
    // Software and tool events.
    ('s', "cpu-clock"),
    ('s', "task-clock"),
    ('s', "page-faults"),
    ('s', "faults"),
    ('s', "minor-faults"),
    ('s', "major-faults"),
    ('s', "context-switches"),
    ('s', "cs"),
    ('s', "cpu-migrations:u"),
    ('s', "migrations"),
    ('s', "alignment-faults"),
    ('s', "emulation-faults"),
    ('s', "dummy"),
    ('s', "bpf-output"),
    ('s', "cgroup-switches"),
    ('s', "duration_time"),
    ('s', "user_time"),
    ('s', "system_time"),
    // Hardware cache events.
    ('s', "L1-dcache-load-misses"),
    ('s', "L1-dcache-loads"),
    ('s', "L1-dcache"),
    ('s', "l1d-loads"),
    ('s', "L1-icache-loads"),
    ('s', "L1-icache-prefetches"),
    ('s', "LLC-loads"),
    ('s', "LLC-prefetch-misses"),
    ('s', "L2-stores"),
    ('s', "dTLB-store-misses"),
    ('s', "d-tlb-loads"),
    ('s', "iTLB-load-misses"),
    ('s', "branch-loads"),
    ('s', "bpu-misses"),
    ('s', "btb-loads"),
    ('s', "node-stores"),
    ('s', "L1-dcache-speculative-read-refs"),
    ('s', "Instruction-TLB-read-Reference"),
    ('s', "L1-dcache-misses-loads"),
    ('s', "L1-dcache-miss-refs"),
    // Raw and numeric.
    ('s', "r1a8"),
    ('s', "r0"),
    ('s', "rABCDEF"),
    ('s', "r1a8:u"),
    ('s', "r1a8/period=10/"),
    ('s', "1:2"),
    ('s', "4:0x1a8"),
    ('s', "0x1:2"),
    ('s', "1:2:u"),
    // A PMU's terms and aliases.
    ('s', "msr/tsc/"),
    ('s', "msr/tsc/k"),
    ('s', "msr/tsc/uk"),
    ('s', "msr/event=0x1/"),
    ('s', "msr/event=010/"),
    ('s', "msr/config=5/"),
    ('s', "msr/config1=5,config2=7/"),
    ('s', "msr/tsc,config=3/"),
    ('s', "msr/event=0x1,event=0x2/"),
    ('s', "msr/event=1,config=4/"),
    ('s', "msr/event/"),
    ('s', "msr/config/"),
    ('s', "msr//"),
    ('s', "msr/ event=1 ,config1=2/"),
    ('s', "msr/event=0xffffffffffffffff/"),
    ('s', "msr/name=foo,tsc/"),
    ('s', "tsc"),
    ('s', "tsc:u"),
    ('s', "msr/tsc/,page-faults"),
    // Modifiers.
    ('s', "page-faults:u"),
    ('s', "page-faults:k"),
    ('s', "page-faults:h"),
    ('s', "page-faults:G"),
    ('s', "page-faults:H"),
    ('s', "page-faults:GH"),
    ('s', "page-faults:Gp"),
    ('s', "page-faults:pG"),
    ('s', "page-faults:I"),
    ('s', "page-faults:S"),
    ('s', "page-faults:P"),
    ('s', "page-faults:D"),
    ('s', "page-faults:e"),
    ('s', "page-faults:W"),
    ('s', "page-faults:b"),
    ('s', "page-faults:hp"),
    ('s', "page-faults:up"),
    ('s', "page-faults:ukhIpPGHSDeWb"),
    ('s', "page-faults:"),
    ('s', " page-faults"),
    ('s', "page-faults , minor-faults"),
    ('s', "page-faults: u"),
    // Groups.
    ('s', "{page-faults,minor-faults}"),
    ('s', "{page-faults,minor-faults}:u"),
    ('s', "{page-faults:k,minor-faults}:u"),
    ('s', "{page-faults,minor-faults:u}:k"),
    ('s', "{page-faults:G,minor-faults}:H"),
    ('s', "{page-faults,minor-faults}:S"),
    ('s', "{task-clock,page-faults}:W"),
    ('s', "{task-clock:D,page-faults}:e"),
    ('s', "{task-clock:p,page-faults}:p"),
    ('s', "{page-faults,task-clock:D}"),
    ('s', "{page-faults},{minor-faults}"),
    ('s', "{cpu-clock,msr/tsc/,task-clock:u}:k"),
    // Config terms on legacy events.
    ('s', "cpu-clock/config=5/"),
    ('s', "cpu-clock/config1=3/"),
    ('s', "faults/period=1/k"),
    ('s', "cpu-clock/period=1000/u"),
    ('s', "cpu-clock/name=abc/"),
    // Breakpoints.
    ('s', "mem:0x1000"),
    ('s', "mem:0x1000/8"),
    ('s', "mem:0x1000/8:w"),
    ('s', "mem:0x1000:x"),
    ('s', "mem:0x1000:rwx"),
    ('s', "mem:0x1000/2:r"),
    ('s', "mem:4096:w"),
    ('s', "mem:0x1000:w:u"),
    ('s', "mem:0x1000:wu"),
    ('s', "mem:0x1000:u"),
    ('s', "mem:0x1000/3"),
    ('s', "mem:0x1000/0"),
    ('s', "mem:0x1000:rw:ppp"),
    // Tracepoints (and the probes `perf probe` makes, which are tracepoints too).
    ('s', "sched:sched_switch"),
    ('s', "sched:sched_switch:u"),
    ('s', "sched:sched_process_*"),
    ('s', "sched:*wake*"),
    ('s', "sch*:sched_switch"),
    ('s', "syscalls:sys_enter_openat"),
    ('s', "sched:sched_switch,sched:sched_wakeup"),
    ('s', "{sched:sched_switch,sched:sched_wakeup}:k"),
    ('s', "sched:sched_switch:ppp"),
    // Sampling settings, as perf record sets them.
    ('r', "cpu-clock/period=1000/"),
    ('r', "cpu-clock/freq=99/"),
    ('r', "cpu-clock/period=0x10/"),
    ('r', "cpu-clock/period=100,freq=10/"),
    ('r', "cpu-clock/freq=10,period=100/"),
    ('r', "cpu-clock/time=0/"),
    ('r', "cpu-clock/time=1/"),
    ('r', "cpu-clock/call-graph=fp/"),
    ('r', "cpu-clock/call-graph=dwarf,stack-size=4096/"),
    ('r', "cpu-clock/no-inherit/"),
    ('r', "cpu-clock/max-stack=5,call-graph=fp/"),
    ('r', "cpu-clock/overwrite/"),
    ('r', "cpu-clock:S"),
    ('r', "{cpu-clock,task-clock}:S"),
    ('r', "msr/tsc,period=7/"),
    ('r', "task-clock/period=500/k"),
    ('r', "sched:sched_switch/call-graph=fp/"),
    ('r', "cpu-clock/aux-output/"),
    // Rejected.
    ('x', "cycles:x"),
    ('x', "cycles:pppp"),
    ('x', "page-faults:u:k"),
    ('x', "nosuch"),
    ('x', "x:y"),
    ('x', "sched:nosuch"),
    ('x', "sched:sched_switch/period=3/"),
    ('x', "sched:sched_switch:x"),
    ('x', "cycles,,instructions"),
    ('x', "cycles}"),
    ('x', "{page-faults,{minor-faults}}"),
    ('x', "{}"),
    ('x', ""),
    ('x', ","),
    ('x', "page-faults,"),
    ('x', "msr/foo=1/"),
    ('x', "msr/event=zz/"),
    ('x', "msr/event=0x/"),
    ('x', "msr/event=18446744073709551616/"),
    ('x', "msr/,/"),
    ('x', "msr/tsc/:k"),
    ('x', "nopmu/event=1/"),
    ('x', "r0x1a8"),
    ('x', "R1a8"),
    ('x', "r1a8x"),
    ('x', "L1-icache-stores"),
    ('x', "L1-dcache-foo"),
    ('x', "l1-DCACHE-loads"),
    ('x', "Cycles"),
    ('x', "CYCLES"),
    ('x', "cycles:period=1000"),
    ('x', "cycles/u"),
    ('x', "cpu-clock/event=5/"),
    ('x', "mem:0x1000:q"),
    ('x', "mem:0x1000/x"),
    ('x', "mem:"),
    ('x', "mem:0x"),
    ('x', "mem:-1"),
    ('x', "mem:0x1000:rrr"),
    ('x', "mem:0x1000:rwxr"),
    ('x', "page-faults/period=10/:x"),
];

/// On the Alder Lake tree: hybrid `cpu_core` + `cpu_atom`, RAPL, uncore, C-states.
const ALDERLAKE: &[Case] = &[
    ('s', "cycles"),
    ('s', "cycles:u"),
    ('s', "instructions"),
    ('s', "branch-misses:k"),
    ('s', "cache-references"),
    ('s', "L1-dcache-load-misses"),
    ('s', "LLC-loads"),
    ('s', "r1a8"),
    ('s', "r1a8:k"),
    ('s', "cpu_core/cycles/"),
    ('s', "cpu_atom/instructions/u"),
    ('s', "cpu_core/cpu-cycles/"),
    ('s', "cpu_atom/event=0x11/"),
    ('s', "cpu_core/event=0xc0,umask=0x1,cmask=2,inv,edge/"),
    ('s', "cpu_core/mem-loads/"),
    ('s', "cpu_core/mem-loads,ldlat=10/"),
    ('s', "cpu_core/offcore_rsp=0x10001,event=0xb7,umask=0x1/"),
    ('s', "cpu_core/frontend=0x11/"),
    ('s', "cpu_atom/topdown-retiring/"),
    ('s', "cpu_core/slots/"),
    ('s', "cpu_core/in_tx,in_tx_cp,event=0x3c/"),
    ('s', "power/energy-pkg/"),
    ('s', "energy-pkg"),
    ('s', "energy-cores:u"),
    ('s', "uncore_imc_free_running_0/data_read/"),
    ('s', "uncore_imc_free_running/data_read/"),
    ('s', "imc_free_running/data_write/"),
    ('s', "data_read"),
    ('s', "cstate_core/c6-residency/"),
    ('s', "c6-residency"),
    ('s', "msr/aperf/"),
    ('s', "mperf"),
    ('s', "intel_pt/pt,tsc,mtc_period=3,branch/"),
    ('s', "uncore_clock/clockticks/"),
    ('s', "page-faults"),
    ('s', "cycles,instructions"),
    // Events of the kernel's JSON table for this model (perf: PERF_CPUID=GenuineIntel-6-97-2).
    ('s', "br_inst_retired.all_branches"),
    ('s', "BR_MISP_RETIRED.ALL_BRANCHES:u"),
    ('s', "inst_retired.any_p"),
    ('s', "cpu_core/br_inst_retired.all_branches/"),
    ('s', "cpu_atom/inst_retired.any_p/k"),
    ('s', "longest_lat_cache.miss"),
    ('s', "cpu_core/mem_load_retired.l3_miss/"),
    ('x', "cpu_core/event=0x100/"),
    ('x', "cpu_core/foo/"),
    ('x', "cpu_atom/in_tx/"),
    ('x', "uncore_imc_free/data_read/"),
];

/// On the RK3399 tree: Arm big.LITTLE.
const RK3399: &[Case] = &[
    ('s', "armv8_cortex_a53/cpu_cycles/"),
    ('s', "armv8_cortex_a72/event=0x11/"),
    ('s', "armv8_cortex_a72/inst_spec/k"),
    ('s', "l1d_cache_refill"),
    ('s', "inst_spec"),
    ('s', "armv8_cortex_a53/event=0x11,long/"),
    (
        's',
        "{armv8_cortex_a53/cpu_cycles/,armv8_cortex_a53/inst_retired/}",
    ),
    ('x', "armv8_cortex_a53/event=0x10000/"),
];

/// On the Zen 3 tree: one core PMU `cpu` with split bit ranges.
const ZEN3: &[Case] = &[
    ('s', "cpu/event=0x1ff/"),
    ('s', "cpu/event=0xfff,umask=0x3,edge,inv,cmask=2/"),
    ('s', "amd_df/event=0x3fff/"),
    ('s', "amd_df/event=0x3fff,umask=0xff/"),
    (
        's',
        "amd_l3/event=0x1,umask=0x2,slicemask=0xf,threadmask=0xff/",
    ),
    ('s', "ibs_op/cnt_ctl=1/"),
    ('s', "ibs_fetch/rand_en/"),
    ('s', "cpu/cache-misses,umask=0x2/"),
    ('s', "cpu/cpu-cycles/"),
    ('s', "cpu/instructions/u"),
    ('s', "cpu/event=1,config=4/"),
    ('s', "cpu/config=0x12345/"),
    ('s', "cycles"),
    ('s', "r76"),
    ('s', "energy-pkg"),
    ('s', "msr/irperf/"),
    // Events of the kernel's JSON table for this model (perf: PERF_CPUID=AuthenticAMD-25-1-1).
    ('s', "ex_ret_instr"),
    ('s', "cpu/ex_ret_instr/u"),
    ('s', "ex_ret_brn_misp"),
    ('s', "ls_dispatch.ld_dispatch"),
    ('s', "ic_tag_hit_miss.instruction_cache_miss"),
    ('x', "cpu/event=0x1000/"),
    ('x', "amd_l3/slicemask=0x10/"),
];

/// On the Graviton3 tree: one Arm core PMU, SPE.
const GRAVITON3: &[Case] = &[
    ('s', "armv8_pmuv3_0/cpu_cycles/"),
    ('s', "armv8_pmuv3/inst_retired/"),
    ('s', "cycles"),
    ('s', "stall_backend:u"),
    ('s', "arm_spe_0/ts_enable,pa_enable,jitter/"),
    ('s', "arm_spe_0/event_filter=0x5/"),
    ('s', "arm_spe_0/min_latency=20/"),
];

/// Accepted by us, where perf 6.1 disagrees because newer perf reads them differently (and the
/// unit tests in `perf-event/src/event/spec/tests.rs` check what we build): PMU wildcards,
/// `config3`, legacy names as terms of a non-hybrid core PMU, Arm clusters as hybrid PMUs.
const NEWER_THAN_PERF_6_1: &[(&str, &str, &str)] = &[
    (
        "alderlake",
        "cpu_*/event=0x3c/",
        "PMU wildcards (perf 6.1 only matches `_N` suffixes)",
    ),
    (
        "rk3399",
        "cycles",
        "Arm clusters are core PMUs in newer perf (6.6); 6.1 opens one legacy event",
    ),
    ("rk3399", "armv8_cortex_*/event=0x11/", "PMU wildcards"),
    (
        "zen3",
        "cpu/cycles/",
        "legacy names as terms of any core PMU (perf 6.3)",
    ),
    (
        "graviton3",
        "arm_spe_0/inv_event_filter=3/",
        "config3 formats (perf 6.3)",
    ),
];

/// Strings on which we knowingly differ from perf 6.1, with why; the test checks that perf 6.1
/// still does what is said here (`accepts`: perf accepts and we reject).
const PERF_6_1_BUGS: &[(&str, &str)] = &[(
    "{cycles",
    "perf 6.1 accepts a group that is never closed (and counts `cycles` alone); we reject it",
)];

/// One tree's perf run: its work directory, the fixture tree (none for this machine), the cases,
/// and perf's output per case.
type Run = (
    PathBuf,
    Option<PathBuf>,
    Vec<Case>,
    Result<Vec<String>, String>,
);

/// One attr as perf printed it: field name → value text.
#[derive(Debug, Default)]
struct PerfAttr {
    fields: BTreeMap<String, String>,
    member: bool,
}

/// perf's verdict on a string.
#[derive(Debug)]
enum Verdict {
    Attrs { attrs: Vec<PerfAttr>, aborted: bool },
    Rejected(String),
}

/// Splits `perf -vv` output into the first attempt of each event. perf prints the attr before
/// every open: after a failed open it retries the same event with less (cloexec, exclude_guest,
/// sample_id_all, precise_ip) until it opens or perf gives up with a warning; a PMU with a
/// `cpumask` is opened once per CPU, in CPU order. For hybrid cache events perf 6.1 also probes
/// each PMU while parsing (`pid 0`); those probes are the events it builds.
fn parse_perf(out: &str) -> Verdict {
    let mut attrs: Vec<PerfAttr> = Vec::new();
    let mut cur: Option<PerfAttr> = None;
    let mut held: Option<PerfAttr> = None;
    let mut pending_fail = false;
    let mut last_cpu: Option<i64> = None;
    for line in out.lines() {
        if line.starts_with("perf_event_attr:") {
            cur = Some(PerfAttr::default());
            continue;
        }
        if let Some(a) = cur.as_mut() {
            if line.starts_with("----") {
                held = cur.take();
                continue;
            }
            let t = line.trim_start();
            if let Some(k) = t.find("  ") {
                a.fields.insert(t[..k].to_owned(), t[k..].trim().to_owned());
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("sys_perf_event_open: ") {
            let field = |name: &str| -> i64 {
                rest.split_whitespace()
                    .skip_while(|w| *w != name)
                    .nth(1)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(-1)
            };
            let (pid, cpu) = (field("pid"), field("cpu"));
            let ok = line.contains(" = ");
            if let Some(mut b) = held.take() {
                b.member = field("group_fd") != -1;
                if pid == 0 {
                    // A parse-time probe: one event each.
                    attrs.push(b);
                    pending_fail = false;
                    last_cpu = None;
                    continue;
                }
                let same = pending_fail || last_cpu.is_some_and(|c| cpu > c);
                if !same {
                    attrs.push(b);
                }
            }
            last_cpu = Some(cpu);
            pending_fail = !ok;
            continue;
        }
        if line.starts_with("Warning:")
            || line.starts_with("Error:")
            || line.contains("not supported")
        {
            pending_fail = false;
            last_cpu = None;
        }
    }
    if attrs.is_empty() {
        let why = out
            .lines()
            .skip_while(|l| !l.starts_with("event syntax error"))
            .take(2)
            .collect::<Vec<_>>()
            .join(" / ");
        return Verdict::Rejected(if why.is_empty() {
            out.lines().last().unwrap_or("").to_owned()
        } else {
            why
        });
    }
    let aborted = out
        .lines()
        .any(|l| l.starts_with("Error:") || l.contains("event parser found nothing"));
    Verdict::Attrs { attrs, aborted }
}

fn num(v: Option<&String>) -> u64 {
    match v {
        None => 0,
        Some(s) => match s.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).unwrap_or(u64::MAX),
            None => s.parse().unwrap_or(u64::MAX),
        },
    }
}

const SAMPLE_BITS: &[(&str, u32)] = &[
    ("IP", sys::PERF_SAMPLE_IP),
    ("TID", sys::PERF_SAMPLE_TID),
    ("TIME", sys::PERF_SAMPLE_TIME),
    ("ADDR", sys::PERF_SAMPLE_ADDR),
    ("READ", sys::PERF_SAMPLE_READ),
    ("CALLCHAIN", sys::PERF_SAMPLE_CALLCHAIN),
    ("ID", sys::PERF_SAMPLE_ID),
    ("CPU", sys::PERF_SAMPLE_CPU),
    ("PERIOD", sys::PERF_SAMPLE_PERIOD),
    ("STREAM_ID", sys::PERF_SAMPLE_STREAM_ID),
    ("RAW", sys::PERF_SAMPLE_RAW),
    ("BRANCH_STACK", sys::PERF_SAMPLE_BRANCH_STACK),
    ("REGS_USER", sys::PERF_SAMPLE_REGS_USER),
    ("STACK_USER", sys::PERF_SAMPLE_STACK_USER),
    ("WEIGHT", sys::PERF_SAMPLE_WEIGHT),
    ("DATA_SRC", sys::PERF_SAMPLE_DATA_SRC),
    ("IDENTIFIER", sys::PERF_SAMPLE_IDENTIFIER),
    ("TRANSACTION", sys::PERF_SAMPLE_TRANSACTION),
    ("REGS_INTR", sys::PERF_SAMPLE_REGS_INTR),
    ("PHYS_ADDR", sys::PERF_SAMPLE_PHYS_ADDR),
    ("AUX", sys::PERF_SAMPLE_AUX),
    ("CGROUP", sys::PERF_SAMPLE_CGROUP),
    ("DATA_PAGE_SIZE", sys::PERF_SAMPLE_DATA_PAGE_SIZE),
    ("CODE_PAGE_SIZE", sys::PERF_SAMPLE_CODE_PAGE_SIZE),
    ("WEIGHT_STRUCT", sys::PERF_SAMPLE_WEIGHT_STRUCT),
];

const BRANCH_BITS: &[(&str, u32)] = &[
    ("USER", sys::PERF_SAMPLE_BRANCH_USER),
    ("KERNEL", sys::PERF_SAMPLE_BRANCH_KERNEL),
    ("HV", sys::PERF_SAMPLE_BRANCH_HV),
    ("ANY", sys::PERF_SAMPLE_BRANCH_ANY),
    ("ANY_CALL", sys::PERF_SAMPLE_BRANCH_ANY_CALL),
    ("ANY_RETURN", sys::PERF_SAMPLE_BRANCH_ANY_RETURN),
    ("IND_CALL", sys::PERF_SAMPLE_BRANCH_IND_CALL),
    ("ABORT_TX", sys::PERF_SAMPLE_BRANCH_ABORT_TX),
    ("IN_TX", sys::PERF_SAMPLE_BRANCH_IN_TX),
    ("NO_TX", sys::PERF_SAMPLE_BRANCH_NO_TX),
    ("COND", sys::PERF_SAMPLE_BRANCH_COND),
    ("CALL_STACK", sys::PERF_SAMPLE_BRANCH_CALL_STACK),
    ("IND_JUMP", sys::PERF_SAMPLE_BRANCH_IND_JUMP),
    ("CALL", sys::PERF_SAMPLE_BRANCH_CALL),
    ("NO_FLAGS", sys::PERF_SAMPLE_BRANCH_NO_FLAGS),
    ("NO_CYCLES", sys::PERF_SAMPLE_BRANCH_NO_CYCLES),
    ("TYPE_SAVE", sys::PERF_SAMPLE_BRANCH_TYPE_SAVE),
    ("HW_INDEX", sys::PERF_SAMPLE_BRANCH_HW_INDEX),
    ("PRIV_SAVE", sys::PERF_SAMPLE_BRANCH_PRIV_SAVE),
];

fn bits(v: Option<&String>, table: &[(&str, u32)]) -> u64 {
    v.map_or(0, |s| {
        s.split('|')
            .map(|n| {
                table
                    .iter()
                    .find(|(k, _)| *k == n)
                    .map_or(1 << 63, |(_, b)| u64::from(*b))
            })
            .fold(0, |a, b| a | b)
    })
}

/// The fields of one event to compare: (name, ours, perf's).
fn compare(mode: char, text: &str, ours: &EventSpec, perf: &PerfAttr) -> Vec<(String, u64, u64)> {
    let a = ours.to_attr(&Opts::default());
    let p = &perf.fields;
    let f = |k: &str| num(p.get(k));
    // perf 6.1 builds hybrid cache events without its exclude_guest default (what it prints is
    // the attr it probes each PMU with while parsing).
    let hybrid_cache = a.type_ == sys::PERF_TYPE_HW_CACHE && a.config >> 32 != 0;
    let guest = a.exclude_guest() | u64::from(ours.perf_excludes_guest() && !hybrid_cache);
    let mut v = vec![
        ("type", u64::from(a.type_), f("type")),
        ("config", a.config, f("config")),
        ("config1", a.config1(), f("{ bp_addr, config1 }")),
        ("config2", a.config2(), f("{ bp_len, config2 }")),
        ("bp_type", u64::from(a.bp_type), f("bp_type")),
        ("exclude_user", a.exclude_user(), f("exclude_user")),
        ("exclude_kernel", a.exclude_kernel(), f("exclude_kernel")),
        ("exclude_hv", a.exclude_hv(), f("exclude_hv")),
        ("exclude_idle", a.exclude_idle(), f("exclude_idle")),
        ("exclude_host", a.exclude_host(), f("exclude_host")),
        ("exclude_guest", guest, f("exclude_guest")),
        ("precise_ip", a.precise_ip(), f("precise_ip")),
        ("pinned", a.pinned(), f("pinned")),
        ("exclusive", a.exclusive(), f("exclusive")),
        (
            "group member",
            u64::from(ours.group().is_some() && !ours.is_leader()),
            u64::from(perf.member),
        ),
    ];
    if mode == 'r' {
        let mut mask = u64::from(
            sys::PERF_SAMPLE_CALLCHAIN
                | sys::PERF_SAMPLE_READ
                | sys::PERF_SAMPLE_BRANCH_STACK
                | sys::PERF_SAMPLE_REGS_USER
                | sys::PERF_SAMPLE_STACK_USER,
        );
        if text.contains("time=") {
            mask |= u64::from(sys::PERF_SAMPLE_TIME);
        }
        v.push((
            "sample_type",
            a.sample_type & mask,
            bits(p.get("sample_type"), SAMPLE_BITS) & mask,
        ));
        if text.contains("period=") || text.contains("freq=") {
            v.push((
                "sample_period/freq",
                a.sample_period_or_freq(),
                f("{ sample_period, sample_freq }"),
            ));
            v.push(("freq", a.freq(), f("freq")));
        }
        if text.contains("inherit") {
            v.push(("inherit", a.inherit(), f("inherit")));
        }
        v.push(("write_backward", a.write_backward(), f("write_backward")));
        v.push((
            "sample_max_stack",
            u64::from(a.sample_max_stack),
            f("sample_max_stack"),
        ));
        v.push((
            "sample_stack_user",
            u64::from(a.sample_stack_user),
            f("sample_stack_user"),
        ));
        v.push((
            "sample_regs_user",
            a.sample_regs_user,
            f("sample_regs_user"),
        ));
        v.push((
            "exclude_callchain_user",
            a.exclude_callchain_user(),
            f("exclude_callchain_user"),
        ));
        v.push(("aux_output", a.aux_output(), f("aux_output")));
        v.push((
            "branch_sample_type",
            a.branch_sample_type,
            bits(p.get("branch_sample_type"), BRANCH_BITS),
        ));
    }
    v.into_iter()
        .filter(|(_, o, q)| o != q)
        .map(|(k, o, q)| (k.to_owned(), o, q))
        .collect()
}

/// Writes a fixture description into `dir` (a `devices` tree).
fn write_fixture(name: &str, dir: &Path) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../perf-event/tests/fixtures/sysfs")
        .join(format!("{name}.txt"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (p, content) = line.split_once(": ").expect("path: content");
        let file = dir.join(p);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, format!("{content}\n")).unwrap();
    }
}

/// Runs perf on every case inside a private mount namespace: the fixture (if any) over the PMU
/// directory, tracefs mounted if it is not. Returns perf's output per case and a copy of the
/// tracepoint ids (`events/<system>/<event>/id`) for our side.
fn run_perf(
    work: &Path,
    fixture: Option<&Path>,
    cpuid: Option<&str>,
    cases: &[Case],
) -> Result<Vec<String>, String> {
    let list = work.join("cases");
    let mut s = String::new();
    for (mode, text) in cases {
        let m = if *mode == 'r' { 'r' } else { 's' };
        writeln!(s, "{m}\t{text}").unwrap();
    }
    std::fs::write(&list, s).unwrap();
    let script = work.join("run.sh");
    std::fs::write(
        &script,
        r#"set -u
if [ -n "$FIXTURE" ]; then mount --bind "$FIXTURE" /sys/bus/event_source/devices || exit 90; fi
T=/sys/kernel/tracing
[ -e $T/events ] || mount -t tracefs nodev $T 2>/dev/null || true
(cd $T 2>/dev/null && grep -r --include=id -H . events) > "$WORK/tracepoints" 2>/dev/null
i=0
while IFS= read -r line; do
  mode=${line%%	*}; ev=${line#*	}
  echo "@@@ $i"
  if [ "$mode" = r ]; then
    perf record -vv -o "$WORK/perf.data" -e "$ev" -- true
  else
    perf stat -vv -e "$ev" -- true
  fi < /dev/null 2>&1
  i=$((i+1))
done < "$WORK/cases"
echo "@@@ end"
"#,
    )
    .unwrap();
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh"])
        .arg(&script)
        .env(
            "FIXTURE",
            fixture
                .map(|p| p.as_os_str().to_owned())
                .unwrap_or_default(),
        )
        .env("WORK", work);
    match cpuid {
        Some(id) => cmd.env("PERF_CPUID", id),
        None => cmd.env_remove("PERF_CPUID"),
    };
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run unshare: {e}"))?;
    if out.status.code() == Some(90) {
        return Err("cannot bind-mount the fixture in a private mount namespace".into());
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !text.contains("@@@ end") {
        return Err(format!(
            "unshare -m failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut per = vec![String::new(); cases.len()];
    let mut cur: Option<usize> = None;
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("@@@ ") {
            cur = n.parse().ok();
            continue;
        }
        if let Some(i) = cur {
            per[i].push_str(line);
            per[i].push('\n');
        }
    }
    Ok(per)
}

/// Rebuilds the tracepoint ids perf saw as a tracefs tree for our side.
fn tracefs_copy(work: &Path) -> PathBuf {
    let root = work.join("tracefs");
    let text = std::fs::read_to_string(work.join("tracepoints")).unwrap_or_default();
    for line in text.lines() {
        let Some((path, id)) = line.split_once(':') else {
            continue;
        };
        if path.split('/').count() != 4 {
            continue;
        }
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, id).unwrap();
    }
    root
}

fn ours(m: &Machine, text: &str) -> Result<EventList, String> {
    m.parse(text).map_err(|e| e.to_string())
}

#[test]
fn event_names_match_perf() {
    let perf_ok = Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    require!(
        perf_ok,
        Skip::Environment,
        "perf is not installed (Debian: apt-get install linux-perf)"
    );
    let version = Command::new("perf").arg("--version").output().unwrap();
    println!("{}", String::from_utf8_lossy(&version.stdout).trim());
    let ns_ok = Command::new("unshare")
        .args(["-m", "true"])
        .status()
        .is_ok_and(|s| s.success());
    require!(
        ns_ok,
        Skip::Privilege,
        "unshare -m fails (needs root / CAP_SYS_ADMIN): perf's view of fixture trees and tracefs \
         lives in a private mount namespace"
    );

    let base = std::env::temp_dir().join(format!("perf-event-names-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    // (tree, cases, the CPU model whose JSON table both sides use)
    let groups: &[(&str, &[Case], Option<&str>)] = &[
        ("host", HOST, None),
        ("alderlake", ALDERLAKE, Some("GenuineIntel-6-97-2")),
        ("rk3399", RK3399, None),
        ("zen3", ZEN3, Some("AuthenticAMD-25-1-1")),
        ("graviton3", GRAVITON3, None),
    ];
    // perf runs for each tree in parallel (one private namespace each).
    let runs: Vec<Run> = std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .iter()
            .map(|(group, cases, cpuid)| {
                let base = &base;
                scope.spawn(move || {
                    let work = base.join(group);
                    std::fs::create_dir_all(&work).unwrap();
                    let fixture = (*group != "host").then(|| {
                        let d = work.join("devices");
                        write_fixture(group, &d);
                        d
                    });
                    let mut cases: Vec<Case> = cases.to_vec();
                    if *group == "host" {
                        cases.extend(PERF_6_1_BUGS.iter().map(|(t, _)| ('b', *t)));
                    }
                    let out = run_perf(&work, fixture.as_deref(), *cpuid, &cases);
                    (work, fixture, cases, out)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut failures = Vec::new();
    let (mut compared, mut events, mut rejected, mut prefix) = (0, 0, 0, 0);
    for ((group, _, cpuid), (work, fixture, cases, outputs)) in groups.iter().zip(runs) {
        let outputs = match outputs {
            Ok(o) => o,
            Err(e) => panic!("{group}: {e}"),
        };
        let cases = &cases[..];
        let tracefs = tracefs_copy(&work);
        let devices = fixture
            .clone()
            .unwrap_or_else(|| "/sys/bus/event_source/devices".into());
        let mut m = Machine::from_sysfs(&devices).with_tracefs(&tracefs);
        if let Some(id) = cpuid {
            m = m.with_cpuid(CpuId::parse(id).unwrap());
        }
        for ((mode, text), out) in cases.iter().zip(&outputs) {
            let verdict = parse_perf(out);
            let mine = ours(&m, text);
            if *mode == 'b' {
                let perf_accepts = matches!(verdict, Verdict::Attrs { .. });
                if !(perf_accepts && mine.is_err()) {
                    failures.push(format!(
                        "{text:?} is listed as a perf 6.1 bug (perf accepts, we reject), but perf \
                         accepts: {perf_accepts}, we accept: {}",
                        mine.is_ok()
                    ));
                }
                continue;
            }
            compared += 1;
            match (verdict, mine, *mode) {
                (Verdict::Rejected(_), Err(_), 'x') => rejected += 1,
                (Verdict::Rejected(why), Err(e), _) => failures.push(format!(
                    "{group} {text:?}: both reject, but the corpus expects it to parse (perf: {why}; ours: {e})"
                )),
                (Verdict::Rejected(why), Ok(l), _) => {
                    failures.push(format!("{group} {text:?}: perf rejects ({why}), we build {} events", l.len()))
                }
                (Verdict::Attrs { .. }, Ok(_), 'x') | (Verdict::Attrs { .. }, Err(_), 'x') => {
                    failures.push(format!("{group} {text:?}: expected perf to reject it, perf accepts"))
                }
                (Verdict::Attrs { .. }, Err(e), _) => {
                    failures.push(format!("{group} {text:?}: perf accepts, we reject:\n{e}"))
                }
                (Verdict::Attrs { mut attrs, aborted }, Ok(l), mode) => {
                    // perf record adds a tracking dummy event at the end.
                    if mode == 'r' && attrs.len() > l.len() {
                        attrs.truncate(l.len());
                    }
                    if attrs.len() < l.len() && aborted {
                        // perf gave up at the first event of a group it could not open.
                        prefix += 1;
                    } else if attrs.len() != l.len() {
                        failures.push(format!(
                            "{group} {text:?}: perf builds {} events, we build {}",
                            attrs.len(),
                            l.len()
                        ));
                        continue;
                    }
                    // perf 6.1 takes PMUs in readdir order; we sort them. Compare the per-PMU
                    // copies of one ungrouped event in type order on both sides.
                    let mut mine: Vec<&EventSpec> = l.iter().collect();
                    if l.groups().count() == 0 && attrs.len() == mine.len() && mine.len() > 1 {
                        let key = |t: u64, c: u64| (t, c);
                        attrs.sort_by_key(|p| key(num(p.fields.get("type")), num(p.fields.get("config"))));
                        mine.sort_by_key(|o| key(u64::from(o.event().ty()), o.event().config()));
                    }
                    for (k, (p, o)) in attrs.iter().zip(mine).enumerate() {
                        events += 1;
                        let diff = compare(mode, text, o, p);
                        if !diff.is_empty() {
                            let d: Vec<String> = diff
                                .iter()
                                .map(|(f, a, b)| format!("{f}: ours {a:#x}, perf {b:#x}"))
                                .collect();
                            failures.push(format!("{group} {text:?} event {k} ({}): {}", o.name(), d.join("; ")));
                        }
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    println!(
        "{compared} strings compared with perf ({events} events equal field by field, \
         {rejected} rejected by both, {prefix} compared up to where perf stopped at a group it \
         could not open)"
    );
    for (group, text, why) in NEWER_THAN_PERF_6_1 {
        println!("not compared: {group} {text:?}: {why}");
    }
    for (text, why) in PERF_6_1_BUGS {
        println!("differs on purpose: {text:?}: {why}");
    }
    assert!(
        compared >= 100,
        "the corpus has {compared} strings, fewer than 100"
    );
    assert!(
        failures.is_empty(),
        "{} disagreements with perf:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
