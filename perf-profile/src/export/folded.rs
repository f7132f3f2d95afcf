//! Folded stacks: `root;caller;leaf COUNT`, one line per stack, what inferno, speedscope and
//! Pyroscope read.

use std::io::Write;

use crate::error::{Error, Result};
use crate::profile::Profile;

impl Profile {
    /// The folded stacks: each sampled stack's frame names from the root to the leaf (inlined
    /// functions as frames of their own), and its sample count, or for an off-CPU profile its
    /// nanoseconds off CPU. Identical names merge.
    pub fn folded(&self) -> Vec<(String, u64)> {
        let off_cpu = crate::offcpu::is_off_cpu(&self.info);
        let mut out: Vec<(String, u64)> = Vec::new();
        let mut index = std::collections::HashMap::new();
        let mut names = Vec::new();
        for (stack, counts) in self.stacks.sampled() {
            names.clear();
            for frame in self.stacks.frames_of(stack) {
                // Leaf first; within a frame, innermost inlined function first.
                names.extend(self.frame_names(frame));
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
