//! Events as perf names them: the whole `perf stat -e` / `perf record -e` grammar, resolved
//! against the sysfs and tracefs of a [`Machine`].
//!
//! ```no_run
//! use perf_event::event::spec::Machine;
//!
//! let events = Machine::current().parse("{cycles,instructions}:u,page-faults,sched:sched_switch")?;
//! for e in &events {
//!     println!("{:<24} type {} config {:#x}", e.name(), e.event().ty(), e.event().config());
//! }
//! # Ok::<(), perf_event::event::spec::ParseError>(())
//! ```
//!
//! # The grammar
//!
//! A comma-separated list of events and groups; whitespace between tokens is ignored.
//!
//! | form | example | resolves to |
//! |---|---|---|
//! | generalized hardware | `cycles`, `cpu-cycles`, `instructions`, `branches`, `ref-cycles` | `PERF_TYPE_HARDWARE` |
//! | software | `task-clock`, `page-faults`/`faults`, `cs`, `migrations`, `dummy` | `PERF_TYPE_SOFTWARE` |
//! | tool | `duration_time`, `user_time`, `system_time` | the dummy software event; see [`EventSpec::tool`] |
//! | hardware cache | `L1-dcache-load-misses`, `LLC-loads`, `dTLB-store-misses`, `branch-loads` | `PERF_TYPE_HW_CACHE` |
//! | raw | `r1a8`, `rc0` | `PERF_TYPE_RAW`, config in hex |
//! | numeric | `4:0x1a8` | type and config as numbers |
//! | PMU | `cpu/event=0x3c,umask=0x0/`, `msr/tsc/`, `uncore_imc/event=0x4/` | the PMU's type, terms placed by `format/` |
//! | PMU alias alone | `tsc`, `energy-pkg` | every PMU whose `events/` has it |
//! | model-specific | `inst_retired.any_p`, `cpu_core/br_inst_retired.all_branches/`, `ex_ret_instr`, `exc_irq` | the kernel's JSON table for [`Machine::cpuid`] (feature `pmu-events`): the core PMUs, or the uncore PMU its `Unit` names |
//! | tracepoint | `sched:sched_switch`, `sched:sched_*`, `sch*:*wake*` | `PERF_TYPE_TRACEPOINT`, id from tracefs |
//! | probe | `probe:do_sys_open`, `probe_libc:malloc` | tracepoints made by `perf probe` (kprobes, uprobes) |
//! | breakpoint | `mem:0x1000`, `mem:0x1000/8:w`, `mem:0x4000:x` | `PERF_TYPE_BREAKPOINT` (default `rw`, 4 bytes) |
//! | group | `{cycles,instructions}:u` | one group; its modifiers apply to every member |
//!
//! Modifiers follow a colon (`cycles:u`), or directly the closing slash of terms (`msr/tsc/k`):
//! `u` `k` `h` count only user / kernel / hypervisor, `G` `H` guest / host only, `I` exclude
//! idle, `p` (up to `ppp`) precision, `P` maximal precision, `S` sample the group's counts, `D`
//! pinned, `e` exclusive, `W` weak group, `b` a BPF-backed counter.
//!
//! Terms between slashes: every `format/` field of the PMU (`event=0x3c`, `umask=1`, a bare flag
//! such as `edge`), the raw fields `config`, `config1`, `config2`, `config3`, `events/` aliases
//! (their `.scale` and `.unit` are kept, see [`EventSpec::scale`]), and perf's config terms:
//! `name=`, `period=`, `freq=`, `time=0|1`, `call-graph=fp|dwarf|lbr|no`, `stack-size=`,
//! `max-stack=`, `inherit`, `no-inherit`, `overwrite`, `no-overwrite`, `branch_type=`,
//! `aux-output`, `aux-sample-size=`, `nr=`, `percore`, `metric-id=`, `driver-config=`. Legacy
//! events take the config terms too (`cycles/period=100000/u`).
//!
//! Terms combine as perf 6.1 combines them: aliases are expanded in place, then `config`..`config3`
//! are assigned, then format terms are OR-ed into their bits (so `cpu/event=1,event=2/` is event
//! 3, and an alias's `umask` ORs with one written after it). A term without a value is 1.
//!
//! A PMU name that is not a PMU matches the PMUs it names with a `_N` suffix (`uncore_imc` means
//! `uncore_imc_0`, `uncore_imc_1`, ...; the `uncore_` prefix may be left out), or, with
//! wildcards, every PMU it matches (`cpu*/event=0x3c/`).
//!
//! # Heterogeneous CPUs
//!
//! With several core PMUs (`cpu_core` and `cpu_atom` on Intel hybrid parts, one `armv8_*` PMU per
//! cluster on Arm big.LITTLE), a generalized hardware or cache event, or a raw event, becomes one
//! event per core PMU: the PMU's type in the high 32 bits of `config` (`PERF_PMU_TYPE_SHIFT`) and
//! the PMU's `cpus` in [`EventSpec::cpus`]. Groups are split per PMU. [`EventSpec::merge_name`]
//! says which events to sum to one count, as perf does unless `--no-merge`. On kernels that lack
//! extended types ([`Machine::supports_extended_type`]) one legacy event is opened, as perf does.
//!
//! Wildcard tracepoints expand in the kernel's order (by id), as perf takes them from tracefs.
//!
//! # Differences from perf
//!
//! perf adds `exclude_guest` to an event written without `G`/`H` (and to `u` and `p` events), and
//! drops it again when the PMU refuses it. The parser reports that default
//! ([`EventSpec::perf_excludes_guest`]) but does not set it: `G` and `H` are honoured as written.
//! Events of a JSON table carry no sampling period (perf adds the table's `SampleAfterValue` when
//! recording). PMUs are taken in name order (perf 6.1 takes them in directory order). Beyond perf
//! 6.1, and as newer perf: PMU wildcards, `config3`, legacy names as terms of any core PMU, Arm
//! clusters as core PMUs. perf 6.1 accepts an unclosed group (`{cycles`); this parser does not.
//! Checked against Debian's perf 6.1 by the `event_names_vs_perf` test (290 strings, on this
//! machine and on sysfs trees of four real machines; 237 more against arm64 perf 6.1 in a qemu
//! arm64 guest, whose output and PMU tree are committed fixtures).

