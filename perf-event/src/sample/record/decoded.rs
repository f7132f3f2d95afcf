//! A sample's data source (`union perf_mem_data_src`) and a branch entry's type, speculation and
//! privilege, decoded from the kernel's bits into perf-event-open 0.5's types.
//!
//! Decoding loses nothing the kernel's headers define (up to Linux 7.2): [`DataSource::to_bits`]
//! gives back the kernel's value, and a branch entry's three fields have a variant for every value
//! the headers name (values they do not name read as `Unknown`). The raw words stay readable through perf-core's zero-copy parse
//! ([`RawRecord::parse`](super::RawRecord::parse): `Sample::data_src`, `BranchEntry::flags`).

use perf_sys::*;

/// Defines a struct of named flags, each one bit of a field of `perf_mem_data_src`, with its
/// decoding from and encoding to the field's value (shifted down).
macro_rules! flags {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$fmeta:meta])* $field:ident = $bit:ident $(<< $shift:literal)?, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        pub struct $name {
            $(
                $(#[$fmeta])*
                #[doc = concat!("(`", stringify!($bit), "`)")]
                pub $field: bool,
            )*
        }

        impl $name {
            const fn decode(value: u64) -> Self {
                Self { $( $field: (value & (($bit as u64) $(<< $shift)?)) != 0, )* }
            }

            const fn encode(&self) -> u64 {
                0 $( | if self.$field { ($bit as u64) $(<< $shift)? } else { 0 } )*
            }
        }
    };
}

