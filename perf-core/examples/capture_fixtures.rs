//! Captures real records from the running kernel into `perf-core/tests/fixtures/` (root needed for some).
//!
//! `cargo run -p perf-core --example capture_fixtures [OUT_DIR]`
//!
//! Each fixture is three files: `NAME.bin` (the records, copied out of the ring in order), `NAME.layout`
//! (the attr fields that decide the layout, `key=value`) and `NAME.facts` (what the capture did: pids,
//! addresses, names; the fixture tests check the parsed records against them).
//!
//! This is a test tool, not library code: it opens events with `perf_sys` and reads the ring with a
//! minimal reader of its own.
//!
//! # Safety
//! The unsafe code maps perf rings and reads them through raw pointers within the mapping, and calls a
//! few syscalls (`mmap`, `fork`, `execv`, `unshare`, `bpf`) with valid arguments.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use perf_sys::*;

#[path = "support/ring.rs"]
mod ring;
use ring::Ring;

fn attr(type_: u32, config: u64) -> perf_event_attr {
    let mut a = perf_event_attr {
        type_,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config,
        ..Default::default()
    };
    a.set_disabled(1);
    a
}

fn layout(a: &perf_event_attr) -> String {
    format!(
        "sample_type={:#x}\nread_format={:#x}\nbranch_sample_type={:#x}\nsample_regs_user={:#x}\nsample_regs_intr={:#x}\nsample_id_all={}\nbuild_id={}\n",
        a.sample_type,
        a.read_format,
        a.branch_sample_type,
        a.sample_regs_user,
        a.sample_regs_intr,
        a.sample_id_all(),
        a.build_id()
    )
}

fn save(dir: &Path, name: &str, a: &perf_event_attr, bytes: &[u8], facts: &str) -> io::Result<()> {
    fs::write(dir.join(format!("{name}.bin")), bytes)?;
    fs::write(dir.join(format!("{name}.layout")), layout(a))?;
    fs::write(dir.join(format!("{name}.facts")), facts)?;
    println!("{name}: {} bytes", bytes.len());
    Ok(())
}

fn open(a: &perf_event_attr, pid: i32, cpu: i32, group: Option<&OwnedFd>) -> io::Result<OwnedFd> {
    perf_event_open(
        a,
        pid,
        cpu,
        group.map(|g| g.as_fd()),
        PERF_FLAG_FD_CLOEXEC as u64,
    )
}

fn pid_tid() -> (u32, u32) {
    // SAFETY: getpid/gettid have no preconditions.
    unsafe { (libc::getpid() as u32, libc::gettid() as u32) }
}

/// Maps `pages` fresh anonymous pages and touches each once (one page fault per page).
fn touch_pages(pages: usize) -> (usize, usize) {
    let len = pages * 4096;
    // SAFETY: a private anonymous mapping; written within bounds, then unmapped.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        for i in 0..pages {
            std::ptr::write_volatile(p.cast::<u8>().add(i * 4096), 1);
        }
        libc::munmap(p, len);
        (p as usize, len)
    }
}

fn page_faults(dir: &Path) -> io::Result<()> {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS as u64);
    a.__bindgen_anon_1.sample_period = 1;
    a.sample_type = (PERF_SAMPLE_IDENTIFIER
        | PERF_SAMPLE_IP
        | PERF_SAMPLE_TID
        | PERF_SAMPLE_TIME
        | PERF_SAMPLE_ADDR
        | PERF_SAMPLE_ID
        | PERF_SAMPLE_STREAM_ID
        | PERF_SAMPLE_CPU
        | PERF_SAMPLE_PERIOD
        | PERF_SAMPLE_READ
        | PERF_SAMPLE_CALLCHAIN
        | PERF_SAMPLE_REGS_USER
        | PERF_SAMPLE_STACK_USER
        | PERF_SAMPLE_WEIGHT_STRUCT
        | PERF_SAMPLE_DATA_SRC
        | PERF_SAMPLE_TRANSACTION
        | PERF_SAMPLE_REGS_INTR
        | PERF_SAMPLE_PHYS_ADDR
        | PERF_SAMPLE_CGROUP
        | PERF_SAMPLE_DATA_PAGE_SIZE
        | PERF_SAMPLE_CODE_PAGE_SIZE) as u64;
    a.read_format = (PERF_FORMAT_TOTAL_TIME_ENABLED
        | PERF_FORMAT_TOTAL_TIME_RUNNING
        | PERF_FORMAT_ID
        | PERF_FORMAT_LOST) as u64;
    a.sample_regs_user = 0xff0fff;
    a.sample_regs_intr = 0xff0fff;
    a.sample_stack_user = 256;
    a.set_sample_id_all(1);
    let fd = open(&a, 0, -1, None)?;
    let id = ioctl::id(fd.as_fd())?;
    let ring = Ring::map(fd.try_clone()?, 64)?;
    ioctl::enable(fd.as_fd())?;
    let (start, len) = touch_pages(32);
    ioctl::disable(fd.as_fd())?;
    let mut out = Vec::new();
    ring.drain(&mut out);
    let (pid, tid) = pid_tid();
    let facts = format!("pid={pid}\ntid={tid}\nid={id}\nmap_start={start:#x}\nmap_len={len:#x}\npages=32\nstack_user=256\n");
    save(dir, "page_faults", &a, &out, &facts)
}