mod glob;
mod json;
mod list;
mod modifiers;
mod parser;
mod suggest;
mod symbols;
#[cfg(test)]
mod tests;

pub use json::CpuId;
pub use list::{Listed, ListedKind};
pub(crate) use parser::tracepoint_suggestion;
pub(crate) use suggest::did_you_mean;

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::pmu::Pmu;
use super::Event;

/// The event sources of a machine: its PMUs (a sysfs `event_source/devices` tree) and its
/// tracepoints (a tracefs). [`Machine::current`] is this machine; the roots can point anywhere
/// (a copy of another machine's tree, a test fixture).
#[derive(Debug)]
pub struct Machine {
    pmu_root: PathBuf,
    tracefs: Tracefs,
    extended_type: OnceLock<bool>,
    cpuid: OnceLock<Option<CpuId>>,
}

#[derive(Debug, Clone)]
enum Tracefs {
    /// Found through `/proc/mounts` when needed.
    Find,
    At(PathBuf),
    Absent,
}

impl Machine {
    /// This machine: `/sys/bus/event_source/devices` and the mounted tracefs.
    pub fn current() -> Self {
        Self {
            pmu_root: PathBuf::from(crate::sys::PMU_DIR),
            tracefs: Tracefs::Find,
            extended_type: OnceLock::new(),
            cpuid: OnceLock::new(),
        }
    }

    /// A machine whose PMUs are the directories under `pmu_root` (laid out as
    /// `/sys/bus/event_source/devices`), without tracepoints until
    /// [`with_tracefs`](Self::with_tracefs). Extended hardware types are taken as supported
    /// unless [`with_extended_type`](Self::with_extended_type) says otherwise.
    pub fn from_sysfs(pmu_root: impl Into<PathBuf>) -> Self {
        let m = Self {
            pmu_root: pmu_root.into(),
            tracefs: Tracefs::Absent,
            extended_type: OnceLock::new(),
            cpuid: OnceLock::new(),
        };
        let _ = m.extended_type.set(true);
        let _ = m.cpuid.set(None);
        m
    }

    /// Reads tracepoints from the tracefs at `root` (the directory holding `events/`).
    pub fn with_tracefs(mut self, root: impl Into<PathBuf>) -> Self {
        self.tracefs = Tracefs::At(root.into());
        self
    }

    /// Declares whether the kernel takes a PMU type in the high bits of a hardware event's
    /// `config` (`PERF_PMU_TYPE_SHIFT`) instead of probing for it.
    #[doc(alias = "PERF_PMU_TYPE_SHIFT")]
    pub fn with_extended_type(self, supported: bool) -> Self {
        let cell = OnceLock::new();
        let _ = cell.set(supported);
        Self {
            extended_type: cell,
            ..self
        }
    }

