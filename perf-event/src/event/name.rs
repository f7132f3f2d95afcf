//! [`Event::parse`]: one event by perf's name for it, through [`spec`](super::spec).

use super::spec::Machine;
use super::Event;
use crate::error::{Error, Result};

pub(super) fn parse(input: &str) -> Result<Event> {
    let list = Machine::current().parse_unsplit(input)?;
    let n = list.len();
    list.into_event().ok_or_else(|| Error::Parse {
        input: input.into(),
        reason: format!(
            "names {n} events; parse it with `event::spec::Machine::parse` to get them all"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use perf_sys as sys;

    #[test]
    fn software_names_and_modifiers() {
        let e = parse("page-faults:u").unwrap();
        assert_eq!(e.ty, sys::PERF_TYPE_SOFTWARE);
        assert_eq!(e.config, u64::from(sys::PERF_COUNT_SW_PAGE_FAULTS));
        let m = e.modifiers.unwrap();
        assert!(!m.exclude_user && m.exclude_kernel && m.exclude_hv);
        let t = parse("task-clock").unwrap();
        assert_eq!(t.config, u64::from(sys::PERF_COUNT_SW_TASK_CLOCK));
        assert!(t.modifiers.is_none());
        assert_eq!(parse("cycles:ppk").unwrap().modifiers.unwrap().precise, 2);
        assert!(parse("no-such-event-name").is_err());
        assert!(parse("page-faults:x").is_err());
        assert!(parse("page-faults,task-clock").is_err());
    }
}
