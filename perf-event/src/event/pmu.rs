//! PMUs and their events by name, from sysfs (`/sys/bus/event_source/devices/<pmu>/`).
//!
//! A PMU directory has `type` (the number for `perf_event_attr.type`), `format/<term>` (which bits of
//! `config`..`config4` a term sets, e.g. `config:0-7`) and `events/<alias>` (named events as terms,
//! e.g. `event=0x3c`). [`Pmu::event`] turns terms into an [`Event`]:
//!
//! ```no_run
//! use perf_event::event::pmu::Pmu;
//!
//! let msr = Pmu::by_name("msr")?;
//! let tsc = msr.event("tsc")?;
//! # Ok::<(), perf_event::Error>(())
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use super::Event;
use crate::error::{Error, Result};
use crate::sys::PMU_DIR;

/// A PMU described by sysfs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pmu {
    name: String,
    ty: u32,
    dir: PathBuf,
}

/// Which bits of which config field a format term sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    /// 0 for `config`, 1 for `config1`, ... 4 for `config4`.
    pub field: u8,
    /// Bit ranges, low bits of the value first: `(low, high)` inclusive.
    pub ranges: Vec<(u32, u32)>,
}

impl Format {
    /// Parses a sysfs format line such as `config:0-7,21` or `config1:0-63`.
    pub fn parse(text: &str) -> Option<Self> {
        let (field, bits) = text.trim().split_once(':')?;
        let field = match field {
            "config" => 0,
            "config1" => 1,
            "config2" => 2,
            "config3" => 3,
            "config4" => 4,
            _ => return None,
        };
        let mut ranges = Vec::new();
        for part in bits.split(',') {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
                None => {
                    let b = part.trim().parse().ok()?;
                    (b, b)
                }
            };
            if hi < lo || hi > 63 {
                return None;
            }
            ranges.push((lo, hi));
        }
        Some(Self { field, ranges })
    }

    /// Scatters `value` into the bits of this format; `None` when it does not fit.
    pub fn place(&self, mut value: u64) -> Option<(u8, u64, u64)> {
        let (mut bits, mut mask) = (0u64, 0u64);
        for &(lo, hi) in &self.ranges {
            let width = hi - lo + 1;
            let field_mask = if width == 64 {
                u64::MAX
            } else {
                (1u64 << width) - 1
            };
            bits |= (value & field_mask) << lo;
            mask |= field_mask << lo;
            value = if width == 64 { 0 } else { value >> width };
        }
        (value == 0).then_some((self.field, bits, mask))
    }
}

impl Pmu {
    /// Opens the PMU `name` (`msr`, `cpu`, `uprobe`, ...).
    ///
    /// # Errors
    ///
    /// [`Error::Parse`] naming the PMUs that do exist when there is no such PMU, saying so when the
    /// machine has no hardware PMU at all.
    pub fn by_name(name: &str) -> Result<Self> {
        Self::in_dir(Path::new(PMU_DIR), name)
    }

    /// Opens the PMU `name` of a sysfs tree rooted at `root` (what
    /// `/sys/bus/event_source/devices` is on a live system): a copy of another machine's tree, or
    /// a test fixture.
    ///
    /// # Errors
    ///
    /// As [`by_name`](Self::by_name).
    pub fn in_dir(root: &Path, name: &str) -> Result<Self> {
        Self::try_in_dir(root, name).ok_or_else(|| {
            let known: Vec<String> = pmu_names(root);
            let near = super::spec::did_you_mean(name, known.iter().map(String::as_str));
            let mut reason = format!(
                "no PMU named {name:?}{near}; this system has: {}",
                known.join(" ")
            );
            if crate::sys::is_cpu_pmu(name) && !known.iter().any(|n| crate::sys::is_cpu_pmu(n)) {
                reason.push_str(" (no hardware PMU; this looks like a virtual machine)");
            }
            Error::Parse {
                input: name.into(),
                reason,
            }
        })
    }

