//! Options of a group member ([`CounterGroup::add`](crate::count::CounterGroup::add)): the group
//! leader decides pinning, exclusivity and the group read format.

use super::{
    ExtraRecord, Inherit, OnExecve, Priv, RecordIdFormat, SampleFormat, SampleOn, SampleSkid,
    SigData, WakeUp,
};

/// Options of a group member. Fields mean what they mean in [`super::Opts`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Opts {
    /// Privilege levels not to count.
    pub exclude: Priv,
    /// Which children inherit the member.
    pub inherit: Option<Inherit>,
    /// What happens on `execve(2)`.
    pub on_execve: Option<OnExecve>,
    /// What a read of this member's own fd returns.
    pub stat_format: StatFormat,
    /// Start enabled. Members of a disabled leader count only while the leader is enabled.
    pub enable: bool,
    /// When to take a sample.
    pub sample_on: SampleOn,
    /// Skid constraint of samples.
    pub sample_skid: SampleSkid,
    /// What a sample contains.
    pub sample_format: SampleFormat,
    /// Side-band records.
    pub extra_record: ExtraRecord,
    /// Id fields on every record.
    pub record_id_all: bool,
    /// Which id fields records carry.
    pub record_id_format: RecordIdFormat,
    /// Wake-up options.
    pub wake_up: WakeUp,
    /// Samples go into the leader's AUX area (`aux_output`). Since Linux 5.4.
    pub aux_output: bool,
    /// What happens on each overflow of this member.
    pub on_sample: OnSample,
}

/// A member's own read format (no group flag: the leader reads the group).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct StatFormat {
    /// The event id.
    pub id: bool,
    /// Time enabled.
    pub time_enabled: bool,
    /// Time running.
    pub time_running: bool,
    /// Lost records. Since Linux 6.0. A sampling member gets them by default where the kernel has
    /// them, as [`super::Opts::exact_stat_format`] says; clear `PERF_FORMAT_LOST` in
    /// [`CounterGroup::add_with`](crate::count::CounterGroup::add_with) to open exactly this
    /// format.
    pub lost_records: bool,
}

/// Actions on each overflow of a member.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct OnSample {
    /// Pause or resume the leader's AUX area. Since Linux 6.13.
    pub aux: Option<AuxTracer>,
    /// Send `SIGTRAP` with this data. Since Linux 5.13.
    pub sigtrap: Option<SigData>,
}

/// An action on the AUX area.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum AuxTracer {
    /// Pause AUX tracing (`aux_pause`).
    #[doc(alias = "aux_pause")]
    Pause,
    /// Resume AUX tracing (`aux_resume`).
    #[doc(alias = "aux_resume")]
    Resume,
}

impl Opts {
    /// The equivalent full [`super::Opts`].
    pub fn to_opts(&self) -> super::Opts {
        super::Opts {
            exclude: self.exclude.clone(),
            inherit: self.inherit,
            on_execve: self.on_execve,
            stat_format: super::StatFormat {
                id: self.stat_format.id,
                time_enabled: self.stat_format.time_enabled,
                time_running: self.stat_format.time_running,
                lost_records: self.stat_format.lost_records,
                siblings: false,
            },
            enable: self.enable,
            sample_on: self.sample_on.clone(),
            sample_skid: self.sample_skid,
            sample_format: self.sample_format.clone(),
            extra_record: self.extra_record.clone(),
            record_id_all: self.record_id_all,
            record_id_format: self.record_id_format.clone(),
            wake_up: self.wake_up.clone(),
            sigtrap_on_sample: self.on_sample.sigtrap,
            aux_output: self.aux_output,
            aux_on_sample: self.on_sample.aux,
            ..super::Opts::default()
        }
    }
}
