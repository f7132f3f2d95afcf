//! The kernel's symbols from `/proc/kallsyms`, and why they may be hidden.

use std::fs;

/// A kernel text symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSymbol {
    /// Its address.
    pub addr: u64,
    /// Its name.
    pub name: String,
    /// The module it belongs to (`[ext4]`), `None` for the kernel image.
    pub module: Option<String>,
}

/// The kernel's text symbols, sorted by address, or why there are none.
#[derive(Clone, Debug, Default)]
pub struct KernelSymbols {
    symbols: Vec<KernelSymbol>,
    hidden: Option<String>,
}

impl KernelSymbols {
    /// Reads `/proc/kallsyms`. Where `kernel.kptr_restrict` (or the reader's lack of
    /// `CAP_SYSLOG`) hides the addresses, there are no symbols and [`hidden`](Self::hidden) says why.
    pub fn load() -> Self {
        match fs::read_to_string("/proc/kallsyms") {
            Ok(text) => {
                let mut k = Self::parse(&text);
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
            Err(e) => Self {
                symbols: Vec::new(),
                hidden: Some(format!(
                    "kernel frames are shown as one [kernel] frame: /proc/kallsyms: {e}"
                )),
            },
        }
    }

    /// Parses the text of `/proc/kallsyms` (`ADDR TYPE NAME [MODULE]` lines); text symbols only.
    pub fn parse(text: &str) -> Self {
        let mut symbols = Vec::new();
        let mut zero = 0usize;
        let mut lines = 0usize;
        for line in text.lines() {
            let mut it = line.split_whitespace();
            let (Some(addr), Some(ty), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            lines += 1;
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                zero += 1;
                continue;
            }
            if !matches!(ty, "t" | "T" | "w" | "W") {
                continue;
            }
            let module = it
                .next()
                .map(|m| m.trim_start_matches('[').trim_end_matches(']').to_owned());
            symbols.push(KernelSymbol {
                addr,
                name: name.to_owned(),
                module,
            });
        }
        symbols.sort_by_key(|s| s.addr);
        let hidden =
            (lines > 0 && zero == lines).then(|| "/proc/kallsyms shows zero addresses".to_owned());
        Self { symbols, hidden }
    }

    /// Why kernel frames cannot be named, or `None` when they can.
    pub fn hidden(&self) -> Option<&str> {
        self.hidden.as_deref()
    }

    /// The symbol `addr` falls in: the last one at or below it. `None` below the first symbol.
    pub fn find(&self, addr: u64) -> Option<&KernelSymbol> {
        let i = self.symbols.partition_point(|s| s.addr <= addr);
        i.checked_sub(1).and_then(|i| self.symbols.get(i))
    }

    /// The lowest and highest symbol address.
    pub fn range(&self) -> Option<(u64, u64)> {
        Some((self.symbols.first()?.addr, self.symbols.last()?.addr))
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
        assert_eq!(
            k.find(0xffffffffc0000010).unwrap().module.as_deref(),
            Some("ext4")
        );
        assert!(k.find(0x1000).is_none());
    }

    #[test]
    fn zero_addresses_mean_hidden() {
        let k = KernelSymbols::parse("0000000000000000 T _stext\n0000000000000000 t do_thing\n");
        assert!(k.hidden().is_some());
        assert!(k.find(0xffffffff81000150).is_none());
    }
}