fn page_faults_group(dir: &Path) -> io::Result<()> {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS as u64);
    a.__bindgen_anon_1.sample_period = 1;
    a.sample_type =
        (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_READ)
            as u64;
    a.read_format = (PERF_FORMAT_GROUP
        | PERF_FORMAT_TOTAL_TIME_ENABLED
        | PERF_FORMAT_TOTAL_TIME_RUNNING
        | PERF_FORMAT_ID
        | PERF_FORMAT_LOST) as u64;
    a.set_exclude_kernel(1);
    let leader = open(&a, 0, -1, None)?;
    let mut s = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK as u64);
    s.set_disabled(0);
    s.read_format = a.read_format;
    s.set_exclude_kernel(1);
    let sibling = open(&s, 0, -1, Some(&leader))?;
    let (lid, sid) = (ioctl::id(leader.as_fd())?, ioctl::id(sibling.as_fd())?);
    let ring = Ring::map(leader.try_clone()?, 16)?;
    ioctl::enable(leader.as_fd())?;
    let (start, len) = touch_pages(16);
    ioctl::disable(leader.as_fd())?;
    let mut out = Vec::new();
    ring.drain(&mut out);
    let (pid, tid) = pid_tid();
    let facts = format!("pid={pid}\ntid={tid}\nleader_id={lid}\nsibling_id={sid}\nmap_start={start:#x}\nmap_len={len:#x}\npages=16\n");
    save(dir, "page_faults_group", &a, &out, &facts)
}

fn tracepoint(dir: &Path) -> io::Result<()> {
    let tp_id: u64 = fs::read_to_string("/sys/kernel/tracing/events/syscalls/sys_enter_getppid/id")
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{e}: is tracefs mounted (mount -t tracefs nodev /sys/kernel/tracing)?"),
            )
        })?
        .trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut a = attr(PERF_TYPE_TRACEPOINT, tp_id);
    a.__bindgen_anon_1.sample_period = 1;
    a.sample_type = (PERF_SAMPLE_IP
        | PERF_SAMPLE_TID
        | PERF_SAMPLE_TIME
        | PERF_SAMPLE_ID
        | PERF_SAMPLE_CPU
        | PERF_SAMPLE_PERIOD
        | PERF_SAMPLE_RAW
        | PERF_SAMPLE_CALLCHAIN) as u64;
    a.set_sample_id_all(1);
    a.set_mmap(1);
    a.set_comm(1);
    a.set_task(1);
    let fd = open(&a, 0, -1, None)?;
    let id = ioctl::id(fd.as_fd())?;
    let ring = Ring::map(fd.try_clone()?, 16)?;
    ioctl::enable(fd.as_fd())?;
    for _ in 0..10 {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::getppid() };
    }
    // MMAP (the old record): an executable mapping of a file.
    let exe = fs::File::open("/bin/true")?;
    // SAFETY: a private read+exec mapping of an open file, unmapped right away.
    let exec_map = unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_PRIVATE,
            exe.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        libc::munmap(p, 4096);
        p as usize
    };
    ioctl::disable(fd.as_fd())?;
    let mut out = Vec::new();
    ring.drain(&mut out);
    let (pid, tid) = pid_tid();
    let facts =
        format!("pid={pid}\ntid={tid}\nid={id}\ntp_id={tp_id}\ncalls=10\nexec_map={exec_map:#x}\n");
    save(dir, "tracepoint", &a, &out, &facts)
}

