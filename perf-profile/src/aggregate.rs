//! Aggregation: a stack table in which each stack is a node (frame, parent) of a prefix tree, with
//! the samples and summed periods of the stacks that end there. Adding a sample is one lookup per
//! frame; memory grows with the number of unique stacks, never with the number of samples.
//!
//! Who ran is kept beside the tree: each sample's key is (stack, identity), identities (process,
//! thread, their names, container) interned once, so the samples of one stack in one thread stay
//! one entry and the tree itself is shared by every thread.

use foldhash::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use crate::maps::MappingId;

/// A frame, as aggregated: an address and what it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Frame {
    /// An address in a user-space mapping (an absolute address of that process).
    User {
        /// The mapping.
        mapping: MappingId,
        /// The address.
        addr: u64,
    },
    /// A user-space address outside every known mapping.
    Unmapped {
        /// The address.
        addr: u64,
    },
    /// A kernel address.
    Kernel {
        /// The address.
        addr: u64,
    },
    /// The kernel's part of a stack when its addresses cannot be named (`kptr_restrict`).
    KernelHidden,
    /// Code a JIT generated, named by the process's `/tmp/perf-PID.map`
    /// ([`maps::perf_map`](crate::maps::perf_map)).
    Jit {
        /// The process.
        pid: u32,
        /// The address.
        addr: u64,
    },
}

impl Frame {
    /// The outermost frame of a stack whose unwinding stopped before the natural end of the
    /// stack (see [`crate::unwind`]): named `[truncated]` in every output. It is an address in no
    /// mapping that no frame can have (`u64::MAX`: the kernel reserves the top addresses of a
    /// call chain for its `PERF_CONTEXT_*` markers, and unwinding never yields one).
    pub const TRUNCATED: Frame = Frame::Unmapped { addr: u64::MAX };

    /// Whether this is [`Frame::TRUNCATED`].
    pub fn is_truncated(&self) -> bool {
        *self == Self::TRUNCATED
    }
}

/// What [`Frame::TRUNCATED`] is named, in every output.
pub const TRUNCATED_NAME: &str = "[truncated]";

/// Index of a frame in [`Stacks::frames`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(pub u32);

/// Index of a stack (a node of the prefix tree) in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackId(pub u32);

/// Who ran when a sample was taken: its process and thread, as the sample and the side-band
/// records (COMM, FORK) named them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct Identity {
    /// The process (thread group) id.
    pub pid: u32,
    /// The thread id.
    pub tid: u32,
    /// The process's name (its main thread's `comm`).
    pub comm: Arc<str>,
    /// The thread's name (its `comm`, as `pthread_setname_np` or `prctl(PR_SET_NAME)` set it).
    pub thread_name: Arc<str>,
    /// The container the process runs in, from its cgroup (a 64-hex-digit id); `None` on the host.
    pub container_id: Option<Arc<str>>,
}

impl Identity {
    /// Thread `tid` of process `pid`, named `comm` (the process) and `thread_name`.
    pub fn new(pid: u32, tid: u32, comm: &str, thread_name: &str) -> Self {
        Self {
            pid,
            tid,
            comm: Arc::from(comm),
            thread_name: Arc::from(thread_name),
            container_id: None,
        }
    }

    /// The same, in container `id`.
    pub fn in_container(mut self, id: &str) -> Self {
        self.container_id = Some(Arc::from(id));
        self
    }
}

/// Index of an identity in [`Stacks::identities`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdentityId(pub u32);

/// What was sampled in one stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Samples whose stack is exactly this one.
    pub samples: u64,
    /// The sum of their periods (nanoseconds for `cpu-clock`, cycles for `cycles`).
    pub period: u64,
}

#[derive(Clone, Debug)]
struct Node {
    frame: FrameId,
    parent: Option<StackId>,
    counts: Counts,
}

