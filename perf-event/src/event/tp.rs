//! Tracepoints (`PERF_TYPE_TRACEPOINT`), by id or by `system:name` through tracefs.

use std::fs;

use perf_sys as sys;

use super::Event;
use crate::error::{Error, Result};

/// A tracepoint, by the id tracefs gives it (`events/<system>/<name>/id`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[doc(alias = "PERF_TYPE_TRACEPOINT")]
pub struct Tracepoint {
    /// The tracepoint id.
    pub id: u64,
}

impl Tracepoint {
    /// Looks up `system:name` (e.g. `"sched:sched_switch"`) in tracefs, found through `/proc/mounts`.
    ///
    /// # Errors
    ///
    /// [`Error::Parse`] when the text is not `system:name`, tracefs is not readable (it is root-only
    /// on many systems) or the tracepoint does not exist.
    pub fn by_name(name: &str) -> Result<Self> {
        let (system, event) = name.split_once(':').ok_or_else(|| Error::Parse {
            input: name.into(),
            reason: "a tracepoint is named `system:name`".into(),
        })?;
        Self::new(system, event)
    }

    /// Looks up tracepoint `event` of `system` in tracefs.
    ///
    /// # Errors
    ///
    /// As [`by_name`](Self::by_name).
    pub fn new(system: &str, event: &str) -> Result<Self> {
        let input = format!("{system}:{event}");
        let bad = |c: &str| c.is_empty() || c.contains('/') || c.contains("..");
        if bad(system) || bad(event) {
            return Err(Error::Parse {
                input,
                reason: "not a tracepoint name".into(),
            });
        }
        let root = crate::sys::tracefs();
        let path = root.join("events").join(system).join(event).join("id");
        let text = fs::read_to_string(&path).map_err(|e| Error::Parse {
            input: input.clone(),
            reason: match e.kind() {
                std::io::ErrorKind::NotFound if root.join("events").exists() => {
                    format!("no such tracepoint ({} does not exist)", path.display())
                }
                std::io::ErrorKind::NotFound => {
                    format!("tracefs is not mounted at {}", root.display())
                }
                std::io::ErrorKind::PermissionDenied => format!(
                    "tracefs ({}) is not readable by this user; pass the id with \
                     `Tracepoint {{ id }}` instead",
                    root.display()
                ),
                _ => format!("reading {}: {e}", path.display()),
            },
        })?;
        let id = text.trim().parse().map_err(|_| Error::Parse {
            input,
            reason: format!("{} does not hold a number", path.display()),
        })?;
        Ok(Self { id })
    }
}

super::into_event!(Tracepoint, v => Event::new(sys::PERF_TYPE_TRACEPOINT, v.id, format!("tracepoint {}", v.id)));
