//! `perf list`: every event a [`Machine`] offers, with what perf says about it.

use std::fs;

use super::symbols;
use super::Machine;

/// What kind of event a [`Listed`] is; also the heading `perf list` prints for it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ListedKind {
    /// A generalized hardware event (`cycles`).
    Hardware,
    /// A software event (`task-clock`).
    Software,
    /// A perf tool event (`duration_time`).
    Tool,
    /// A generalized hardware cache event (`L1-dcache-load-misses`).
    Cache,
    /// A PMU's sysfs event alias (`msr/tsc/`).
    Pmu,
    /// A tracepoint (`sched:sched_switch`).
    Tracepoint,
    /// An event of the kernel's JSON table for this CPU model (`inst_retired.any_p`); needs
    /// perf-event's `pmu-events` feature. perf lists these under their [`Listed::topic`].
    Model,
}

impl ListedKind {
    /// The bracketed label `perf list` prints.
    pub fn label(self) -> &'static str {
        match self {
            Self::Hardware => "Hardware event",
            Self::Software => "Software event",
            Self::Tool => "Tool event",
            Self::Cache => "Hardware cache event",
            Self::Pmu => "Kernel PMU event",
            Self::Tracepoint => "Tracepoint event",
            Self::Model => "Model-specific event",
        }
    }
}

/// One event of [`Machine::list`].
#[derive(Clone, Debug, PartialEq)]
pub struct Listed {
    /// The name to pass to [`Machine::parse`] (`cycles`, `msr/tsc/`, `sched:sched_switch`).
    pub name: String,
    /// Other names of the same event (`cpu-cycles` for `cycles`).
    pub aliases: Vec<String>,
    /// What it is.
    pub kind: ListedKind,
    /// The PMU, for [`ListedKind::Pmu`].
    pub pmu: Option<String>,
    /// What the event counts, where known.
    pub description: Option<String>,
    /// The terms a PMU alias stands for (`event=0x3c`).
    pub terms: Option<String>,
    /// The alias's `.scale`.
    pub scale: Option<f64>,
    /// The alias's `.unit`.
    pub unit: Option<String>,
    /// For [`ListedKind::Model`]: the table's topic (`cache`, `pipeline`, `uncore-memory`).
    pub topic: Option<String>,
    /// For [`ListedKind::Model`]: the table marks it deprecated (perf hides it by default).
    pub deprecated: bool,
}

impl Listed {
    fn new(name: impl Into<String>, kind: ListedKind) -> Self {
        Self {
            name: name.into(),
            aliases: Vec::new(),
            kind,
            pmu: None,
            description: None,
            terms: None,
            scale: None,
            unit: None,
            topic: None,
            deprecated: false,
        }
    }

    /// The line `perf list` prints: the name (`OR` its aliases) and the kind.
    pub fn line(&self) -> String {
        let mut names = self.name.clone();
        for a in &self.aliases {
            names.push_str(" OR ");
            names.push_str(a);
        }
        format!("  {names:<50} [{}]", self.kind.label())
    }
}

impl Machine {
    /// Every event this machine offers, in `perf list`'s order: hardware, software, tool, cache,
    /// each PMU's sysfs aliases (with their scale and unit), the CPU model's events from the
    /// kernel's JSON tables (feature `pmu-events`; by topic, then name), tracepoints. Hardware and cache
    /// events are listed whether or not a hardware PMU exists (perf shows only the ones that
    /// open; try them with [`Counter::new`](crate::count::Counter::new)).
    pub fn list(&self) -> Vec<Listed> {
        let mut out = Vec::new();
        let mut hw: Vec<Listed> = symbols::HARDWARE
            .iter()
            .map(|(names, _, d)| {
                // perf lists the short name first where there is one (`branches`, `cycles`).
                let mut l = Listed::new(names[0], ListedKind::Hardware);
                l.aliases = names[1..].iter().map(|s| s.to_string()).collect();
                l.description = Some((*d).into());
                l
            })
            .collect();
        hw.sort_by(|a, b| a.name.cmp(&b.name));
        out.extend(hw);
        let mut sw: Vec<Listed> = symbols::SOFTWARE
            .iter()
            .map(|(names, _, d)| {
                let mut l = Listed::new(names[0], ListedKind::Software);
                l.aliases = names[1..].iter().map(|s| s.to_string()).collect();
                l.description = Some((*d).into());
                l
            })
            .collect();
        sw.sort_by(|a, b| a.name.cmp(&b.name));
        out.extend(sw);
        for (name, d) in symbols::TOOL {
            let mut l = Listed::new(*name, ListedKind::Tool);
            l.description = Some((*d).into());
            out.push(l);
        }
        for (names, _, ops) in symbols::CACHES {
            for (k, (op_names, _)) in symbols::CACHE_OPS.iter().enumerate() {
                if !ops[k] {
                    continue;
                }
                // perf lists `<cache>-<ops>` and `<cache>-<op>-misses`.
                let (plural, single) = (op_names[1], op_names[0]);
                for name in [
                    format!("{}-{plural}", names[0]),
                    format!("{}-{single}-misses", names[0]),
                ] {
                    out.push(Listed::new(name, ListedKind::Cache));
                }
            }
        }
        for pmu in self.pmus() {
            for alias in pmu.events() {
                let mut l = Listed::new(format!("{}/{alias}/", pmu.name()), ListedKind::Pmu);
                l.pmu = Some(pmu.name().to_owned());
                l.terms = pmu.alias(&alias);
                l.scale = pmu.alias_scale(&alias);
                l.unit = pmu.alias_unit(&alias);
                out.push(l);
            }
        }
        let pmus = self.pmus();
        let mut model: Vec<Listed> = self
            .json_events()
            .iter()
            .filter(|e| pmus.iter().any(|p| super::parser::json_on(e, p)))
            .map(|e| {
                let mut l = Listed::new(e.name.to_ascii_lowercase(), ListedKind::Model);
                l.pmu = (!e.pmu.is_empty()).then(|| e.pmu.to_owned());
                l.description = (!e.desc.is_empty()).then(|| e.desc.to_owned());
                l.terms = Some(e.terms.to_owned());
                l.topic = Some(e.topic.to_owned());
                l.deprecated = e.deprecated;
                l
            })
            .collect();
        model.sort_by(|a, b| (&a.topic, &a.name, &a.pmu).cmp(&(&b.topic, &b.name, &b.pmu)));
        model.dedup_by(|a, b| a.name == b.name && a.topic == b.topic);
        out.extend(model);
        if let Some(root) = self.tracefs() {
            let events = root.join("events");
            let mut tps = Vec::new();
            for sys in sorted_dirs(&events) {
                for ev in sorted_dirs(&events.join(&sys)) {
                    if events.join(&sys).join(&ev).join("id").exists() {
                        tps.push(format!("{sys}:{ev}"));
                    }
                }
            }
            // By the whole name, as perf sorts them (`fib6:...` before `fib:...`).
            tps.sort();
            out.extend(
                tps.into_iter()
                    .map(|n| Listed::new(n, ListedKind::Tracepoint)),
            );
        }
        out
    }
}

fn sorted_dirs(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}