    /// Selects the kernel's JSON event table of CPU model `id` (instead of this machine's, or
    /// none for a tree given to [`from_sysfs`](Self::from_sysfs)). The tables are compiled in
    /// with the `pmu-events` feature.
    pub fn with_cpuid(self, id: CpuId) -> Self {
        let cell = OnceLock::new();
        let _ = cell.set(Some(id));
        Self {
            cpuid: cell,
            ..self
        }
    }

    /// The CPU model that selects the JSON event table: [`CpuId::current`] for
    /// [`Machine::current`].
    pub fn cpuid(&self) -> Option<&CpuId> {
        self.cpuid.get_or_init(CpuId::current).as_ref()
    }

    /// The directory of the kernel's JSON event table this machine uses (`alderlake`,
    /// `arm/neoverse-n1`), if perf-event has the tables (feature `pmu-events`) and one matches.
    pub fn event_table(&self) -> Option<&'static str> {
        self.cpuid().and_then(json::model).map(|(dir, _)| dir)
    }

    pub(crate) fn json_events(&self) -> &'static [json::JsonEvent] {
        self.cpuid()
            .and_then(json::model)
            .map_or(&[], |(_, events)| events)
    }

    /// The directory the PMUs are read from.
    pub fn pmu_root(&self) -> &Path {
        &self.pmu_root
    }

    /// The tracefs root, if this machine has one (found, or mounted when privileged, as perf does;
    /// see [`tp::tracefs`](crate::event::tp::tracefs)).
    pub fn tracefs(&self) -> Option<PathBuf> {
        self.tracefs_root().ok()
    }

    /// The tracefs root, or why there is none.
    pub(crate) fn tracefs_root(&self) -> std::result::Result<PathBuf, String> {
        match &self.tracefs {
            Tracefs::Find => crate::event::tp::tracefs().map_err(|e| e.to_string()),
            Tracefs::At(p) => Ok(p.clone()),
            Tracefs::Absent => Err("this machine has no tracefs".into()),
        }
    }

    /// Every PMU, core PMUs first, then by name (numeric suffixes in numeric order).
    pub fn pmus(&self) -> Vec<Pmu> {
        let mut v: Vec<Pmu> = super::pmu::pmu_names(&self.pmu_root)
            .iter()
            .filter_map(|n| Pmu::try_in_dir(&self.pmu_root, n))
            .collect();
        v.sort_by(|a, b| {
            (!a.is_core())
                .cmp(&!b.is_core())
                .then_with(|| natural_cmp(a.name(), b.name()))
        });
        v
    }

    /// The PMU `name`.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Parse`] listing the PMUs there are.
    pub fn pmu(&self, name: &str) -> crate::Result<Pmu> {
        Pmu::in_dir(&self.pmu_root, name)
    }

    /// The core (CPU) PMUs: `cpu`, or those with a `cpus` file. More than one means a
    /// heterogeneous CPU.
    pub fn core_pmus(&self) -> Vec<Pmu> {
        self.pmus().into_iter().filter(Pmu::is_core).collect()
    }

    /// Whether the CPU has several core PMUs (Intel P/E cores, Arm big.LITTLE).
    pub fn is_hybrid(&self) -> bool {
        self.core_pmus().len() > 1
    }

    /// Whether the kernel opens a hardware or cache event on one PMU when its type is in the
    /// high 32 bits of `config`: x86 hybrid kernels do, Arm kernels only since they set
    /// `PERF_PMU_CAP_EXTENDED_HW_TYPE` for their core PMUs. For
    /// [`Machine::current`] this is probed once, as perf does, by opening `cycles` on the first
    /// core PMU; a machine without core PMUs answers `false`.
    #[doc(alias = "PERF_PMU_TYPE_SHIFT")]
    pub fn supports_extended_type(&self) -> bool {
        *self.extended_type.get_or_init(|| {
            let Some(pmu) = self.core_pmus().into_iter().next() else {
                return false;
            };
            probe_extended_type(pmu.ty())
        })
    }

    /// Parses an event list as `perf stat -e` takes it.
    ///
    /// # Errors
    ///
    /// [`ParseError`], pointing at the offending character.
    pub fn parse(&self, text: &str) -> Result<EventList, ParseError> {
        parser::parse(self, text, true)
    }

    /// Parses without copying legacy events to each core PMU of a hybrid CPU: what
    /// [`Event::parse`] returns, one event the kernel places itself.
    pub(crate) fn parse_unsplit(&self, text: &str) -> Result<EventList, ParseError> {
        parser::parse(self, text, false)
    }

    pub(crate) fn parse_pmu_terms(&self, pmu: &Pmu, terms: &str) -> Result<EventList, ParseError> {
        parser::parse_pmu_terms(self, pmu, terms)
    }
}