/// Defines a fieldless enum for a numbered field, with its decoding (0 and unnamed values become
/// `$other`) and encoding (`$other` encodes as 0).
macro_rules! numbered {
    (
        $(#[$meta:meta])*
        $name:ident, other $other:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:ident, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        pub enum $name {
            $(
                $(#[$vmeta])*
                #[doc = concat!("(`", stringify!($value), "`)")]
                $variant,
            )*
            /// A value the kernel's headers do not name (kept for perf-event-open 0.5's
            /// spelling; not an ABI value).
            #[default]
            $other,
        }

        impl $name {
            #[allow(non_upper_case_globals)]
            const fn decode(value: u64) -> Self {
                $( const $variant: u64 = $value as u64; )*
                match value {
                    $( $variant => Self::$variant, )*
                    _ => Self::$other,
                }
            }

            const fn encode(self) -> u64 {
                match self {
                    $( Self::$variant => $value as u64, )*
                    Self::$other => 0,
                }
            }
        }

        // The default is what the kernel's 0 (not given) decodes to.
        const _: () = assert!(matches!($name::decode(0), $name::$other));
    };
}

const fn field(bits: u64, shift: u32, width: u32) -> u64 {
    (bits >> shift) & ((1 << width) - 1)
}

flags! {
    /// The kind of access (`mem_op`, `PERF_MEM_OP_*`).
    #[doc(alias = "mem_op")]
    MemOp {
        /// Not available.
        na = PERF_MEM_OP_NA,
        /// A load.
        load = PERF_MEM_OP_LOAD,
        /// A store.
        store = PERF_MEM_OP_STORE,
        /// A prefetch.
        prefetch = PERF_MEM_OP_PFETCH,
        /// Code execution.
        exec = PERF_MEM_OP_EXEC,
    }
}

flags! {
    /// Where in the memory hierarchy the access was served (`mem_lvl`, `PERF_MEM_LVL_*`; see
    /// [`MemLevel2`] for the numbered form newer PMUs use).
    #[doc(alias = "mem_lvl")]
    MemLevel {
        /// Not available.
        na = PERF_MEM_LVL_NA,
        /// A hit at the level(s) below.
        hit = PERF_MEM_LVL_HIT,
        /// A miss at the level(s) below.
        miss = PERF_MEM_LVL_MISS,
        /// L1.
        l1 = PERF_MEM_LVL_L1,
        /// The line fill buffer.
        lfb = PERF_MEM_LVL_LFB,
        /// L2.
        l2 = PERF_MEM_LVL_L2,
        /// L3.
        l3 = PERF_MEM_LVL_L3,
        /// Local DRAM.
        loc_ram = PERF_MEM_LVL_LOC_RAM,
        /// Remote DRAM, one hop.
        rem_ram1 = PERF_MEM_LVL_REM_RAM1,
        /// Remote DRAM, two hops.
        rem_ram2 = PERF_MEM_LVL_REM_RAM2,
        /// A remote cache, one hop.
        rem_cce1 = PERF_MEM_LVL_REM_CCE1,
        /// A remote cache, two hops.
        rem_cce2 = PERF_MEM_LVL_REM_CCE2,
        /// I/O memory.
        io = PERF_MEM_LVL_IO,
        /// Uncached memory.
        unc = PERF_MEM_LVL_UNC,
    }
}

flags! {
    /// The snoop result (`mem_snoop`, `PERF_MEM_SNOOP_*`, and `mem_snoopx`, `PERF_MEM_SNOOPX_*`).
    #[doc(alias = "mem_snoop")]
    MemSnoop {
        /// Not available.
        na = PERF_MEM_SNOOP_NA,
        /// No snoop.
        none = PERF_MEM_SNOOP_NONE,
        /// A snoop hit.
        hit = PERF_MEM_SNOOP_HIT,
        /// A snoop miss.
        miss = PERF_MEM_SNOOP_MISS,
        /// A snoop hit on a modified line.
        hit_m = PERF_MEM_SNOOP_HITM,
        /// Forwarded (`mem_snoopx`). Since Linux 4.14.
        fwd = PERF_MEM_SNOOPX_FWD << 5,
        /// Served by a peer cache (`mem_snoopx`). Since Linux 6.1.
        peer = PERF_MEM_SNOOPX_PEER << 5,
    }
}

flags! {
    /// A locked access (`mem_lock`, `PERF_MEM_LOCK_*`).
    #[doc(alias = "mem_lock")]
    MemLock {
        /// Not available.
        na = PERF_MEM_LOCK_NA,
        /// A locked transaction.
        locked = PERF_MEM_LOCK_LOCKED,
    }
}

flags! {
    /// The TLB access (`mem_dtlb`, `PERF_MEM_TLB_*`).
    #[doc(alias = "mem_dtlb")]
    MemTlb {
        /// Not available.
        na = PERF_MEM_TLB_NA,
        /// A hit.
        hit = PERF_MEM_TLB_HIT,
        /// A miss.
        miss = PERF_MEM_TLB_MISS,
        /// The L1 TLB.
        l1 = PERF_MEM_TLB_L1,
        /// The L2 TLB.
        l2 = PERF_MEM_TLB_L2,
        /// The hardware page walker.
        walker = PERF_MEM_TLB_WK,
        /// The OS fault handler.
        fault = PERF_MEM_TLB_OS,
    }
}

flags! {
    /// Why the access was blocked (`mem_blk`, `PERF_MEM_BLK_*`). Since Linux 5.12.
    #[doc(alias = "mem_blk")]
    MemBlock {
        /// Not available.
        na = PERF_MEM_BLK_NA,
        /// Data could not be forwarded.
        data = PERF_MEM_BLK_DATA,
        /// An address conflict.
        addr = PERF_MEM_BLK_ADDR,
    }
}

numbered! {
    /// The level that served the access, numbered (`mem_lvl_num`, `PERF_MEM_LVLNUM_*`). Since
    /// Linux 4.14. Value 0 (not set by the PMU) reads as [`MemLevel2::Unknown`].
    #[doc(alias = "mem_lvl_num")]
    MemLevel2, other Unknown {
        /// L1.
        L1 = PERF_MEM_LVLNUM_L1,
        /// L2.
        L2 = PERF_MEM_LVLNUM_L2,
        /// L3.
        L3 = PERF_MEM_LVLNUM_L3,
        /// L4.
        L4 = PERF_MEM_LVLNUM_L4,
        /// The L2 miss handling buffer. Since Linux 6.11.
        L2Mhb = PERF_MEM_LVLNUM_L2_MHB,
        /// A memory-side cache. Since Linux 6.11.
        Msc = PERF_MEM_LVLNUM_MSC,
        /// L0 (in the UAPI headers after Linux 6.12; not in perf-event-open 0.5, whose
        /// `Unknown` stood for it).
        L0 = PERF_MEM_LVLNUM_L0,
        /// Uncached memory. Since Linux 6.6.
        Unc = PERF_MEM_LVLNUM_UNC,
        /// CXL memory. Since Linux 6.1.
        Cxl = PERF_MEM_LVLNUM_CXL,
        /// I/O memory. Since Linux 6.1.
        Io = PERF_MEM_LVLNUM_IO,
        /// Some cache.
        AnyCache = PERF_MEM_LVLNUM_ANY_CACHE,
        /// The line fill buffer (L1 miss handling buffer).
        Lfb = PERF_MEM_LVLNUM_LFB,
        /// RAM.
        Ram = PERF_MEM_LVLNUM_RAM,
        /// Persistent memory.
        Pmem = PERF_MEM_LVLNUM_PMEM,
        /// Not available.
        Na = PERF_MEM_LVLNUM_NA,
    }
}

numbered! {
    /// How far a remote access went (`mem_hops`, `PERF_MEM_HOPS_*`). Since Linux 5.16. Value 0
    /// (not set by the PMU) reads as [`MemHop::Unknown`].
    #[doc(alias = "mem_hops")]
    MemHop, other Unknown {
        /// A remote core of the same node.
        Core = PERF_MEM_HOPS_0,
        /// A remote node of the same socket. Since Linux 5.17.
        Node = PERF_MEM_HOPS_1,
        /// A remote socket of the same board. Since Linux 5.17.
        Socket = PERF_MEM_HOPS_2,
        /// A remote board. Since Linux 5.17.
        Board = PERF_MEM_HOPS_3,
    }
}

/// Where a memory access was served (`PERF_SAMPLE_DATA_SRC`, `union perf_mem_data_src`), decoded
/// field by field. Since Linux 3.10.
///
/// [`DataSource::from_bits`] and [`DataSource::to_bits`] convert from and to the kernel's `u64`
/// (also `From`, both ways); every bit the kernel's headers define survives the round trip.
#[doc(alias = "perf_mem_data_src")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DataSource {
    /// The kind of access (`mem_op`).
    pub op: MemOp,
    /// The memory hierarchy level (`mem_lvl`).
    pub level: MemLevel,
    /// The snoop result (`mem_snoop` and `mem_snoopx`).
    pub snoop: MemSnoop,
    /// A locked access (`mem_lock`).
    pub lock: MemLock,
    /// The TLB access (`mem_dtlb`).
    pub tlb: MemTlb,
    /// The level, numbered (`mem_lvl_num`). Since Linux 4.14.
    pub level2: MemLevel2,
    /// Served by a remote node (`mem_remote`, with `level2`). Since Linux 4.14.
    pub remote: bool,
    /// Why the access was blocked (`mem_blk`). Since Linux 5.12.
    pub block: MemBlock,
    /// How far a remote access went (`mem_hops`). Since Linux 5.16.
    pub hops: MemHop,
}

impl DataSource {
    /// Decodes the kernel's `data_src` word.
    pub const fn from_bits(bits: u64) -> Self {
        Self {
            op: MemOp::decode(field(bits, PERF_MEM_OP_SHIFT, 5)),
            level: MemLevel::decode(field(bits, PERF_MEM_LVL_SHIFT, 14)),
            snoop: MemSnoop::decode(
                field(bits, PERF_MEM_SNOOP_SHIFT, 5) | field(bits, PERF_MEM_SNOOPX_SHIFT, 2) << 5,
            ),
            lock: MemLock::decode(field(bits, PERF_MEM_LOCK_SHIFT, 2)),
            tlb: MemTlb::decode(field(bits, PERF_MEM_TLB_SHIFT, 7)),
            level2: MemLevel2::decode(field(bits, PERF_MEM_LVLNUM_SHIFT, 4)),
            remote: field(bits, PERF_MEM_REMOTE_SHIFT, 1) != 0,
            block: MemBlock::decode(field(bits, PERF_MEM_BLK_SHIFT, 3)),
            hops: MemHop::decode(field(bits, PERF_MEM_HOPS_SHIFT, 3)),
        }
    }

    /// The kernel's `data_src` word for these fields.
    pub const fn to_bits(&self) -> u64 {
        let snoop = self.snoop.encode();
        (self.op.encode() << PERF_MEM_OP_SHIFT)
            | (self.level.encode() << PERF_MEM_LVL_SHIFT)
            | ((snoop & 0x1f) << PERF_MEM_SNOOP_SHIFT)
            | ((snoop >> 5) << PERF_MEM_SNOOPX_SHIFT)
            | (self.lock.encode() << PERF_MEM_LOCK_SHIFT)
            | (self.tlb.encode() << PERF_MEM_TLB_SHIFT)
            | (self.level2.encode() << PERF_MEM_LVLNUM_SHIFT)
            | ((self.remote as u64) << PERF_MEM_REMOTE_SHIFT)
            | (self.block.encode() << PERF_MEM_BLK_SHIFT)
            | (self.hops.encode() << PERF_MEM_HOPS_SHIFT)
    }
}

impl From<u64> for DataSource {
    fn from(bits: u64) -> Self {
        Self::from_bits(bits)
    }
}

impl From<DataSource> for u64 {
    fn from(source: DataSource) -> u64 {
        source.to_bits()
    }
}

// MemSnoop's value holds mem_snoop in its low five bits and mem_snoopx above them.
const _: () = assert!(PERF_MEM_SNOOP_HITM == 0x10 && PERF_MEM_SNOOPX_PEER == 2);

/// A branch's type (`perf_branch_entry.type`, `PERF_BR_*`, and `new_type`, `PERF_BR_NEW_*`, when
/// the type is `PERF_BR_EXTEND_ABI`). Since Linux 4.14; the kernel fills it in when the branch
/// filter asks for `PERF_SAMPLE_BRANCH_TYPE_SAVE`, else it reads [`BranchType::Unknown`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum BranchType {
    /// Unknown or not saved (`PERF_BR_UNKNOWN`, or a `PERF_BR_NEW_*` value the headers do not
    /// name).
    #[default]
    #[doc(alias = "PERF_BR_UNKNOWN")]
    Unknown,
    /// A conditional branch (`PERF_BR_COND`).
    #[doc(alias = "PERF_BR_COND")]
    Cond,
    /// An unconditional branch (`PERF_BR_UNCOND`).
    #[doc(alias = "PERF_BR_UNCOND")]
    Uncond,
    /// An indirect branch (`PERF_BR_IND`).
    #[doc(alias = "PERF_BR_IND")]
    Ind,
    /// A call (`PERF_BR_CALL`).
    #[doc(alias = "PERF_BR_CALL")]
    Call,
    /// An indirect call (`PERF_BR_IND_CALL`).
    #[doc(alias = "PERF_BR_IND_CALL")]
    IndCall,
    /// A return (`PERF_BR_RET`).
    #[doc(alias = "PERF_BR_RET")]
    Ret,
    /// A system call (`PERF_BR_SYSCALL`).
    #[doc(alias = "PERF_BR_SYSCALL")]
    Syscall,
    /// A system call return (`PERF_BR_SYSRET`).
    #[doc(alias = "PERF_BR_SYSRET")]
    Sysret,
    /// A conditional call (`PERF_BR_COND_CALL`).
    #[doc(alias = "PERF_BR_COND_CALL")]
    CondCall,
    /// A conditional return (`PERF_BR_COND_RET`).
    #[doc(alias = "PERF_BR_COND_RET")]
    CondRet,
    /// An exception return (`PERF_BR_ERET`). Since Linux 5.18.
    #[doc(alias = "PERF_BR_ERET")]
    Eret,
    /// An interrupt (`PERF_BR_IRQ`). Since Linux 5.18.
    #[doc(alias = "PERF_BR_IRQ")]
    Irq,
    /// A system error (`PERF_BR_SERROR`). Since Linux 6.1.
    #[doc(alias = "PERF_BR_SERROR")]
    SysErr,
    /// Not in a transaction (`PERF_BR_NO_TX`). Since Linux 6.1.
    #[doc(alias = "PERF_BR_NO_TX")]
    NoTx,
    /// A data fault (`PERF_BR_NEW_FAULT_DATA`). Since Linux 6.1.
    #[doc(alias = "PERF_BR_NEW_FAULT_DATA")]
    DataFault,
    /// An alignment fault (`PERF_BR_NEW_FAULT_ALGN`). Since Linux 6.1.
    #[doc(alias = "PERF_BR_NEW_FAULT_ALGN")]
    AlignFault,
    /// An instruction fault (`PERF_BR_NEW_FAULT_INST`). Since Linux 6.1.
    #[doc(alias = "PERF_BR_NEW_FAULT_INST")]
    InstrFault,
    /// Architecture specific (`PERF_BR_NEW_ARCH_1`). Since Linux 6.1.
    #[doc(alias = "PERF_BR_NEW_ARCH_1")]
    Arch1,
    /// Architecture specific (`PERF_BR_NEW_ARCH_2`). Since Linux 6.1.
    #[doc(alias = "PERF_BR_NEW_ARCH_2")]
    Arch2,
    /// Architecture specific (`PERF_BR_NEW_ARCH_3`). Since Linux 6.1.
    #[doc(alias = "PERF_BR_NEW_ARCH_3")]
    Arch3,
    /// Architecture specific (`PERF_BR_NEW_ARCH_4`). Since Linux 6.1.
    #[doc(alias = "PERF_BR_NEW_ARCH_4")]
    Arch4,
    /// Architecture specific (`PERF_BR_NEW_ARCH_5`). Since Linux 6.1.
    #[doc(alias = "PERF_BR_NEW_ARCH_5")]
    Arch5,
}