fn sched_switch(dir: &Path) -> io::Result<()> {
    let tp_id: u64 = fs::read_to_string("/sys/kernel/tracing/events/sched/sched_switch/id")?
        .trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut a = attr(PERF_TYPE_TRACEPOINT, tp_id);
    a.__bindgen_anon_1.sample_period = 1;
    a.sample_type = (PERF_SAMPLE_IP
        | PERF_SAMPLE_TID
        | PERF_SAMPLE_TIME
        | PERF_SAMPLE_CALLCHAIN
        | PERF_SAMPLE_RAW) as u64;
    let fd = open(&a, 0, -1, None)?;
    let ring = Ring::map(fd.try_clone()?, 16)?;
    ioctl::enable(fd.as_fd())?;
    for _ in 0..4 {
        // SAFETY: usleep has no preconditions.
        unsafe { libc::usleep(300) };
    }
    ioctl::disable(fd.as_fd())?;
    let mut out = Vec::new();
    ring.drain(&mut out);
    let (pid, tid) = pid_tid();
    save(
        dir,
        "sched_switch",
        &a,
        &out,
        &format!("pid={pid}\ntid={tid}\ntp_id={tp_id}\nsleeps=4\n"),
    )
}

/// Loads a two-instruction socket filter (`r0 = 0; exit`): the kernel emits KSYMBOL and BPF_EVENT.
fn load_bpf() -> io::Result<OwnedFd> {
    let insns: [u64; 2] = [0xb7, 0x95]; // BPF_ALU64|BPF_MOV|BPF_K r0=0 ; BPF_JMP|BPF_EXIT
    let license = b"GPL\0";
    let mut attr = [0u64; 16]; // union bpf_attr, BPF_PROG_LOAD part
    attr[0] = 1 | (2 << 32); // prog_type SOCKET_FILTER, insn_cnt 2
    attr[1] = insns.as_ptr() as u64;
    attr[2] = license.as_ptr() as u64;
    // SAFETY: BPF_PROG_LOAD (5) with a zeroed attr whose pointers are valid for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            5,
            attr.as_mut_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new fd that we own.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) })
}

fn sideband(dir: &Path) -> io::Result<()> {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY as u64);
    a.sample_type = (PERF_SAMPLE_TID
        | PERF_SAMPLE_TIME
        | PERF_SAMPLE_ID
        | PERF_SAMPLE_STREAM_ID
        | PERF_SAMPLE_CPU
        | PERF_SAMPLE_IDENTIFIER) as u64;
    a.set_sample_id_all(1);
    a.set_inherit(1);
    a.set_mmap(1);
    a.set_mmap2(1);
    a.set_build_id(1);
    a.set_mmap_data(1);
    a.set_comm(1);
    a.set_comm_exec(1);
    a.set_task(1);
    a.set_context_switch(1);
    a.set_namespaces(1);
    a.set_cgroup(1);
    a.set_ksymbol(1);
    a.set_bpf_event(1);
    // An inherited event cannot be mapped with cpu = -1: one per CPU, as perf record does.
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as i32;
    let mut rings = Vec::new();
    for cpu in 0..cpus {
        let fd = open(&a, 0, cpu, None)?;
        let ring = Ring::map(fd.try_clone()?, 64)?;
        rings.push((fd, ring));
    }
    for (fd, _) in &rings {
        ioctl::enable(fd.as_fd())?;
    }
    let (pid, tid) = pid_tid();
    let mut facts = format!("pid={pid}\ntid={tid}\n");

    // COMM: rename this thread.
    let name = c"pc-fixture";
    // SAFETY: PR_SET_NAME with a NUL-terminated string.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
    writeln!(facts, "comm=pc-fixture").ok();

    // MMAP2 (data): map a file readable, not executable.
    let data = fs::File::open("/etc/passwd")?;
    // SAFETY: a private read-only mapping of an open file, unmapped right away.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            data.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        writeln!(facts, "data_map={:#x}", p as usize).ok();
        libc::munmap(p, 4096);
    }

    // CGROUP: create (and remove) a v2 cgroup.
    let cg = format!("/sys/fs/cgroup/unified/perf-core-fixture-{pid}");
    match fs::create_dir(&cg) {
        Ok(()) => {
            writeln!(facts, "cgroup=/perf-core-fixture-{pid}").ok();
            fs::remove_dir(&cg).ok();
        }
        Err(e) => eprintln!("skipped cgroup: {e}"),
    }

    // KSYMBOL + BPF_EVENT: load a BPF program (then unload it: a second pair).
    match load_bpf() {
        Ok(prog) => {
            writeln!(facts, "bpf=1").ok();
            drop(prog);
        }
        Err(e) => eprintln!("skipped bpf: {e}"),
    }

    // FORK, NAMESPACES (unshare), SWITCH, COMM exec, MMAP2 with build id, EXIT: a child that execs /bin/true.
    let exe = c"/bin/true";
    // SAFETY: the child only calls async-signal-safe functions (unshare, usleep, execv, _exit).
    let child = unsafe { libc::fork() };
    if child == 0 {
        // SAFETY: in the child: plain syscalls, then exec or exit.
        unsafe {
            libc::unshare(libc::CLONE_NEWUTS);
            libc::usleep(1000);
            let argv = [exe.as_ptr(), std::ptr::null()];
            libc::execv(exe.as_ptr(), argv.as_ptr());
            libc::_exit(127);
        }
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(child, &mut status, 0) };
    writeln!(facts, "child={child}\nexe=/bin/true").ok();
    for _ in 0..3 {
        // SAFETY: usleep has no preconditions.
        unsafe { libc::usleep(500) };
    }
    for (fd, _) in &rings {
        ioctl::disable(fd.as_fd())?;
    }
    let mut out = Vec::new();
    for (_, ring) in &rings {
        ring.drain(&mut out);
    }
    save(dir, "sideband", &a, &out, &facts)
}