    pub(crate) fn try_in_dir(root: &Path, name: &str) -> Option<Self> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return None;
        }
        let dir = root.join(name);
        let ty = fs::read_to_string(dir.join("type"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Some(Self {
            name: name.into(),
            ty,
            dir,
        })
    }

    /// The PMU's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The PMU's type number (`perf_event_attr.type`).
    pub fn ty(&self) -> u32 {
        self.ty
    }

    /// The PMU's sysfs directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether this is a CPU core PMU as perf decides it: named `cpu`, or with a `cpus` file (the
    /// core PMUs of hybrid x86 and of Arm systems). A machine with several is heterogeneous.
    pub fn is_core(&self) -> bool {
        self.name == "cpu" || self.dir.join("cpus").exists()
    }

    /// The CPUs this PMU counts on: its `cpus` file (core PMUs of heterogeneous systems) or
    /// `cpumask` (uncore PMUs, usually one CPU per package); `None` when it has neither (any CPU).
    pub fn cpus(&self) -> Option<Vec<u32>> {
        ["cpus", "cpumask"].iter().find_map(|f| {
            let text = fs::read_to_string(self.dir.join(f)).ok()?;
            crate::sys::parse_cpu_list(text.trim())
        })
    }

    /// The format term `term` (`format/<term>`), if the PMU has it.
    pub fn format(&self, term: &str) -> Option<Format> {
        if term.contains('/') || term.contains("..") {
            return None;
        }
        Format::parse(&fs::read_to_string(self.dir.join("format").join(term)).ok()?)
    }

    /// Names of the format terms.
    pub fn formats(&self) -> Vec<String> {
        list(self.dir.join("format"))
    }

    /// Names of the event aliases (`events/*`, without the `.scale`/`.unit` companions).
    pub fn events(&self) -> Vec<String> {
        list(self.dir.join("events"))
            .into_iter()
            .filter(|n| !n.contains('.'))
            .collect()
    }

    /// The terms of alias `name` (`events/<name>`), if the PMU has it.
    pub fn alias(&self, name: &str) -> Option<String> {
        self.alias_file(name, "")
    }

    /// The factor that turns alias `name`'s count into its unit (`events/<name>.scale`), e.g.
    /// `2.3283064365386962890625e-10` for RAPL energy counts in Joules.
    pub fn alias_scale(&self, name: &str) -> Option<f64> {
        self.alias_file(name, ".scale")?.parse().ok()
    }

    /// The unit of alias `name` once scaled (`events/<name>.unit`), e.g. `Joules` or `MiB`.
    pub fn alias_unit(&self, name: &str) -> Option<String> {
        self.alias_file(name, ".unit").filter(|u| !u.is_empty())
    }

    fn alias_file(&self, name: &str, suffix: &str) -> Option<String> {
        if name.contains('/') || name.contains("..") || name.is_empty() {
            return None;
        }
        Some(
            fs::read_to_string(self.dir.join("events").join(format!("{name}{suffix}")))
                .ok()?
                .trim()
                .to_owned(),
        )
    }

    /// Builds an event from `terms` as perf reads `pmu/terms/`: comma-separated `term=value`
    /// (value decimal or `0x` hex), bare terms (a flag format set to 1, or an alias from
    /// `events/`), the raw fields `config`..`config3`, and perf's config terms (`period=`,
    /// `freq=`, `call-graph=`, ...). The empty string is the PMU's event 0. See
    /// [`spec`](super::spec) for the whole grammar.
    ///
    /// # Errors
    ///
    /// [`Error::Parse`] naming the term that the PMU has neither as format nor as alias, or a value
    /// that does not fit its bits.
    pub fn event(&self, terms: &str) -> Result<Event> {
        let root = self.dir.parent().unwrap_or(Path::new(PMU_DIR));
        let machine = super::spec::Machine::from_sysfs(root);
        Ok(machine
            .parse_pmu_terms(self, terms)?
            .into_event()
            .unwrap_or_else(|| Event::new(self.ty, 0, format!("{}/{terms}/", self.name))))
    }
}

/// The PMU directory names under `root`, sorted.
pub(crate) fn pmu_names(root: &Path) -> Vec<String> {
    list(root.to_path_buf())
}

fn list(dir: PathBuf) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_scatter_bits() {
        let f = Format::parse("config:0-7,32-35\n").unwrap();
        assert_eq!(f.field, 0);
        assert_eq!(f.place(0x3c), Some((0, 0x3c, 0xf_0000_00ff)));
        assert_eq!(f.place(0x1ff), Some((0, 0x1_0000_00ff, 0xf_0000_00ff)));
        assert_eq!(f.place(0x1000), None);
        let g = Format::parse("config1:0-63").unwrap();
        assert_eq!(g.place(u64::MAX), Some((1, u64::MAX, u64::MAX)));
        let b = Format::parse("config:21").unwrap();
        assert_eq!(b.place(1), Some((0, 1 << 21, 1 << 21)));
        assert_eq!(Format::parse("config5:0"), None);
        assert_eq!(Format::parse("config:9-3"), None);
    }
}