fn probe_extended_type(pmu_type: u32) -> bool {
    use crate::config::{Cpu, Opts, Proc};
    let mut e = Event::new(
        perf_sys::PERF_TYPE_HARDWARE,
        u64::from(perf_sys::PERF_COUNT_HW_CPU_CYCLES) | u64::from(pmu_type) << 32,
        "cycles",
    );
    e.modifiers = None;
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.exclude.hv = true;
    crate::count::Counter::new(e, (Proc::CURRENT, Cpu::ALL), &opts).is_ok()
}

/// Orders `uncore_imc_2` before `uncore_imc_10`.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let split = |s: &str| {
        let digits = s.len() - s.bytes().rev().take_while(u8::is_ascii_digit).count();
        let (head, tail) = s.split_at(digits);
        (head.to_owned(), tail.parse::<u64>().ok())
    };
    let (ha, na) = split(a);
    let (hb, nb) = split(b);
    ha.cmp(&hb).then(na.cmp(&nb)).then_with(|| a.cmp(b))
}

/// perf's tool events: values perf measures itself, not the kernel.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Tool {
    /// `duration_time`: wall-clock time of the measurement.
    DurationTime,
    /// `user_time`: user CPU time of the measured processes.
    UserTime,
    /// `system_time`: system CPU time of the measured processes.
    SystemTime,
}

/// One event of a parsed list, with what perf knows about it beyond the attr.
#[derive(Clone, Debug)]
pub struct EventSpec {
    pub(crate) event: Event,
    pub(crate) name: String,
    pub(crate) merge_name: String,
    pub(crate) pmu: Option<String>,
    pub(crate) cpus: Option<Vec<u32>>,
    pub(crate) scale: Option<f64>,
    pub(crate) unit: Option<String>,
    pub(crate) group: Option<usize>,
    pub(crate) leader: bool,
    pub(crate) mods: modifiers::ModState,
    pub(crate) max_events: Option<u64>,
    pub(crate) per_core: bool,
    pub(crate) metric_id: Option<String>,
    pub(crate) tool: Option<Tool>,
}

impl EventSpec {
    /// The event to open ([`Counter::new`](crate::count::Counter::new) takes it).
    pub fn event(&self) -> &Event {
        &self.event
    }

    /// The event, by value.
    pub fn into_event(self) -> Event {
        self.event
    }

    /// The name perf prints for this event: the text as written, a `name=` term, or
    /// `pmu/text/` for the per-PMU copies of a hybrid or wildcard event.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name under which counts are merged: the text of the event as written, the same for
    /// every per-PMU copy of one hybrid or wildcard event (perf sums these unless `--no-merge`).
    pub fn merge_name(&self) -> &str {
        &self.merge_name
    }

    /// The PMU the event belongs to, when it came from sysfs or is a per-PMU copy.
    pub fn pmu(&self) -> Option<&str> {
        self.pmu.as_deref()
    }

    /// The CPUs the event can count on (its PMU's `cpus` or `cpumask`); `None` for any CPU. A
    /// per-CPU counter set opens the event on these only.
    pub fn cpus(&self) -> Option<&[u32]> {
        self.cpus.as_deref()
    }

    /// The factor from raw count to [`unit`](Self::unit), from a sysfs alias's `.scale` file.
    pub fn scale(&self) -> Option<f64> {
        self.scale
    }

    /// The unit of the scaled count, from a sysfs alias's `.unit` file.
    pub fn unit(&self) -> Option<&str> {
        self.unit.as_deref()
    }

    /// The index of the event's group in [`EventList::groups`], if it is in one.
    pub fn group(&self) -> Option<usize> {
        self.group
    }

    /// Whether the event leads its group.
    pub fn is_leader(&self) -> bool {
        self.leader
    }

    /// Whether perf would set `exclude_guest` for this event by default (no `G`/`H` given, and
    /// no modifier or `u`/`p`): perf counts only the host unless told otherwise, and drops the
    /// bit when the PMU refuses it. [`Event`] does not set it; see the
    /// [module docs](self#differences-from-perf).
    pub fn perf_excludes_guest(&self) -> bool {
        !self.mods.guest_host_set && self.mods.exclude_guest
    }

    /// `W`: a weak group, which perf splits into single events when it cannot be scheduled.
    pub fn weak_group(&self) -> bool {
        self.mods.weak
    }

    /// `b`: perf counts this event through BPF.
    pub fn bpf_counter(&self) -> bool {
        self.mods.bpf
    }

    /// `P`: the highest `precise_ip` the PMU takes should be found by trying.
    pub fn precise_max(&self) -> bool {
        self.mods.precise_max
    }

    /// `nr=N`: stop after N samples.
    pub fn max_events(&self) -> Option<u64> {
        self.max_events
    }

