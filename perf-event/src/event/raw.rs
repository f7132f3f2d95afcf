//! Raw hardware events: a model-specific encoding for the CPU PMU (`PERF_TYPE_RAW`).

use perf_sys as sys;

use super::Event;

/// A raw event of the CPU PMU (`PERF_TYPE_RAW`): `config` is the model-specific event code.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[doc(alias = "PERF_TYPE_RAW")]
pub struct Raw {
    /// The event code.
    pub config: u64,
    /// Extra configuration.
    pub config1: u64,
    /// Extra configuration.
    pub config2: u64,
    /// Extra configuration. Since Linux 6.3.
    pub config3: u64,
}

super::into_event!(Raw, v => {
    let mut e = Event::new(sys::PERF_TYPE_RAW, v.config, format!("r{:x}", v.config));
    e.config1 = v.config1;
    e.config2 = v.config2;
    e.config3 = v.config3;
    e
});
