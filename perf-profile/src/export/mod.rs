//! Export: a [`Profile`] as pprof (`profile.proto`, gzip), folded stacks, OTLP profiles (feature
//! `otlp`, alpha) or a flame graph SVG (feature `flamegraph`). Every exporter reads the same stack table and symbols.

#[cfg(test)]
mod baseline;
#[cfg(test)]
mod bench;
mod dictionary;
pub(crate) mod folded;
#[cfg(feature = "otlp")]
pub mod otlp;
pub(crate) mod pprof;
#[cfg(feature = "flamegraph")]
pub(crate) mod svg;

use std::fs;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub use folded::FoldedRoots;

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
    /// The folder may be shared with other users (`/tmp`): the temporary file is created new
    /// (`O_CREAT|O_EXCL|O_NOFOLLOW`) under an unpredictable name, so a link planted there is never
    /// followed, and `path` is replaced by the rename, never opened (a link at `path` is replaced,
    /// not followed).
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
        let (f, tmp) = create_beside(path).map_err(io_err)?;
        let result = (|| {
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

/// Checks that a file can be created beside `path` (in its folder) the way
/// [`Profile::write_to_file`] creates one, by creating one and removing it: to refuse an
/// unwritable output before a capture rather than after it.
///
/// # Errors
///
/// [`Error::Io`] naming `path` when its folder does not take a new file.
pub fn check_writable(path: &Path) -> Result<()> {
    let (f, tmp) = create_beside(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    drop(f);
    let _ = fs::remove_file(&tmp);
    Ok(())
}

/// A new file beside `path`, `DIR/.NAME.tmp-RANDOM` (the rename stays on one file system), created
/// with `O_CREAT|O_EXCL|O_NOFOLLOW`: nothing that exists under its name, a link planted in a shared
/// folder included, is opened. The name is unpredictable (64 random bits), and a taken one is
/// skipped.
fn create_beside(path: &Path) -> io::Result<(fs::File, PathBuf)> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let mut last = None;
    for _ in 0..16 {
        let tmp = path.with_file_name(format!(".{name}.tmp-{:016x}", unpredictable()));
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(f) => return Ok((f, tmp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists)))
}

/// 64 bits no other process can predict: std's `RandomState` is keyed from the OS's random source
/// once per thread, and each call takes new keys.
fn unpredictable() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
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