/// The stack table: interned frames and the prefix tree of stacks.
#[derive(Clone, Debug)]
pub struct Stacks {
    frames: Vec<Frame>,
    frame_index: HashMap<Frame, FrameId>,
    nodes: Vec<Node>,
    /// By (frame, parent): keyed by the frame itself, so that a stack's known nodes are found by
    /// one lookup each (the frame's id is looked up only for a new node).
    node_index: HashMap<(Frame, Option<StackId>), StackId>,
    identities: Vec<Identity>,
    identity_index: HashMap<Identity, IdentityId>,
    /// By (stack, identity): the counts, in the order first seen.
    keyed: Vec<(StackId, Option<IdentityId>, Counts)>,
    keyed_index: HashMap<(StackId, Option<IdentityId>), usize>,
    total: Counts,
    /// The paths (root first: each frame and its node) of the last stacks a few threads added:
    /// a thread's consecutive samples share most of their frames (an interpreter's dozens), and
    /// those are then found by comparing, without two hash lookups each.
    recent: Vec<(Option<IdentityId>, StackPath)>,
    /// The slot of `recent` the next new thread takes.
    recent_next: usize,
    /// Which table this is: [`IdentityId`]s are this table's own, and a cache of them (see
    /// [`epoch`](Self::epoch)) must not outlive it.
    epoch: u64,
}

impl Default for Stacks {
    fn default() -> Self {
        static EPOCHS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Self {
            frames: Vec::new(),
            frame_index: HashMap::default(),
            nodes: Vec::new(),
            node_index: HashMap::default(),
            identities: Vec::new(),
            identity_index: HashMap::default(),
            keyed: Vec::new(),
            keyed_index: HashMap::default(),
            total: Counts::default(),
            recent: Vec::new(),
            recent_next: 0,
            epoch: EPOCHS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }
}

/// Interns `frame` in `frames` and its index.
fn intern(frames: &mut Vec<Frame>, index: &mut HashMap<Frame, FrameId>, frame: Frame) -> FrameId {
    *index.entry(frame).or_insert_with(|| {
        frames.push(frame);
        FrameId(frames.len() as u32 - 1)
    })
}

/// A stack's frames from the root, each with its node.
type StackPath = Vec<(Frame, StackId)>;

/// How many threads' last paths [`Stacks`] keeps.
const RECENT_PATHS: usize = 64;

impl Stacks {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// This table's number, unique among the tables this process made (a clone has its
    /// original's: their identities are the same): an [`IdentityId`] kept beside a table is
    /// valid while the table's epoch is the one it was interned in.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Every frame seen, indexed by [`FrameId`].
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// Interns `frame`.
    pub fn intern(&mut self, frame: Frame) -> FrameId {
        intern(&mut self.frames, &mut self.frame_index, frame)
    }

    /// Adds one sample of `period` whose frames, from the root (outermost caller) to the leaf, are
    /// `root_first`. Returns its stack, or `None` for an empty stack (not counted).
    pub fn add(
        &mut self,
        root_first: impl IntoIterator<Item = Frame>,
        period: u64,
    ) -> Option<StackId> {
        self.add_counts(root_first, Counts { samples: 1, period })
    }

    /// Adds `counts` (samples and their summed period, as another table had them) to the stack whose
    /// frames, root first, are `root_first`. Returns its stack, or `None` for an empty stack.
    pub fn add_counts(
        &mut self,
        root_first: impl IntoIterator<Item = Frame>,
        add: Counts,
    ) -> Option<StackId> {
        self.add_counts_as(root_first, add, None)
    }

    /// Adds one sample of `period` taken in `who`'s thread (see [`add`](Self::add)).
    pub fn add_as(
        &mut self,
        root_first: impl IntoIterator<Item = Frame>,
        period: u64,
        who: &Identity,
    ) -> Option<StackId> {
        let who = self.intern_identity(who);
        self.add_in(root_first, period, who)
    }

    /// Adds one sample of `period` taken in the thread of `who`, an identity interned in this
    /// table (see [`intern_identity`](Self::intern_identity)).
    pub fn add_in(
        &mut self,
        root_first: impl IntoIterator<Item = Frame>,
        period: u64,
        who: IdentityId,
    ) -> Option<StackId> {
        self.add_counts_as(root_first, Counts { samples: 1, period }, Some(who))
    }

    /// Interns `who`.
    pub fn intern_identity(&mut self, who: &Identity) -> IdentityId {
        if let Some(&id) = self.identity_index.get(who) {
            return id;
        }
        let id = IdentityId(self.identities.len() as u32);
        self.identities.push(who.clone());
        self.identity_index.insert(who.clone(), id);
        id
    }

    /// Every identity seen, indexed by [`IdentityId`].
    pub fn identities(&self) -> &[Identity] {
        &self.identities
    }

