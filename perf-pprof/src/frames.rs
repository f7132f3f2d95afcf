use std::borrow::Cow;
use std::fmt::{self, Debug, Display, Formatter};
use std::hash::{Hash, Hasher};
use std::os::raw::c_void;
use std::path::PathBuf;
use std::time::SystemTime;

/// A function of a frame: its name, and its file and line where the debug info gives them. A
/// frame whose code was inlined has one `Symbol` per function, innermost first.
#[derive(Debug, Clone)]
pub struct Symbol {
    /// The function's name, demangled already (pprof-rs keeps the raw name here); `None` when
    /// the frame could not be named.
    pub name: Option<Vec<u8>>,
    /// The frame's address in this process.
    pub addr: Option<*mut c_void>,
    /// The line, with debug info.
    pub lineno: Option<u32>,
    /// The source file, with debug info.
    pub filename: Option<PathBuf>,
}

impl Symbol {
    /// The name's bytes, `Unknown` when there is none.
    pub fn raw_name(&self) -> &[u8] {
        self.name.as_deref().unwrap_or(b"Unknown")
    }

    /// The (demangled) name.
    pub fn name(&self) -> String {
        String::from_utf8_lossy(self.raw_name()).into_owned()
    }

    /// The name as stored (demangled already here).
    pub fn sys_name(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(self.raw_name())
    }

    /// The source file, `Unknown` when there is none.
    pub fn filename(&self) -> Cow<'_, str> {
        self.filename
            .as_ref()
            .map(|name| name.as_os_str().to_string_lossy())
            .unwrap_or(Cow::Borrowed("Unknown"))
    }

    /// The line, 0 when there is none.
    pub fn lineno(&self) -> u32 {
        self.lineno.unwrap_or(0)
    }
}

impl Display for Symbol {
    fn fmt(&self, f: &mut Formatter) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Symbols are equal when their names are, as in pprof-rs.
impl PartialEq for Symbol {
    fn eq(&self, other: &Self) -> bool {
        self.raw_name() == other.raw_name()
    }
}

impl Hash for Symbol {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.raw_name().hash(state)
    }
}

/// A sampled stack as a report's key: its frames, leaf first, each with its functions (innermost
/// inlined first), and the thread that ran it: `thread_name` is the thread's name and `thread_id`
/// its kernel thread id (`gettid()`; pprof-rs: `pthread_self()`).
#[derive(Clone, PartialEq, Hash)]
pub struct Frames {
    /// The frames, leaf first.
    pub frames: Vec<Vec<Symbol>>,
    /// The thread's name (as `std::thread::Builder::name` or `pthread_setname_np` set it, at most 15
    /// bytes).
    pub thread_name: String,
    /// The thread's id: the kernel's thread id (pprof-rs: `pthread_self()`).
    pub thread_id: u64,
    /// When the stack was sampled (here: when the report was built).
    pub sample_timestamp: SystemTime,
}

impl Frames {
    /// The thread's name, or its id when it has none.
    pub fn thread_name_or_id(&self) -> String {
        if !self.thread_name.is_empty() {
            self.thread_name.clone()
        } else {
            format!("{:?}", self.thread_id)
        }
    }
}

impl Eq for Frames {}

/// `FRAME: f -> FRAME: g -> THREAD: name`, as pprof-rs prints it.
impl Debug for Frames {
    fn fmt(&self, f: &mut Formatter) -> fmt::Result {
        for frame in &self.frames {
            write!(f, "FRAME: ")?;
            for symbol in frame {
                write!(f, "{symbol} -> ")?;
            }
        }
        write!(f, "THREAD: ")?;
        if !self.thread_name.is_empty() {
            write!(f, "{}", self.thread_name)
        } else {
            write!(f, "ThreadId({})", self.thread_id)
        }
    }
}
