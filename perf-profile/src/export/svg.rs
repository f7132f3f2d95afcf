//! Flame graph SVGs, drawn by inferno from the folded stacks (feature `flamegraph`; inferno is
//! CDDL-1.0 licensed).

use std::io::Write;

use crate::error::{Error, Result};
use crate::profile::Profile;

impl Profile {
    /// Writes a flame graph SVG of the profile (inferno's default look), titled with the event.
    ///
    /// # Errors
    ///
    /// [`Error::Write`] when `w` fails.
    pub fn write_svg(&self, w: impl Write) -> Result<()> {
        let lines: Vec<String> = self
            .folded()
            .into_iter()
            .map(|(stack, n)| format!("{stack} {n}"))
            .collect();
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = format!("{} at {} Hz", self.info.event, self.info.frequency);
        opts.count_name = "samples".into();
        inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), w)
            .map_err(Error::Write)
    }
}
