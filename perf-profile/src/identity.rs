//! Who ran: the names of the processes and threads samples are taken in, kept from the side-band
//! records (COMM, FORK, EXIT) as they arrive, and read from `/proc` only for a thread seen before
//! any record named it.
//!
//! `/proc/PID/task/TID/comm` and `/proc/PID/cgroup` are the kernel's text, not files a process
//! places (the untrusted-file door is for those): each is read at most once per thread or process,
//! a bounded number of bytes, and a `/proc` read never blocks. What is kept is bounded too: the
//! table forgets exited threads, and past 65536 threads it starts afresh.

use foldhash::HashMap;
use std::io::Read;
use std::sync::Arc;

use crate::aggregate::{Identity, IdentityId, Stacks};

/// Threads remembered at most (a system with more live threads re-reads their names).
const MAX_THREADS: usize = 1 << 16;

/// `comm` is at most 16 bytes; a little slack for the newline.
const COMM_BYTES: u64 = 64;

/// `/proc/PID/cgroup` read at most (cgroup v1 lists a line per hierarchy).
const CGROUP_BYTES: u64 = 16 * 1024;

#[derive(Debug)]
struct Process {
    comm: Arc<str>,
    container: Option<Arc<str>>,
}

/// The names of the threads and processes seen.
#[derive(Debug, Default)]
pub(crate) struct Names {
    threads: HashMap<u32, Arc<str>>,
    processes: HashMap<u32, Process>,
    /// By thread: its process and its identity as interned in the table numbered
    /// `interned_in` ([`Stacks::epoch`]), so that a thread's every sample is not an identity
    /// built, hashed whole and dropped. Whatever renames a thread or a process forgets them.
    interned: HashMap<u32, (u32, IdentityId)>,
    interned_in: u64,
}

fn read_small(path: &str, max: u64) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(max)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

fn name(bytes: &[u8]) -> Arc<str> {
    Arc::from(String::from_utf8_lossy(bytes).trim_end_matches('\n'))
}

impl Names {
    fn bound(&mut self) {
        if self.threads.len() >= MAX_THREADS {
            self.threads.clear();
            self.interned.clear();
        }
        if self.processes.len() >= MAX_THREADS {
            self.processes.clear();
            self.interned.clear();
        }
    }

    /// Who thread `tid` of process `pid` is, interned in `stacks`.
    pub(crate) fn interned(&mut self, pid: u32, tid: u32, stacks: &mut Stacks) -> IdentityId {
        if self.interned_in != stacks.epoch() {
            self.interned.clear();
            self.interned_in = stacks.epoch();
        }
        if let Some(&(p, id)) = self.interned.get(&tid) {
            if p == pid {
                return id;
            }
        }
        let id = stacks.intern_identity(&self.identity(pid, tid));
        if self.interned.len() >= MAX_THREADS {
            self.interned.clear();
        }
        self.interned.insert(tid, (pid, id));
        id
    }

    /// A COMM record: thread `tid` of `pid` is now named `comm` (by exec: so is its process, whose
    /// other threads are gone).
    pub(crate) fn comm(&mut self, pid: u32, tid: u32, comm: &[u8], by_execve: bool) {
        self.bound();
        // A process renamed is every one of its threads renamed.
        self.interned.clear();
        let comm = name(comm);
        if tid == pid || by_execve {
            match self.processes.get_mut(&pid) {
                Some(p) => p.comm = comm.clone(),
                None => {
                    let container = container_of(pid);
                    self.processes.insert(
                        pid,
                        Process {
                            comm: comm.clone(),
                            container,
                        },
                    );
                }
            }
        }
        self.threads.insert(tid, comm);
    }

    /// A FORK record: `tid` of `pid` was cloned from `parent_tid` of `parent_pid` and has its name
    /// (and a new process its container) until a COMM record says otherwise.
    pub(crate) fn fork(&mut self, parent_pid: u32, parent_tid: u32, pid: u32, tid: u32) {
        self.bound();
        self.interned.remove(&tid);
        let Some(parent) = self.threads.get(&parent_tid).cloned() else {
            return;
        };
        if pid != parent_pid {
            // A new process: whatever was interned under its pid was another's.
            self.interned.retain(|_, (p, _)| *p != pid);
            let container = self
                .processes
                .get(&parent_pid)
                .and_then(|p| p.container.clone());
            self.processes.insert(
                pid,
                Process {
                    comm: parent.clone(),
                    container,
                },
            );
        }
        self.threads.insert(tid, parent);
    }

    /// An EXIT record.
    pub(crate) fn exit(&mut self, pid: u32, tid: u32) {
        self.threads.remove(&tid);
        self.interned.remove(&tid);
        if pid == tid {
            self.processes.remove(&pid);
            // Its other threads' identities are read again, as they were before.
            self.interned.retain(|_, (p, _)| *p != pid);
        }
    }