impl BranchType {
    /// Decodes the kernel's 4-bit `type` and, when it is `PERF_BR_EXTEND_ABI`, its 4-bit
    /// `new_type`.
    pub const fn from_bits(ty: u8, new_type: u8) -> Self {
        use BranchType::*;
        const ORDER: [BranchType; 15] = [
            Unknown, Cond, Uncond, Ind, Call, IndCall, Ret, Syscall, Sysret, CondCall, CondRet,
            Eret, Irq, SysErr, NoTx,
        ];
        const NEW: [BranchType; 8] = [
            AlignFault, DataFault, InstrFault, Arch1, Arch2, Arch3, Arch4, Arch5,
        ];
        if ty as u32 == PERF_BR_EXTEND_ABI {
            if (new_type as usize) < NEW.len() {
                NEW[new_type as usize]
            } else {
                Unknown
            }
        } else if (ty as usize) < ORDER.len() {
            ORDER[ty as usize]
        } else {
            Unknown
        }
    }
}

// The kernel's numbering the tables above follow.
const _: () = assert!(
    PERF_BR_NO_TX == 14
        && PERF_BR_EXTEND_ABI == 15
        && PERF_BR_NEW_FAULT_ALGN == 0
        && PERF_BR_NEW_FAULT_DATA == 1
        && PERF_BR_NEW_FAULT_INST == 2
        && PERF_BR_NEW_ARCH_5 == 7
);

