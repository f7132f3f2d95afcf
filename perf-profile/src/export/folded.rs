//! Folded stacks: `root;caller;leaf COUNT`, one line per stack, what inferno, speedscope and
//! Pyroscope read.

use std::io::Write;

use crate::error::{Error, Result};
use crate::profile::{clean, Profile};

/// A root frame that folded stacks (and the flame graph drawn from them) put above each stack's
/// outermost frame, to split the profile by who ran, as `stackcollapse-perf.pl --pid` / `--tid`
/// and inferno's collapser do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FoldedRoots {
    /// None: the stacks of every process and thread merge (the default).
    #[default]
    None,
    /// `comm-pid`: the process's name and id (`--per-process`).
    PerProcess,
    /// `comm-tid`: the thread's name (its `comm`) and id (`--per-thread`).
    PerThread,
}

impl Profile {
    /// The folded stacks: each sampled stack's frame names from the root to the leaf (inlined
    /// functions as frames of their own), and its sample count, or for an off-CPU profile its
    /// nanoseconds off CPU. Identical names merge. With [`set_folded_roots`](Self::set_folded_roots),
    /// each stack starts with a frame naming its process or thread.
    pub fn folded(&self) -> Vec<(String, u64)> {
        self.folded_with(self.folded_roots)
    }

    /// What [`folded`](Self::folded) and the folded and SVG outputs put at each stack's root (by
    /// default nothing).
    pub fn set_folded_roots(&mut self, roots: FoldedRoots) {
        self.folded_roots = roots;
    }

    /// [`folded`](Self::folded) with `roots` at each stack's root.
    pub fn folded_with(&self, roots: FoldedRoots) -> Vec<(String, u64)> {
        let off_cpu = crate::offcpu::is_off_cpu(&self.info);
        let mut out: Vec<(String, u64)> = Vec::new();
        let mut index = std::collections::HashMap::new();
        let mut names = Vec::new();
        let keyed: Box<dyn Iterator<Item = _>> = match roots {
            FoldedRoots::None => Box::new(self.stacks.sampled().map(|(s, c)| (s, None, c))),
            _ => Box::new(self.stacks.sampled_by_identity()),
        };
        for (stack, who, counts) in keyed {
            names.clear();
            for frame in self.stacks.frames_of(stack) {
                // Leaf first; within a frame, innermost inlined function first.
                names.extend(self.frame_names(frame));
            }
            if let Some(who) = who.and_then(|w| self.stacks.identity(w)) {
                names.push(match roots {
                    FoldedRoots::PerThread => {
                        format!("{}-{}", clean(&who.thread_name), who.tid)
                    }
                    _ => format!("{}-{}", clean(&who.comm), who.pid),
                });
            }
            names.reverse();
            let line = names.join(";");
            let weight = if off_cpu {
                counts.period
            } else {
                counts.samples
            };
            match index.get(&line) {
                Some(&i) => {
                    let e: &mut (String, u64) = &mut out[i];
                    e.1 += weight;
                }
                None => {
                    index.insert(line.clone(), out.len());
                    out.push((line, weight));
                }
            }
        }
        out
    }

    /// Writes [`folded`](Self::folded) as text, one `stack count` line each.
    ///
    /// # Errors
    ///
    /// [`Error::Write`] when `w` fails.
    pub fn write_folded(&self, mut w: impl Write) -> Result<()> {
        for (stack, count) in self.folded() {
            writeln!(w, "{stack} {count}").map_err(Error::Write)?;
        }
        w.flush().map_err(Error::Write)
    }
}

#[cfg(test)]
mod tests {
    use super::FoldedRoots;
    use crate::export::dictionary::tests::sample_profile;

    #[test]
    fn roots_name_the_process_or_the_thread_and_none_by_default() {
        let mut p = sample_profile();
        let plain = p.folded();
        assert!(
            plain.iter().all(|(l, _)| l.starts_with("main;")),
            "{plain:?}"
        );
        let roots = |p: &crate::Profile, r| -> Vec<String> {
            p.folded_with(r).into_iter().map(|(l, _)| l).collect()
        };
        let strip = |v: Vec<String>| -> Vec<String> {
            v.iter()
                .map(|l| l.split_once(';').unwrap().1.to_owned())
                .collect()
        };
        let per_process = roots(&p, FoldedRoots::PerProcess);
        assert!(
            per_process.iter().all(|l| l.starts_with("app-10;main;")),
            "{per_process:?}"
        );
        let per_thread = roots(&p, FoldedRoots::PerThread);
        assert!(per_thread[0].starts_with("app-10;main;"), "{per_thread:?}");
        assert!(
            per_thread[1].starts_with("worker-11;main;"),
            "{per_thread:?}"
        );
        let plain_lines: Vec<String> = plain.iter().map(|(l, _)| l.clone()).collect();
        assert_eq!(strip(per_thread), plain_lines);
        p.set_folded_roots(FoldedRoots::PerThread);
        assert!(p.folded()[1].0.starts_with("worker-11;"));
    }
}