    /// The identity `id`.
    pub fn identity(&self, id: IdentityId) -> Option<&Identity> {
        self.identities.get(id.0 as usize)
    }

    /// Adds `add` to the stack whose frames, root first, are `root_first`, as taken by `who` (an
    /// interned identity; `None`: unknown). Returns its stack, or `None` for an empty stack.
    pub fn add_counts_as(
        &mut self,
        root_first: impl IntoIterator<Item = Frame>,
        add: Counts,
        who: Option<IdentityId>,
    ) -> Option<StackId> {
        let slot = match self.recent.iter().position(|(w, _)| *w == who) {
            Some(i) => i,
            None if self.recent.len() < RECENT_PATHS => {
                self.recent.push((who, Vec::new()));
                self.recent.len() - 1
            }
            None => {
                let i = self.recent_next % RECENT_PATHS;
                self.recent_next = i + 1;
                self.recent[i].0 = who;
                self.recent[i].1.clear();
                i
            }
        };
        let mut path = std::mem::take(&mut self.recent[slot].1);
        // While the frames are those of the thread's last stack, so are the nodes.
        let mut same = true;
        let mut parent = None;
        let mut depth = 0;
        for original in root_first {
            if same {
                match path.get(depth) {
                    Some(&(f, id)) if f == original => {
                        parent = Some(id);
                        depth += 1;
                        continue;
                    }
                    _ => {
                        same = false;
                        path.truncate(depth);
                    }
                }
            }
            let id = match self.node_index.entry((original, parent)) {
                Entry::Occupied(e) => *e.get(),
                Entry::Vacant(e) => {
                    let frame = intern(&mut self.frames, &mut self.frame_index, original);
                    let id = StackId(self.nodes.len() as u32);
                    self.nodes.push(Node {
                        frame,
                        parent,
                        counts: Counts::default(),
                    });
                    *e.insert(id)
                }
            };
            path.push((original, id));
            parent = Some(id);
            depth += 1;
        }
        // As deep as this stack (where it is the start of the last one).
        path.truncate(depth);
        self.recent[slot].1 = path;
        let id = parent?;
        let counts = &mut self.nodes[id.0 as usize].counts;
        counts.samples += add.samples;
        counts.period = counts.period.saturating_add(add.period);
        let keyed = &mut self.keyed;
        let at = *self.keyed_index.entry((id, who)).or_insert_with(|| {
            keyed.push((id, who, Counts::default()));
            keyed.len() - 1
        });
        let counts = &mut self.keyed[at].2;
        counts.samples += add.samples;
        counts.period = counts.period.saturating_add(add.period);
        self.total.samples += add.samples;
        self.total.period = self.total.period.saturating_add(add.period);
        Some(id)
    }

    /// The number of unique stacks (nodes of the tree).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether no sample was added.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// All samples together.
    pub fn total(&self) -> Counts {
        self.total
    }

