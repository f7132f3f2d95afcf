//! Counter values as read from the kernel.

use std::fmt;

use perf_sys as sys;

const GROUP: u64 = sys::PERF_FORMAT_GROUP as u64;
const ENA: u64 = sys::PERF_FORMAT_TOTAL_TIME_ENABLED as u64;
const RUN: u64 = sys::PERF_FORMAT_TOTAL_TIME_RUNNING as u64;
const ID: u64 = sys::PERF_FORMAT_ID as u64;
const LOST: u64 = sys::PERF_FORMAT_LOST as u64;

/// The largest non-group read: count, time enabled, time running, id, lost.
pub(crate) const SINGLE_MAX: usize = 40;

/// What one read of a counter returned. Fields other than `count` are `Some` when
/// [`StatFormat`](crate::config::StatFormat) asked for them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Stat {
    /// The count.
    pub count: u64,
    /// The event id.
    pub id: Option<u64>,
    /// Nanoseconds the event was enabled.
    pub time_enabled: Option<u64>,
    /// Nanoseconds the event was on the PMU (less than enabled when multiplexed).
    pub time_running: Option<u64>,
    /// Records lost by the event's ring buffer.
    #[doc(alias = "lost")]
    pub lost_records: Option<u64>,
    /// The other group members, when read with `stat_format.siblings` (the leader is this stat).
    pub siblings: Vec<SiblingStat>,
}

/// One group member in a group read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SiblingStat {
    /// The count.
    pub count: u64,
    /// The event id.
    pub id: Option<u64>,
    /// Records lost.
    pub lost_records: Option<u64>,
}

/// A count corrected for multiplexing: `count × time_enabled / time_running`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Scaled {
    /// The event ran the whole time it was enabled: the count is exact.
    Exact(u64),
    /// The event shared the PMU; the count is extrapolated from the fraction of time it ran.
    Estimate {
        /// The extrapolated count.
        value: u64,
        /// `time_running / time_enabled`, in (0, 1).
        running: f64,
    },
    /// The event was enabled but never got on the PMU (`time_running == 0`): nothing was counted and
    /// nothing can be estimated.
    NotCounted,
    /// The read format lacks `time_enabled`/`time_running`, so multiplexing cannot be detected.
    Unscaled(u64),
}

impl Scaled {
    pub(crate) fn new(count: u64, enabled: Option<u64>, running: Option<u64>) -> Self {
        match (enabled, running) {
            (Some(_), Some(0)) => Self::NotCounted,
            (Some(e), Some(r)) if r >= e => Self::Exact(count),
            (Some(e), Some(r)) => {
                let value = (u128::from(count) * u128::from(e) / u128::from(r)) as u64;
                Self::Estimate {
                    value,
                    running: r as f64 / e as f64,
                }
            }
            _ => Self::Unscaled(count),
        }
    }

    /// The (estimated) count, `None` when not counted.
    pub fn value(&self) -> Option<u64> {
        match *self {
            Self::Exact(v) | Self::Unscaled(v) | Self::Estimate { value: v, .. } => Some(v),
            Self::NotCounted => None,
        }
    }
}

impl fmt::Display for Scaled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exact(v) | Self::Unscaled(v) => write!(f, "{v}"),
            Self::Estimate { value, running } => {
                write!(
                    f,
                    "~{value} (scaled, ran {:.1}% of the time)",
                    running * 100.0
                )
            }
            Self::NotCounted => f.write_str("not counted"),
        }
    }
}

impl Stat {
    /// The count corrected for multiplexing; [`Scaled::NotCounted`] when the event never ran.
    pub fn scaled(&self) -> Scaled {
        Scaled::new(self.count, self.time_enabled, self.time_running)
    }

    /// Bytes a read returns for `members` events with `read_format`.
    pub(crate) fn read_size(read_format: u64, members: usize) -> usize {
        let per = 1 + usize::from(read_format & ID != 0) + usize::from(read_format & LOST != 0);
        let times = usize::from(read_format & ENA != 0) + usize::from(read_format & RUN != 0);
        if read_format & GROUP != 0 {
            8 * (1 + times + per * members)
        } else {
            8 * (times + per)
        }
    }