fn switch_cpu_wide(dir: &Path) -> io::Result<()> {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY as u64);
    a.sample_type = (PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU) as u64;
    a.set_sample_id_all(1);
    a.set_context_switch(1);
    let fd = open(&a, -1, 0, None)?;
    let ring = Ring::map(fd.try_clone()?, 4)?;
    // SAFETY: pins this thread to CPU 0 so it switches there.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
    }
    ioctl::enable(fd.as_fd())?;
    for _ in 0..5 {
        // SAFETY: usleep has no preconditions.
        unsafe { libc::usleep(200) };
    }
    ioctl::disable(fd.as_fd())?;
    let mut out = Vec::new();
    ring.drain(&mut out);
    // Keep the fixture small: whole records up to ~8 KiB.
    let mut end = 0;
    while end + 8 <= out.len() {
        let size = u16::from_ne_bytes([out[end + 6], out[end + 7]]) as usize;
        if size == 0 || end + size > 8192 {
            break;
        }
        end += size;
    }
    out.truncate(end);
    let (pid, tid) = pid_tid();
    save(
        dir,
        "switch_cpu_wide",
        &a,
        &out,
        &format!("pid={pid}\ntid={tid}\ncpu=0\n"),
    )
}

fn lost(dir: &Path) -> io::Result<()> {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS as u64);
    a.__bindgen_anon_1.sample_period = 1;
    a.sample_type = (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_ID) as u64;
    a.set_sample_id_all(1);
    a.set_exclude_kernel(1);
    let fd = open(&a, 0, -1, None)?;
    let id = ioctl::id(fd.as_fd())?;
    let ring = Ring::map(fd.try_clone()?, 1)?;
    ioctl::enable(fd.as_fd())?;
    touch_pages(400); // far more than one page of 32-byte samples
    let mut out = Vec::new();
    ring.drain(&mut out); // frees space: the next record is a LOST
    touch_pages(4);
    ioctl::disable(fd.as_fd())?;
    ring.drain(&mut out);
    let (pid, tid) = pid_tid();
    save(
        dir,
        "lost",
        &a,
        &out,
        &format!("pid={pid}\ntid={tid}\nid={id}\n"),
    )
}

fn main() -> io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"));
    fs::create_dir_all(&dir)?;
    page_faults(&dir)?;
    page_faults_group(&dir)?;
    tracepoint(&dir)?;
    sched_switch(&dir)?;
    sideband(&dir)?;
    switch_cpu_wide(&dir)?;
    lost(&dir)?;
    Ok(())
}