    /// The stacks that samples ended in, with their counts, in the order first seen.
    pub fn sampled(&self) -> impl Iterator<Item = (StackId, Counts)> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.counts.samples > 0)
            .map(|(i, n)| (StackId(i as u32), n.counts))
    }

    /// The samples by stack and by who took them (`None`: not known), with their counts, in the
    /// order first seen: one entry per stack per thread.
    pub fn sampled_by_identity(
        &self,
    ) -> impl Iterator<Item = (StackId, Option<IdentityId>, Counts)> + '_ {
        self.keyed.iter().copied()
    }

    /// The frames of `stack`, leaf first.
    pub fn frames_of(&self, stack: StackId) -> impl Iterator<Item = FrameId> + '_ {
        let mut at = Some(stack);
        std::iter::from_fn(move || {
            let node = self.nodes.get(at?.0 as usize)?;
            at = node.parent;
            Some(node.frame)
        })
    }

    /// The frame `id`.
    pub fn frame(&self, id: FrameId) -> Option<Frame> {
        self.frames.get(id.0 as usize).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(addr: u64) -> Frame {
        Frame::Kernel { addr }
    }

    /// Threads' samples interleaved (more threads than the paths kept), stacks that share
    /// prefixes, are longer and shorter than the thread's last: every stack is the path of
    /// frames it was added with, and there is one node per distinct prefix.
    #[test]
    fn interleaved_threads_stacks_are_the_frames_they_were_added_with() {
        let mut s = Stacks::new();
        let mut prefixes = std::collections::HashSet::new();
        let mut x = 12345u64;
        let mut next = |n: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        let who: Vec<Identity> = (0..RECENT_PATHS as u32 + 4)
            .map(|t| Identity::new(1, t, "app", "t"))
            .collect();
        let mut last: Vec<Vec<Frame>> = vec![Vec::new(); who.len()];
        for _ in 0..5000 {
            let t = next(who.len() as u64) as usize;
            // Mostly the thread's last stack with its end changed; sometimes a new one.
            let mut frames = last[t].clone();
            if next(4) == 0 {
                frames.clear();
            }
            let keep = next(frames.len() as u64 + 1) as usize;
            frames.truncate(keep);
            for _ in 0..next(6) {
                frames.push(k(next(5)));
            }
            let id = s.add_as(frames.iter().copied(), 1, &who[t]);
            assert_eq!(id.is_none(), frames.is_empty());
            if let Some(id) = id {
                let mut got: Vec<Frame> = s.frames_of(id).map(|f| s.frame(f).unwrap()).collect();
                got.reverse();
                assert_eq!(got, frames);
            }
            for n in 1..=frames.len() {
                prefixes.insert(frames[..n].to_vec());
            }
            last[t] = frames;
        }
        assert_eq!(s.len(), prefixes.len());
        assert_eq!(
            s.total().samples,
            s.sampled().map(|(_, c)| c.samples).sum::<u64>()
        );
    }

    #[test]
    fn identical_stacks_share_one_node_and_prefixes_share_parents() {
        let mut s = Stacks::new();
        let a = s.add([k(1), k(2), k(3)], 10).unwrap();
        let b = s.add([k(1), k(2), k(3)], 5).unwrap();
        let c = s.add([k(1), k(2), k(4)], 7).unwrap();
        let d = s.add([k(1), k(2)], 1).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        // 1 -> 2 -> {3, 4}: four nodes for four samples of three stacks.
        assert_eq!(s.len(), 4);
        assert_eq!(s.frames().len(), 4);
        let sampled: Vec<_> = s.sampled().collect();
        assert_eq!(sampled.len(), 3);
        assert!(sampled.contains(&(
            a,
            Counts {
                samples: 2,
                period: 15
            }
        )));
        assert!(sampled.contains(&(
            d,
            Counts {
                samples: 1,
                period: 1
            }
        )));
        assert_eq!(
            s.total(),
            Counts {
                samples: 4,
                period: 23
            }
        );
        let leaf_first: Vec<Frame> = s.frames_of(c).map(|f| s.frame(f).unwrap()).collect();
        assert_eq!(leaf_first, [k(4), k(2), k(1)]);
        assert_eq!(s.frames_of(d).count(), 2);
        assert!(s.add([], 3).is_none());
        assert_eq!(s.total().samples, 4);
    }

    #[test]
    fn samples_of_one_stack_stay_apart_by_thread_and_together_within_one() {
        let mut s = Stacks::new();
        let (a, b) = (
            Identity::new(10, 10, "app", "main"),
            Identity::new(10, 11, "app", "worker"),
        );
        for _ in 0..3 {
            s.add_as([k(1), k(2)], 5, &a);
        }
        s.add_as([k(1), k(2)], 7, &b);
        s.add([k(1), k(2)], 1);
        // One tree: the stack is one node with every sample.
        assert_eq!(s.len(), 2);
        assert_eq!(s.sampled().count(), 1);
        assert_eq!(s.total().samples, 5);
        let keyed: Vec<_> = s
            .sampled_by_identity()
            .map(|(_, who, c)| {
                (
                    who.and_then(|w| s.identity(w)).cloned(),
                    c.samples,
                    c.period,
                )
            })
            .collect();
        assert_eq!(keyed, [(Some(a), 3, 15), (Some(b), 1, 7), (None, 1, 1)]);
        assert_eq!(s.identities().len(), 2);
    }

    #[test]
    fn memory_is_bounded_by_unique_stacks() {
        let mut s = Stacks::new();
        for i in 0..100_000u64 {
            s.add([k(1), k(2 + i % 3)], 1);
        }
        assert_eq!(s.len(), 4);
        assert_eq!(s.total().samples, 100_000);
    }
}