    /// Decodes a non-group read: `buf` holds the [`read_size`](Self::read_size) bytes read, then
    /// zeros.
    ///
    /// Without a branch: each field's word index is the count of the fields before it, known from
    /// the read format alone, and an absent field's word is loaded and dropped by a select. The
    /// indices stay below 5 words, so no bounds check is left either (the counter read's hot path).
    #[inline]
    pub(crate) fn decode_single(buf: &[u8; SINGLE_MAX], read_format: u64) -> Self {
        let word = |i: usize| {
            buf.get(8 * i..8 * i + 8)
                .and_then(|w| <[u8; 8]>::try_from(w).ok())
                .map_or(0, u64::from_ne_bytes)
        };
        let has = |bit: u64| read_format & bit != 0;
        let at_run = 1 + usize::from(has(ENA));
        let at_id = at_run + usize::from(has(RUN));
        let at_lost = at_id + usize::from(has(ID));
        Self {
            count: word(0),
            id: has(ID).then_some(word(at_id)),
            time_enabled: has(ENA).then_some(word(1)),
            time_running: has(RUN).then_some(word(at_run)),
            lost_records: has(LOST).then_some(word(at_lost)),
            siblings: Vec::new(),
        }
    }
}

/// A group read decoded in place: no allocation.
///
/// Its `Debug` shows the members as `(id, count)` pairs, the leader first (with `stat_format.id`;
/// without it, the counts alone), then their lost-record counts when read.
#[derive(Clone, Copy)]
pub struct GroupStat<'a> {
    read_format: u64,
    nr: usize,
    time_enabled: Option<u64>,
    time_running: Option<u64>,
    members: &'a [u8],
}

impl<'a> GroupStat<'a> {
    /// Decodes a group read; `None` when `buf` is shorter than the member count says.
    #[inline]
    pub(crate) fn decode(buf: &'a [u8], read_format: u64) -> Option<Self> {
        let mut w = Words::new(buf);
        let nr = usize::try_from(w.next_u64()).ok()?;
        let time_enabled = w.opt(read_format & ENA != 0);
        let time_running = w.opt(read_format & RUN != 0);
        let header =
            8 * (1 + usize::from(time_enabled.is_some()) + usize::from(time_running.is_some()));
        let per = Self::entry_size(read_format);
        let members = buf.get(header..header.checked_add(nr.checked_mul(per)?)?)?;
        Some(Self {
            read_format,
            nr,
            time_enabled,
            time_running,
            members,
        })
    }

    fn entry_size(read_format: u64) -> usize {
        8 * (1 + usize::from(read_format & ID != 0) + usize::from(read_format & LOST != 0))
    }

    /// Number of members read (the leader first).
    pub fn len(&self) -> usize {
        self.nr
    }

    /// Whether no member was read.
    pub fn is_empty(&self) -> bool {
        self.nr == 0
    }

    /// Nanoseconds the group was enabled.
    pub fn time_enabled(&self) -> Option<u64> {
        self.time_enabled
    }

    /// Nanoseconds the group was on the PMU.
    pub fn time_running(&self) -> Option<u64> {
        self.time_running
    }

    /// Member `i` (0 is the leader, then members in the order they were added).
    pub fn get(&self, i: usize) -> Option<SiblingStat> {
        let size = Self::entry_size(self.read_format);
        let entry = self
            .members
            .get(i.checked_mul(size)?..(i + 1).checked_mul(size)?)?;
        let mut w = Words::new(entry);
        Some(SiblingStat {
            count: w.next_u64(),
            id: w.opt(self.read_format & ID != 0),
            lost_records: w.opt(self.read_format & LOST != 0),
        })
    }

    /// The count of member `i`, `None` past the end.
    #[inline]
    pub fn count(&self, i: usize) -> Option<u64> {
        let size = Self::entry_size(self.read_format);
        let at = i.checked_mul(size)?;
        Some(Words::new(self.members.get(at..at + 8)?).next_u64())
    }

    /// The member with event id `id` (needs `stat_format.id`).
    pub fn by_id(&self, id: u64) -> Option<SiblingStat> {
        self.iter().find(|m| m.id == Some(id))
    }

    /// Every member, the leader first.
    pub fn iter(&self) -> impl Iterator<Item = SiblingStat> + '_ {
        (0..self.nr).filter_map(move |i| self.get(i))
    }

    /// Member `i`'s count corrected for multiplexing (the whole group runs or not, together).
    pub fn scaled(&self, i: usize) -> Option<Scaled> {
        Some(Scaled::new(
            self.count(i)?,
            self.time_enabled,
            self.time_running,
        ))
    }

    /// The read as an owned [`Stat`]: the leader, with the others in `siblings` (allocates).
    pub fn to_stat(&self) -> Stat {
        let leader = self.get(0).unwrap_or_default();
        Stat {
            count: leader.count,
            id: leader.id,
            time_enabled: self.time_enabled,
            time_running: self.time_running,
            lost_records: leader.lost_records,
            siblings: self.iter().skip(1).collect(),
        }
    }
}

