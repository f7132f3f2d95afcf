//! The generated structs have the kernel's sizes and offsets, in every version module.

use core::mem::{offset_of, size_of};

macro_rules! check_version {
    ($name:ident, $m:ident, $attr_size:ident) => {
        #[test]
        fn $name() {
            use perf_sys::$m as k;
            assert_eq!(size_of::<k::perf_event_attr>(), k::$attr_size as usize);
            assert_eq!(size_of::<k::perf_event_header>(), 8);

            // The user page: control fields in the first 1 KiB, the ring positions from offset 1024.
            assert_eq!(offset_of!(k::perf_event_mmap_page, version), 0);
            assert_eq!(offset_of!(k::perf_event_mmap_page, lock), 8);
            assert_eq!(offset_of!(k::perf_event_mmap_page, index), 12);
            assert_eq!(offset_of!(k::perf_event_mmap_page, offset), 16);
            assert_eq!(offset_of!(k::perf_event_mmap_page, time_enabled), 24);
            assert_eq!(offset_of!(k::perf_event_mmap_page, time_running), 32);
            assert_eq!(offset_of!(k::perf_event_mmap_page, data_head), 1024);
            assert_eq!(offset_of!(k::perf_event_mmap_page, data_tail), 1032);
            assert_eq!(offset_of!(k::perf_event_mmap_page, data_offset), 1040);
            assert_eq!(offset_of!(k::perf_event_mmap_page, data_size), 1048);
            assert_eq!(offset_of!(k::perf_event_mmap_page, aux_head), 1056);
            assert_eq!(offset_of!(k::perf_event_mmap_page, aux_tail), 1064);
            assert_eq!(offset_of!(k::perf_event_mmap_page, aux_offset), 1072);
            assert_eq!(offset_of!(k::perf_event_mmap_page, aux_size), 1080);
            assert_eq!(size_of::<k::perf_event_mmap_page>(), 1088);

            // Fields every version has, at the offsets of PERF_ATTR_SIZE_VER0..VER5.
            assert_eq!(offset_of!(k::perf_event_attr, type_), 0);
            assert_eq!(offset_of!(k::perf_event_attr, size), 4);
            assert_eq!(offset_of!(k::perf_event_attr, config), 8);
            assert_eq!(offset_of!(k::perf_event_attr, sample_type), 24);
            assert_eq!(offset_of!(k::perf_event_attr, read_format), 32);
            assert_eq!(offset_of!(k::perf_event_attr, bp_type), 52);
            assert_eq!(
                offset_of!(k::perf_event_attr, branch_sample_type),
                k::PERF_ATTR_SIZE_VER1 as usize
            );
            assert_eq!(
                offset_of!(k::perf_event_attr, sample_regs_user),
                k::PERF_ATTR_SIZE_VER2 as usize
            );
            assert_eq!(
                offset_of!(k::perf_event_attr, sample_regs_intr),
                k::PERF_ATTR_SIZE_VER3 as usize
            );
            assert_eq!(
                offset_of!(k::perf_event_attr, aux_watermark),
                k::PERF_ATTR_SIZE_VER4 as usize
            );
            assert_eq!(
                offset_of!(k::perf_event_attr, aux_sample_size),
                k::PERF_ATTR_SIZE_VER5 as usize
            );
        }
    };
}

check_version!(linux_5_10, linux_5_10, PERF_ATTR_SIZE_VER6);
check_version!(linux_6_1, linux_6_1, PERF_ATTR_SIZE_VER7);
check_version!(linux_6_12, linux_6_12, PERF_ATTR_SIZE_VER8);
check_version!(linux_7_2, linux_7_2, PERF_ATTR_SIZE_VER9);

#[test]
fn versioned_fields_sit_where_the_kernel_puts_them() {
    use perf_sys::linux_7_2 as k;
    assert_eq!(
        offset_of!(k::perf_event_attr, sig_data),
        k::PERF_ATTR_SIZE_VER6 as usize
    );
    assert_eq!(
        offset_of!(k::perf_event_attr, config3),
        k::PERF_ATTR_SIZE_VER7 as usize
    );
    assert_eq!(
        offset_of!(k::perf_event_attr, config4),
        k::PERF_ATTR_SIZE_VER8 as usize
    );
}

#[test]
fn the_root_reexports_the_newest() {
    assert_eq!(
        size_of::<perf_sys::perf_event_attr>(),
        size_of::<perf_sys::newest::perf_event_attr>()
    );
    assert_eq!(perf_sys::PERF_RECORD_CALLCHAIN_DEFERRED, 22);
    assert_eq!(perf_sys::BPF_TAG_SIZE, 8);
    assert_eq!(perf_sys::HW_BREAKPOINT_RW, 3);
}

#[test]
fn bitfield_setters_land_on_the_kernel_bits() {
    let mut attr = perf_sys::perf_event_attr::default();
    attr.set_disabled(1);
    attr.set_exclude_kernel(1);
    attr.set_sample_id_all(1);
    // disabled is bit 0, exclude_kernel bit 5, sample_id_all bit 18 of the flags word at offset 40.
    // SAFETY: perf_event_attr is plain old data; reading it as bytes is sound.
    let bytes: [u8; size_of::<perf_sys::perf_event_attr>()] = unsafe { core::mem::transmute(attr) };
    let flags = u64::from_ne_bytes(bytes[40..48].try_into().unwrap());
    assert_eq!(flags, 1 | 1 << 5 | 1 << 18);
}
