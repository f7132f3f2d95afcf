//! Export: a [`Profile`] as pprof (`profile.proto`, gzip), folded stacks, OTLP profiles (feature
//! `otlp`, alpha) or a flame graph SVG (feature `flamegraph`). Every exporter reads the same stack table and symbols.

mod dictionary;
pub(crate) mod folded;
#[cfg(feature = "otlp")]
pub mod otlp;
pub(crate) mod pprof;
#[cfg(feature = "flamegraph")]
pub(crate) mod svg;

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::profile::Profile;

/// An output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// pprof `profile.proto`, gzip-compressed (`.pb.gz`, `.pprof`).
    Pprof,
    /// Folded stacks, one line per stack: `main;outer;leaf 42` (`.folded`).
    Folded,
    /// A flame graph SVG drawn by inferno (`.svg`; feature `flamegraph`).
    Svg,
    /// An OTLP `ExportProfilesServiceRequest` in protobuf (`.otlp`; feature `otlp`; alpha: see
    /// [`export::otlp`](crate::export::otlp)).
    Otlp,
}

impl Format {
    /// The format a file name's extension names: `.pb.gz` or `.pprof` (pprof), `.folded`, `.svg`,
    /// `.otlp`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOption`] for any other extension, naming the ones known.
    pub fn from_path(path: &Path) -> Result<Self> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        if name.ends_with(".pb.gz") || name.ends_with(".pprof") {
            Ok(Self::Pprof)
        } else if name.ends_with(".folded") {
            Ok(Self::Folded)
        } else if name.ends_with(".svg") {
            Ok(Self::Svg)
        } else if name.ends_with(".otlp") {
            Ok(Self::Otlp)
        } else {
            Err(Error::InvalidOption(format!(
                "{}: unknown output format; the extension says which: .pb.gz or .pprof (pprof), \
                 .folded (folded stacks), .svg (flame graph), .otlp (OTLP profiles)",
                path.display()
            )))
        }
    }
}

impl Profile {
    /// Writes the profile in `format` to `w`.
    ///
    /// # Errors
    ///
    /// [`Error::Write`] when `w` fails; [`Error::InvalidOption`] for [`Format::Svg`] without the
    /// `flamegraph` feature, [`Format::Otlp`] without `otlp`.
    pub fn write(&self, format: Format, w: impl Write) -> Result<()> {
        match format {
            Format::Pprof => self.write_pprof(w),
            Format::Folded => self.write_folded(w),
            #[cfg(feature = "flamegraph")]
            Format::Svg => self.write_svg(w),
            #[cfg(not(feature = "flamegraph"))]
            Format::Svg => {
                let _ = w;
                Err(Error::InvalidOption(
                    "flame graph SVGs need perf-profile's `flamegraph` feature (inferno, CDDL-1.0)"
                        .into(),
                ))
            }
            #[cfg(feature = "otlp")]
            Format::Otlp => self.write_otlp(w),
            #[cfg(not(feature = "otlp"))]
            Format::Otlp => {
                let _ = w;
                Err(Error::InvalidOption(
                    "OTLP profiles need perf-profile's `otlp` feature".into(),
                ))
            }
        }
    }

    /// Writes the profile to the file `path` in the format its extension names
    /// ([`Format::from_path`]). The file is written under a temporary name in the same folder and
    /// renamed when complete, so `path` is never left half-written.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOption`] for an unknown extension, [`Error::Io`] when the file cannot be
    /// written.
    pub fn write_to_file(&self, path: &Path) -> Result<()> {
        let format = Format::from_path(path)?;
        let io_err = |source| Error::Io {
            path: path.to_owned(),
            source,
        };
        let tmp = temp_path(path);
        let result = (|| {
            let f = fs::File::create(&tmp).map_err(io_err)?;
            let mut w = io::BufWriter::new(f);
            self.write(format, &mut w)?;
            let f = w.into_inner().map_err(|e| io_err(e.into_error()))?;
            f.sync_all().map_err(io_err)?;
            fs::rename(&tmp, path).map_err(io_err)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }
}

/// `DIR/.NAME.tmp-PID`: beside the file, so the rename stays on one file system.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_extension() {
        assert_eq!(
            Format::from_path(Path::new("a/cpu.pb.gz")).unwrap(),
            Format::Pprof
        );
        assert_eq!(
            Format::from_path(Path::new("cpu.pprof")).unwrap(),
            Format::Pprof
        );
        assert_eq!(
            Format::from_path(Path::new("x.folded")).unwrap(),
            Format::Folded
        );
        assert_eq!(Format::from_path(Path::new("x.svg")).unwrap(), Format::Svg);
        assert_eq!(
            Format::from_path(Path::new("x.otlp")).unwrap(),
            Format::Otlp
        );
        let e = Format::from_path(Path::new("x.txt"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(".pb.gz") && e.contains("x.txt"), "{e}");
    }
}