impl std::fmt::Debug for GroupStat<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("GroupStat");
        d.field("time_enabled", &self.time_enabled)
            .field("time_running", &self.time_running);
        if self.read_format & ID != 0 {
            let pairs: Vec<(u64, u64)> = self
                .iter()
                .map(|m| (m.id.unwrap_or_default(), m.count))
                .collect();
            d.field("members", &pairs);
        } else {
            let counts: Vec<u64> = self.iter().map(|m| m.count).collect();
            d.field("members", &counts);
        }
        if self.read_format & LOST != 0 {
            let lost: Vec<u64> = self.iter().map(|m| m.lost_records.unwrap_or(0)).collect();
            d.field("lost_records", &lost);
        }
        d.finish()
    }
}

/// Native-endian u64 words of a read buffer; missing words read as 0 (callers check sizes first).
struct Words<'a> {
    buf: &'a [u8],
}

impl<'a> Words<'a> {
    #[inline]
    fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    #[inline]
    fn next_u64(&mut self) -> u64 {
        match self.buf.split_first_chunk::<8>() {
            Some((w, rest)) => {
                self.buf = rest;
                u64::from_ne_bytes(*w)
            }
            None => 0,
        }
    }

    #[inline]
    fn opt(&mut self, present: bool) -> Option<u64> {
        present.then(|| self.next_u64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    /// A non-group read as `Counter::stat` hands it to `decode_single`: the words, then zeros.
    fn single(words: &[u64]) -> [u8; SINGLE_MAX] {
        let mut buf = [0u8; SINGLE_MAX];
        buf[..8 * words.len()].copy_from_slice(&bytes(words));
        buf
    }

    /// Every read format of a non-group read, decoded against the kernel's order of fields walked one
    /// word at a time (`perf_read_one`: value, enabled, running, id, lost), with distinct words so
    /// a field read from its neighbour's place shows.
    #[test]
    fn single_decode_places_every_field_of_every_format() {
        for bits in 0..16u64 {
            let rf = [ENA, RUN, ID, LOST]
                .into_iter()
                .enumerate()
                .filter(|&(i, _)| bits & (1 << i) != 0)
                .fold(0, |rf, (_, b)| rf | b);
            let n = Stat::read_size(rf, 1) / 8;
            let words: Vec<u64> = (0..n as u64).map(|i| 1000 + i).collect();
            let mut next = words[1..].iter().copied();
            let mut field = |bit: u64| (rf & bit != 0).then(|| next.next().unwrap());
            let want = (words[0], field(ENA), field(RUN), field(ID), field(LOST));
            assert_eq!(next.next(), None, "read format {rf:#x}: words left over");
            let s = Stat::decode_single(&single(&words), rf);
            let got = (
                s.count,
                s.time_enabled,
                s.time_running,
                s.id,
                s.lost_records,
            );
            assert_eq!(got, want, "read format {rf:#x}");
            assert!(s.siblings.is_empty());
        }
    }

    #[test]
    fn single_and_group_layouts() {
        let rf = ENA | RUN | ID | LOST;
        assert_eq!(Stat::read_size(rf, 1), 40);
        let s = Stat::decode_single(&single(&[5, 100, 50, 7, 0]), rf);
        assert_eq!(
            (
                s.count,
                s.time_enabled,
                s.time_running,
                s.id,
                s.lost_records
            ),
            (5, Some(100), Some(50), Some(7), Some(0))
        );
        assert_eq!(
            s.scaled(),
            Scaled::Estimate {
                value: 10,
                running: 0.5
            }
        );

        let g = GROUP | ENA | ID;
        assert_eq!(Stat::read_size(g, 3), 8 * (2 + 6));
        let buf = bytes(&[3, 99, 10, 1, 20, 2, 30, 3]);
        let gs = GroupStat::decode(&buf, g).unwrap();
        assert_eq!(gs.len(), 3);
        assert_eq!(gs.count(2), Some(30));
        assert_eq!(gs.by_id(2).unwrap().count, 20);
        assert_eq!(gs.to_stat().siblings.len(), 2);
        assert!(GroupStat::decode(&buf[..40], g).is_none());
        // Debug: (id, count) pairs, the leader first, not the raw words.
        assert_eq!(
            format!("{gs:?}"),
            "GroupStat { time_enabled: Some(99), time_running: None, \
             members: [(1, 10), (2, 20), (3, 30)] }"
        );
        let words = bytes(&[2, 44, 45]);
        let plain = GroupStat::decode(&words, GROUP).unwrap();
        assert_eq!(
            format!("{plain:?}"),
            "GroupStat { time_enabled: None, time_running: None, members: [44, 45] }"
        );
    }

    #[test]
    fn not_counted_when_never_running() {
        assert_eq!(Scaled::new(0, Some(10), Some(0)).to_string(), "not counted");
        assert_eq!(Scaled::new(7, Some(10), Some(10)), Scaled::Exact(7));
        assert_eq!(Scaled::new(7, None, None), Scaled::Unscaled(7));
    }
}