/// Whether a branch was speculative (`perf_branch_entry.spec`, `PERF_BR_SPEC_*`). Since Linux
/// 6.1; the kernel fills it in where the hardware says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum BranchSpec {
    /// Not available (`PERF_BR_SPEC_NA`).
    #[default]
    #[doc(alias = "PERF_BR_SPEC_NA")]
    Na,
    /// Speculative, on the wrong path (`PERF_BR_SPEC_WRONG_PATH`).
    #[doc(alias = "PERF_BR_SPEC_WRONG_PATH")]
    Wrong,
    /// Speculative, on the correct path (`PERF_BR_SPEC_CORRECT_PATH`).
    #[doc(alias = "PERF_BR_SPEC_CORRECT_PATH")]
    Correct,
    /// Not speculative, on the correct path (`PERF_BR_NON_SPEC_CORRECT_PATH`).
    #[doc(alias = "PERF_BR_NON_SPEC_CORRECT_PATH")]
    NoSpecCorrect,
}

impl BranchSpec {
    /// Decodes the kernel's 2-bit `spec`.
    pub const fn from_bits(spec: u8) -> Self {
        match spec as u32 {
            PERF_BR_SPEC_WRONG_PATH => Self::Wrong,
            PERF_BR_SPEC_CORRECT_PATH => Self::Correct,
            PERF_BR_NON_SPEC_CORRECT_PATH => Self::NoSpecCorrect,
            _ => Self::Na,
        }
    }
}