    /// `percore`: sum the counts of the hardware threads of a core.
    pub fn per_core(&self) -> bool {
        self.per_core
    }

    /// `metric-id=`: the name metrics refer to this event by.
    pub fn metric_id(&self) -> Option<&str> {
        self.metric_id.as_deref()
    }

    /// Which tool event this is; such an event counts nothing in the kernel (it is opened as
    /// `dummy`) and its value is the tool's measurement.
    pub fn tool(&self) -> Option<Tool> {
        self.tool
    }

    /// The attr the event opens with `opts` (see [`Event::to_attr`]).
    pub fn to_attr(&self, opts: &crate::config::Opts) -> perf_sys::perf_event_attr {
        self.event.to_attr(opts)
    }
}

/// A parsed event list: the events in order, and the groups among them (contiguous, leader
/// first).
#[derive(Clone, Debug, Default)]
pub struct EventList {
    pub(crate) events: Vec<EventSpec>,
    pub(crate) groups: Vec<Range<usize>>,
}

impl EventList {
    /// The events in order.
    pub fn events(&self) -> &[EventSpec] {
        &self.events
    }

    /// How many events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The events in order.
    pub fn iter(&self) -> std::slice::Iter<'_, EventSpec> {
        self.events.iter()
    }

    /// Each group's events, leader first.
    pub fn groups(&self) -> impl Iterator<Item = &[EventSpec]> {
        self.groups.iter().map(|r| &self.events[r.clone()])
    }

    /// The single event of a one-event list.
    pub fn into_event(self) -> Option<Event> {
        let mut v = self.events;
        (v.len() == 1).then(|| v.remove(0).event)
    }

    /// The events grouped by [`EventSpec::merge_name`], in order of first appearance: what a
    /// `perf stat` report shows as one line each (several per line for a hybrid event).
    pub fn merged(&self) -> Vec<(&str, Vec<&EventSpec>)> {
        let mut out: Vec<(&str, Vec<&EventSpec>)> = Vec::new();
        for e in &self.events {
            match out.iter_mut().find(|(n, _)| *n == e.merge_name) {
                Some((_, v)) => v.push(e),
                None => out.push((&e.merge_name, vec![e])),
            }
        }
        out
    }
}

impl IntoIterator for EventList {
    type Item = EventSpec;
    type IntoIter = std::vec::IntoIter<EventSpec>;
    fn into_iter(self) -> Self::IntoIter {
        self.events.into_iter()
    }
}

impl<'a> IntoIterator for &'a EventList {
    type Item = &'a EventSpec;
    type IntoIter = std::slice::Iter<'a, EventSpec>;
    fn into_iter(self) -> Self::IntoIter {
        self.events.iter()
    }
}

impl std::str::FromStr for EventList {
    type Err = ParseError;

    /// Parses against [`Machine::current`].
    fn from_str(s: &str) -> Result<Self, ParseError> {
        Machine::current().parse(s)
    }
}

/// Text that is not a valid event list, or names what this machine does not have.
///
/// Its `Display` draws perf's picture:
///
/// ```text
/// event syntax error: 'cycles:x'
///                             \___ unknown modifier 'x' (modifiers: ukhIpPGHSDeWb)
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    input: String,
    pos: usize,
    message: String,
    help: Option<String>,
}

impl ParseError {
    pub(crate) fn new(input: &str, pos: usize, message: impl Into<String>) -> Self {
        Self {
            input: input.into(),
            pos: pos.min(input.len()),
            message: message.into(),
            help: None,
        }
    }

    pub(crate) fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// The text that was parsed.
    pub fn input(&self) -> &str {
        &self.input
    }

    /// The byte offset of the offending character.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// What would be valid there (the PMU's terms, the PMUs there are), when known.
    pub fn help(&self) -> Option<&str> {
        self.help.as_deref()
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const HEAD: &str = "event syntax error: '";
        writeln!(f, "{HEAD}{}'", self.input)?;
        let before = self
            .input
            .get(..self.pos)
            .map_or(self.pos, |s| s.chars().count());
        let col = HEAD.len() + before;
        write!(f, "{:col$}\\___ {}", "", self.message)?;
        if let Some(h) = &self.help {
            write!(f, "\n{h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseError {}

impl From<ParseError> for crate::Error {
    fn from(e: ParseError) -> Self {
        let mut reason = format!("{} (at character {})", e.message, e.pos + 1);
        if let Some(h) = e.help {
            reason.push_str("; ");
            reason.push_str(&h);
        }
        crate::Error::Parse {
            input: e.input,
            reason,
        }
    }
}
