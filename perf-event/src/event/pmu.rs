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
use std::path::PathBuf;

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
        let bad = name.is_empty() || name.contains('/') || name.contains("..");
        let dir = PathBuf::from(PMU_DIR).join(name);
        let ty = if bad {
            None
        } else {
            fs::read_to_string(dir.join("type"))
                .ok()
                .and_then(|t| t.trim().parse().ok())
        };
        let Some(ty) = ty else {
            let known: Vec<String> = crate::sys::pmus().into_iter().map(|(n, _)| n).collect();
            let mut reason = format!(
                "no PMU named {name:?}; this system has: {}",
                known.join(" ")
            );
            if crate::sys::is_cpu_pmu(name) && !crate::sys::has_cpu_pmu() {
                reason.push_str(" (no hardware PMU; this looks like a virtual machine)");
            }
            return Err(Error::Parse {
                input: name.into(),
                reason,
            });
        };
        Ok(Self {
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
        if name.contains('/') || name.contains("..") || name.is_empty() {
            return None;
        }
        Some(
            fs::read_to_string(self.dir.join("events").join(name))
                .ok()?
                .trim()
                .to_owned(),
        )
    }

    /// Builds an event from `terms`: comma-separated `term=value` (value decimal or `0x` hex),
    /// bare terms (a flag format set to 1, or an alias from `events/`), and the raw fields
    /// `config`..`config4`. The empty string is the PMU's event 0.
    ///
    /// # Errors
    ///
    /// [`Error::Parse`] naming the term that the PMU has neither as format nor as alias, or a value
    /// that does not fit its bits.
    pub fn event(&self, terms: &str) -> Result<Event> {
        let mut e = Event::new(self.ty, 0, format!("{}/{}/", self.name, terms));
        let mut fields = [0u64; 5];
        self.apply_terms(terms, &mut fields, 0)?;
        e.config = fields[0];
        e.config1 = fields[1];
        e.config2 = fields[2];
        e.config3 = fields[3];
        e.config4 = fields[4];
        Ok(e)
    }

    fn apply_terms(&self, terms: &str, fields: &mut [u64; 5], depth: u32) -> Result<()> {
        let err = |reason: String| Error::Parse {
            input: format!("{}/{}/", self.name, terms),
            reason,
        };
        for term in terms.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (key, value) = match term.split_once('=') {
                Some((k, v)) => {
                    let v = v.trim();
                    let n = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
                        Some(h) => u64::from_str_radix(h, 16),
                        None => v.parse(),
                    };
                    let n = n.map_err(|_| err(format!("{v:?} is not a number")))?;
                    (k.trim(), Some(n))
                }
                None => (term, None),
            };
            let raw_field = match key {
                "config" => Some(0),
                "config1" => Some(1),
                "config2" => Some(2),
                "config3" => Some(3),
                "config4" => Some(4),
                _ => None,
            };
            if let (Some(i), Some(v)) = (raw_field, value) {
                fields[i] = v;
                continue;
            }
            if let Some(fmt) = self.format(key) {
                let v = value.unwrap_or(1);
                let (field, bits, mask) = fmt.place(v).ok_or_else(|| {
                    err(format!(
                        "value {v:#x} does not fit term {key:?} of PMU {:?}",
                        self.name
                    ))
                })?;
                let f = &mut fields[usize::from(field)];
                *f = (*f & !mask) | bits;
                continue;
            }
            if value.is_none() && depth < 4 {
                if let Some(alias) = self.alias(key) {
                    self.apply_terms(&alias, fields, depth + 1)?;
                    continue;
                }
            }
            return Err(err(format!(
                "PMU {:?} has no format term or event named {key:?} (formats: {}; events: {})",
                self.name,
                self.formats().join(" "),
                self.events().join(" ")
            )));
        }
        Ok(())
    }
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