/// The privilege level a branch's target ran at (`perf_branch_entry.priv`, `PERF_BR_PRIV_*`).
/// Since Linux 6.1; the kernel fills it in when the branch filter asks for
/// `PERF_SAMPLE_BRANCH_PRIV_SAVE`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum BranchPriv {
    /// Unknown or not saved (`PERF_BR_PRIV_UNKNOWN`, or a value the headers do not name).
    #[default]
    #[doc(alias = "PERF_BR_PRIV_UNKNOWN")]
    Unknown,
    /// User space (`PERF_BR_PRIV_USER`).
    #[doc(alias = "PERF_BR_PRIV_USER")]
    User,
    /// The kernel (`PERF_BR_PRIV_KERNEL`).
    #[doc(alias = "PERF_BR_PRIV_KERNEL")]
    Kernel,
    /// The hypervisor (`PERF_BR_PRIV_HV`).
    #[doc(alias = "PERF_BR_PRIV_HV")]
    Hv,
}

impl BranchPriv {
    /// Decodes the kernel's 3-bit `priv`.
    pub const fn from_bits(privilege: u8) -> Self {
        match privilege as u32 {
            PERF_BR_PRIV_USER => Self::User,
            PERF_BR_PRIV_KERNEL => Self::Kernel,
            PERF_BR_PRIV_HV => Self::Hv,
            _ => Self::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_defined_data_source_bit_round_trips() {
        // Every bit of every flag field, and every numbered value the headers name.
        let fields: [(u32, u32); 8] = [
            (PERF_MEM_OP_SHIFT, 5),
            (PERF_MEM_LVL_SHIFT, 14),
            (PERF_MEM_SNOOP_SHIFT, 5),
            (PERF_MEM_LOCK_SHIFT, 2),
            (PERF_MEM_TLB_SHIFT, 7),
            (PERF_MEM_REMOTE_SHIFT, 1),
            (PERF_MEM_SNOOPX_SHIFT, 2),
            (PERF_MEM_BLK_SHIFT, 3),
        ];
        for (shift, width) in fields {
            for bit in 0..width {
                let bits = 1u64 << (shift + bit);
                let ds = DataSource::from_bits(bits);
                assert_ne!(
                    ds,
                    DataSource::default(),
                    "bit {} decoded to nothing",
                    shift + bit
                );
                assert_eq!(ds.to_bits(), bits, "bit {}", shift + bit);
            }
        }
        for n in 1..=15u64 {
            let bits = n << PERF_MEM_LVLNUM_SHIFT;
            assert_eq!(DataSource::from_bits(bits).to_bits(), bits, "lvlnum {n}");
        }
        for n in 1..=4u64 {
            let bits = n << PERF_MEM_HOPS_SHIFT;
            assert_eq!(DataSource::from_bits(bits).to_bits(), bits, "hops {n}");
        }
        // Unnamed values read as Unknown.
        assert_eq!(
            DataSource::from_bits(5 << PERF_MEM_HOPS_SHIFT).hops,
            MemHop::Unknown
        );
        assert_eq!(DataSource::from_bits(0).level2, MemLevel2::Unknown);
        // A load that hit L1 and the L1 TLB, as an x86 PEBS record says it.
        let bits = (u64::from(PERF_MEM_OP_LOAD) << PERF_MEM_OP_SHIFT)
            | (u64::from(PERF_MEM_LVL_HIT | PERF_MEM_LVL_L1) << PERF_MEM_LVL_SHIFT)
            | (u64::from(PERF_MEM_TLB_HIT | PERF_MEM_TLB_L1) << PERF_MEM_TLB_SHIFT)
            | (u64::from(PERF_MEM_LVLNUM_L1) << PERF_MEM_LVLNUM_SHIFT)
            | (u64::from(PERF_MEM_SNOOPX_PEER) << PERF_MEM_SNOOPX_SHIFT);
        let ds = DataSource::from(bits);
        assert!(ds.op.load && !ds.op.store);
        assert!(ds.level.hit && ds.level.l1 && !ds.level.l2);
        assert!(ds.tlb.hit && ds.tlb.l1 && !ds.tlb.walker);
        assert!(ds.snoop.peer && !ds.snoop.fwd && !ds.snoop.hit);
        assert_eq!(ds.level2, MemLevel2::L1);
        assert_eq!(u64::from(ds), bits);
    }

    /// A sample with a two-entry branch stack and a data source, as the kernel lays it out,
    /// parsed into the owned record: the entry flags' bit fields land in 0.5.1's types.
    #[test]
    fn a_parsed_sample_carries_the_decoded_fields() {
        use crate::sample::record::{Parser, Record};
        use perf_core::{ParseConfig, ParseFields};
        let cfg = ParseConfig::new(ParseFields {
            sample_type: u64::from(PERF_SAMPLE_BRANCH_STACK | PERF_SAMPLE_DATA_SRC),
            branch_sample_type: u64::from(
                PERF_SAMPLE_BRANCH_ANY
                    | PERF_SAMPLE_BRANCH_TYPE_SAVE
                    | PERF_SAMPLE_BRANCH_PRIV_SAVE,
            ),
            ..ParseFields::default()
        });
        // perf_branch_entry's flags word: mispred:1 predicted:1 in_tx:1 abort:1 cycles:16
        // type:4 spec:2 new_type:4 priv:3.
        let flags = |ty: u64, spec: u64, new_type: u64, privilege: u64, cycles: u64| {
            1 | cycles << 4 | ty << 20 | spec << 24 | new_type << 26 | privilege << 30
        };
        let e1 = flags(
            u64::from(PERF_BR_CALL),
            3,
            0,
            u64::from(PERF_BR_PRIV_USER),
            7,
        );
        let e2 = flags(
            u64::from(PERF_BR_EXTEND_ABI),
            1,
            u64::from(PERF_BR_NEW_FAULT_INST),
            2,
            9,
        );
        let data_src = (u64::from(PERF_MEM_OP_STORE) << PERF_MEM_OP_SHIFT)
            | (u64::from(PERF_MEM_LVLNUM_RAM) << PERF_MEM_LVLNUM_SHIFT)
            | (1 << PERF_MEM_REMOTE_SHIFT)
            | (u64::from(PERF_MEM_HOPS_2) << PERF_MEM_HOPS_SHIFT);
        let body = [2, 0x1000, 0x2000, e1, 0x3000, 0x4000, e2, data_src];
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&PERF_RECORD_SAMPLE.to_ne_bytes());
        bytes.extend_from_slice(&(PERF_RECORD_MISC_USER as u16).to_ne_bytes());
        bytes.extend_from_slice(&(8 + 8 * body.len() as u16).to_ne_bytes());
        for w in body {
            bytes.extend_from_slice(&w.to_ne_bytes());
        }
        let (_, record) = Parser::from_config(cfg).parse_bytes(&bytes);
        let Record::Sample(s) = record else {
            panic!("not a sample: {record:?}")
        };
        let lbr = s.lbr.expect("branch stack");
        let [a, b] = &lbr.entries[..] else {
            panic!("{:?}", lbr.entries)
        };
        assert_eq!((a.from, a.to, a.mis, a.cycles), (0x1000, 0x2000, true, 7));
        assert_eq!(
            (a.branch_type, a.branch_spec, a.branch_priv),
            (BranchType::Call, BranchSpec::Correct, BranchPriv::User)
        );
        assert_eq!(
            (b.branch_type, b.branch_spec, b.branch_priv, b.cycles),
            (
                BranchType::InstrFault,
                BranchSpec::Wrong,
                BranchPriv::Kernel,
                9
            )
        );
        let d = s.data_source.expect("data source");
        assert!(d.op.store && !d.op.load && !d.op.na);
        assert_eq!(
            (d.level2, d.remote, d.hops),
            (MemLevel2::Ram, true, MemHop::Socket)
        );
        assert_eq!(d.to_bits(), data_src);
    }

    #[test]
    fn branch_fields_decode_as_the_kernel_numbers_them() {
        assert_eq!(BranchType::from_bits(0, 0), BranchType::Unknown);
        assert_eq!(
            BranchType::from_bits(PERF_BR_CALL as u8, 3),
            BranchType::Call
        );
        assert_eq!(
            BranchType::from_bits(PERF_BR_NO_TX as u8, 0),
            BranchType::NoTx
        );
        let ext = PERF_BR_EXTEND_ABI as u8;
        assert_eq!(
            BranchType::from_bits(ext, PERF_BR_NEW_FAULT_DATA as u8),
            BranchType::DataFault
        );
        assert_eq!(
            BranchType::from_bits(ext, PERF_BR_NEW_FAULT_ALGN as u8),
            BranchType::AlignFault
        );
        assert_eq!(
            BranchType::from_bits(ext, PERF_BR_NEW_ARCH_5 as u8),
            BranchType::Arch5
        );
        assert_eq!(BranchType::from_bits(ext, 8), BranchType::Unknown);
        assert_eq!(BranchType::from_bits(200, 0), BranchType::Unknown);
        assert_eq!(
            BranchSpec::from_bits(PERF_BR_SPEC_CORRECT_PATH as u8),
            BranchSpec::Correct
        );
        assert_eq!(
            BranchSpec::from_bits(PERF_BR_NON_SPEC_CORRECT_PATH as u8),
            BranchSpec::NoSpecCorrect
        );
        assert_eq!(
            BranchSpec::from_bits(PERF_BR_SPEC_WRONG_PATH as u8),
            BranchSpec::Wrong
        );
        assert_eq!(
            BranchPriv::from_bits(PERF_BR_PRIV_KERNEL as u8),
            BranchPriv::Kernel
        );
        assert_eq!(BranchPriv::from_bits(PERF_BR_PRIV_HV as u8), BranchPriv::Hv);
        assert_eq!(BranchPriv::from_bits(7), BranchPriv::Unknown);
    }
}