    /// Who thread `tid` of process `pid` is.
    pub(crate) fn identity(&mut self, pid: u32, tid: u32) -> Identity {
        self.bound();
        if pid == 0 {
            // The idle task of each CPU, as perf names it.
            return Identity::new(0, tid, "swapper", "swapper");
        }
        let process = match self.processes.get(&pid) {
            Some(p) => p,
            None => {
                let comm = read_small(&format!("/proc/{pid}/comm"), COMM_BYTES)
                    .map_or_else(|| Arc::from(""), |c| name(c.as_bytes()));
                let container = container_of(pid);
                self.processes
                    .entry(pid)
                    .or_insert(Process { comm, container })
            }
        };
        let (comm, container) = (process.comm.clone(), process.container.clone());
        let thread_name = match self.threads.get(&tid) {
            Some(t) => t.clone(),
            // The main thread's name is its process's.
            None if tid == pid => {
                self.threads.insert(tid, comm.clone());
                comm.clone()
            }
            None => {
                let t = read_small(&format!("/proc/{pid}/task/{tid}/comm"), COMM_BYTES)
                    .map_or_else(|| comm.clone(), |c| name(c.as_bytes()));
                self.threads.insert(tid, t.clone());
                t
            }
        };
        Identity {
            pid,
            tid,
            comm,
            thread_name,
            container_id: container,
        }
    }
}

fn container_of(pid: u32) -> Option<Arc<str>> {
    let text = read_small(&format!("/proc/{pid}/cgroup"), CGROUP_BYTES)?;
    container_id(&text).map(Arc::from)
}

/// The container id in a `/proc/PID/cgroup` text: the 64 hex digits of a docker
/// (`/docker/ID`, `docker-ID.scope`), containerd (`cri-containerd-ID.scope`), cri-o
/// (`crio-ID.scope`) or podman (`libpod-ID.scope`) cgroup; `None` on the host.
pub fn container_id(cgroup: &str) -> Option<&str> {
    for line in cgroup.lines() {
        // `hierarchy:controllers:path`; the path may hold ':'.
        let Some(path) = line.splitn(3, ':').nth(2) else {
            continue;
        };
        for part in path.rsplit('/') {
            let part = part.strip_suffix(".scope").unwrap_or(part);
            let id = part.rsplit(['-', ':']).next().unwrap_or(part);
            if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Some(id);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f4e9a1c0b2d4e6f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f";

    #[test]
    fn container_ids_of_the_usual_runtimes_and_none_on_the_host() {
        for text in [
            format!("0::/system.slice/docker-{ID}.scope\n"),
            format!("12:memory:/docker/{ID}\n11:cpu:/docker/{ID}\n"),
            format!("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-{ID}.scope\n"),
            format!("0::/kubepods/burstable/pod1/crio-{ID}.scope\n"),
            format!("0::/machine.slice/libpod-{ID}.scope/container\n"),
            format!("0::/kubepods/besteffort/pod1/{ID}\n"),
        ] {
            assert_eq!(container_id(&text), Some(ID), "{text}");
        }
        for text in [
            "0::/user.slice/user-0.slice/session-1.scope\n",
            "0::/\n",
            "0::/docker/abc\n",
            "",
            "garbage",
        ] {
            assert_eq!(container_id(text), None, "{text}");
        }
    }

    #[test]
    fn names_follow_comm_and_fork_records_and_proc_fills_in_a_thread_seen_first() {
        let mut n = Names::default();
        n.comm(100, 100, b"app", true);
        n.fork(100, 100, 100, 101);
        n.comm(100, 101, b"worker", false);
        n.fork(100, 100, 102, 102);
        let who = |n: &mut Names, pid, tid| {
            let i = n.identity(pid, tid);
            (i.comm.to_string(), i.thread_name.to_string())
        };
        assert_eq!(who(&mut n, 100, 100), ("app".into(), "app".into()));
        assert_eq!(who(&mut n, 100, 101), ("app".into(), "worker".into()));
        assert_eq!(who(&mut n, 102, 102), ("app".into(), "app".into()));
        n.comm(102, 102, b"child", true);
        assert_eq!(who(&mut n, 102, 102), ("child".into(), "child".into()));
        // This process, before any record: from /proc.
        let me = std::process::id();
        let comm = std::fs::read_to_string(format!("/proc/{me}/comm")).unwrap();
        assert_eq!(n.identity(me, me).comm.as_ref(), comm.trim_end());
        assert_eq!(who(&mut n, 0, 0).0, "swapper");
    }

    /// Records and samples interleaved at random: the identity a thread's sample is interned as
    /// is always the one [`Names::identity`] builds after the same records, in every table.
    #[test]
    fn interned_identities_follow_every_record_and_every_table() {
        let (mut cached, mut fresh) = (Names::default(), Names::default());
        let mut stacks = Stacks::new();
        let mut x = 7u64;
        let mut next = |n: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        // Processes that do not exist (above any pid_max): nothing read from /proc names them.
        let pid = |i: u64| 5_000_000 + (i as u32 % 3) * 10;
        let names = [b"a".as_slice(), b"bb", b"ccc", b"dddd"];
        let mut checked = 0;
        for _ in 0..20_000 {
            let p = pid(next(3));
            let t = p + next(3) as u32;
            match next(12) {
                0 => {
                    let (name, exec) = (names[next(4) as usize], next(2) == 0);
                    cached.comm(p, t, name, exec);
                    fresh.comm(p, t, name, exec);
                }
                1 => {
                    let (parent, child) = (pid(next(3)), p + next(3) as u32);
                    cached.fork(parent, parent, p, child);
                    fresh.fork(parent, parent, p, child);
                }
                2 => {
                    cached.exit(p, t);
                    fresh.exit(p, t);
                }
                3 if next(20) == 0 => stacks = Stacks::new(),
                _ => {
                    let id = cached.interned(p, t, &mut stacks);
                    assert_eq!(stacks.identity(id), Some(&fresh.identity(p, t)));
                    checked += 1;
                }
            }
        }
        assert!(checked > 10_000);
    }
}
