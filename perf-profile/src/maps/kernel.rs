//! The kernel's symbols from `/proc/kallsyms`, and why they may be hidden.
//!
//! The file is read line by line (it is ~5 MiB) and its text symbols are kept compactly: the names
//! in one string, 16 bytes per symbol besides.

use std::fs::{self, File};
use std::io::{BufRead, BufReader};

/// A kernel text symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSymbol<'a> {
    /// Its address.
    pub addr: u64,
    /// Its name.
    pub name: &'a str,
    /// The module it belongs to (`[ext4]`), `None` for the kernel image.
    pub module: Option<&'a str>,
}

/// One symbol: its address, its name's place in [`KernelSymbols::names`], its module (0: none,
/// else an index + 1 into [`KernelSymbols::modules`]).
#[derive(Clone, Copy, Debug)]
struct Entry {
    addr: u64,
    name_at: u32,
    name_len: u16,
    module: u16,
}

/// The kernel's text symbols, sorted by address, or why there are none.
#[derive(Clone, Debug, Default)]
pub struct KernelSymbols {
    entries: Vec<Entry>,
    names: String,
    modules: Vec<String>,
    hidden: Option<String>,
    /// Lines parsed, and those with a zero address (all zero: the addresses are hidden).
    lines: usize,
    zero: usize,
}

impl KernelSymbols {
    /// Reads `/proc/kallsyms`. Where `kernel.kptr_restrict` (or the reader's lack of
    /// `CAP_SYSLOG`) hides the addresses, there are no symbols and [`hidden`](Self::hidden) says why.
    pub fn load() -> Self {
        let file = match File::open("/proc/kallsyms") {
            Ok(f) => f,
            Err(e) => return Self::unreadable(&e),
        };
        let mut k = Self::default();
        let mut r = BufReader::new(file);
        let mut line = String::new();
        loop {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => k.add_line(&line),
                Err(e) => return Self::unreadable(&e),
            }
        }
        k.finish();
        if k.hidden.is_some() {
            let restrict = fs::read_to_string("/proc/sys/kernel/kptr_restrict")
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "unreadable".into());
            k.hidden = Some(format!(
                "kernel frames are shown as one [kernel] frame: /proc/kallsyms hides the \
                 kernel's addresses (kernel.kptr_restrict = {restrict}); `sysctl \
                 kernel.kptr_restrict=0` (or profiling as root with kptr_restrict 1) names them"
            ));
        }
        k
    }

    fn unreadable(e: &std::io::Error) -> Self {
        Self {
            hidden: Some(format!(
                "kernel frames are shown as one [kernel] frame: /proc/kallsyms: {e}"
            )),
            ..Self::default()
        }
    }

    /// Parses the text of `/proc/kallsyms` (`ADDR TYPE NAME [MODULE]` lines); text symbols only.
    pub fn parse(text: &str) -> Self {
        let mut k = Self::default();
        for line in text.lines() {
            k.add_line(line);
        }
        k.finish();
        k
    }

    fn add_line(&mut self, line: &str) {
        let mut it = line.split_whitespace();
        let (Some(addr), Some(ty), Some(name)) = (it.next(), it.next(), it.next()) else {
            return;
        };
        self.lines += 1;
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            return;
        };
        if addr == 0 {
            self.zero += 1;
            return;
        }
        if !matches!(ty, "t" | "T" | "w" | "W") {
            return;
        }
        let (Ok(name_at), Ok(name_len)) =
            (u32::try_from(self.names.len()), u16::try_from(name.len()))
        else {
            return;
        };
        let module = match it
            .next()
            .map(|m| m.trim_start_matches('[').trim_end_matches(']'))
        {
            None => 0,
            // Modules' symbols come grouped: the last one is almost always the one.
            Some(m) => match self.modules.iter().rposition(|x| x == m) {
                Some(i) => i + 1,
                None => {
                    self.modules.push(m.to_owned());
                    self.modules.len()
                }
            },
        };
        let Ok(module) = u16::try_from(module) else {
            return;
        };
        self.names.push_str(name);
        self.entries.push(Entry {
            addr,
            name_at,
            name_len,
            module,
        });
    }

    fn finish(&mut self) {
        self.entries.sort_by_key(|e| e.addr);
        self.entries.shrink_to_fit();
        self.names.shrink_to_fit();
        if self.lines > 0 && self.zero == self.lines {
            self.hidden = Some("/proc/kallsyms shows zero addresses".to_owned());
        }
    }

    /// Why kernel frames cannot be named, or `None` when they can.
    pub fn hidden(&self) -> Option<&str> {
        self.hidden.as_deref()
    }

    fn symbol(&self, e: &Entry) -> KernelSymbol<'_> {
        let at = e.name_at as usize;
        KernelSymbol {
            addr: e.addr,
            name: self
                .names
                .get(at..at + usize::from(e.name_len))
                .unwrap_or_default(),
            module: usize::from(e.module)
                .checked_sub(1)
                .and_then(|i| self.modules.get(i))
                .map(String::as_str),
        }
    }

    /// The symbol `addr` falls in: the last one at or below it. `None` below the first symbol.
    pub fn find(&self, addr: u64) -> Option<KernelSymbol<'_>> {
        let i = self.entries.partition_point(|e| e.addr <= addr);
        i.checked_sub(1)
            .and_then(|i| self.entries.get(i))
            .map(|e| self.symbol(e))
    }

    /// The lowest and highest symbol address.
    pub fn range(&self) -> Option<(u64, u64)> {
        Some((self.entries.first()?.addr, self.entries.last()?.addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_are_found_by_address() {
        let k = KernelSymbols::parse(
            "ffffffff81000000 T _stext\nffffffff81000100 t do_thing\nffffffff81000200 D data\n\
             ffffffffc0000000 t ext4_fn\t[ext4]\n",
        );
        assert!(k.hidden().is_none());
        assert_eq!(k.find(0xffffffff81000150).unwrap().name, "do_thing");
        assert_eq!(
            k.find(0xffffffff81000250).unwrap().name,
            "do_thing",
            "data symbols skipped"
        );
        assert_eq!(k.find(0xffffffffc0000010).unwrap().module, Some("ext4"));
        assert_eq!(k.find(0xffffffff81000010).unwrap().module, None);
        assert_eq!(k.range(), Some((0xffffffff81000000, 0xffffffffc0000000)));
        assert!(k.find(0x1000).is_none());
    }

    #[test]
    fn zero_addresses_mean_hidden() {
        let k = KernelSymbols::parse("0000000000000000 T _stext\n0000000000000000 t do_thing\n");
        assert!(k.hidden().is_some());
        assert!(k.find(0xffffffff81000150).is_none());
    }
}
