//! The shared libraries an ELF shared object names as `DT_NEEDED`: what the dynamic loader must
//! find before the object loads at all. kiln asks one question of it: does the object link the
//! NVIDIA driver's own library (`libcuda.so.1`)? Such an extension cannot even be imported on a
//! machine without the driver (the loader fails with "libcuda.so.1: cannot open shared object
//! file"), so its import proof cannot run there; libraries that `dlopen` the driver when first
//! used (torch, cuda-python) do not name it and load anywhere.
//!
//! It deliberately reads only the dynamic section (with the `object` crate): no symbol
//! versions, no `RPATH`, and it never loads anything.

use object::Endianness;
use object::elf::{DT_NEEDED, FileHeader32, FileHeader64};
use object::read::elf::FileHeader;

/// The NVIDIA driver's user-mode library, as extensions link it (`-lcuda`).
pub const DRIVER_LIBRARY: &str = "libcuda.so.1";

/// The `DT_NEEDED` entries of the ELF object `data`; empty when it is not ELF or has none.
pub fn needed<'a, R: object::ReadRef<'a>>(data: R) -> Vec<String> {
    match data.read_bytes_at(4, 1) {
        Ok([2]) => of::<FileHeader64<Endianness>, R>(data),
        Ok([1]) => of::<FileHeader32<Endianness>, R>(data),
        _ => Vec::new(),
    }
}

/// Whether the object links the NVIDIA driver's library.
pub fn links_driver<'a, R: object::ReadRef<'a>>(data: R) -> bool {
    needed(data).iter().any(|n| n == DRIVER_LIBRARY || n == "libcuda.so")
}

fn of<'a, Elf: FileHeader<Endian = Endianness>, R: object::ReadRef<'a>>(data: R) -> Vec<String> {
    let Ok(header) = Elf::parse(data) else {
        return Vec::new();
    };
    let Ok(endian) = header.endian() else {
        return Vec::new();
    };
    let Ok(sections) = header.sections(endian, data) else {
        return Vec::new();
    };
    let Ok(table) = sections.dynamic_table(endian, data) else {
        return Vec::new();
    };
    table
        .iter()
        .filter(|d| d.tag == DT_NEEDED)
        .filter_map(|d| table.string(d).ok())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loaders_own_needs_are_read_and_the_driver_library_is_told_apart() {
        // The test binary itself: a real ELF that needs libc and not the NVIDIA driver.
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let libs = needed(&exe[..]);
        assert!(libs.iter().any(|l| l.starts_with("libc.so")), "{libs:?}");
        assert!(!links_driver(&exe[..]));
        assert!(needed(&b"not an ELF object"[..]).is_empty());
        assert!(needed(&b"\x7fELF\x02\x01\x01"[..]).is_empty());
    }
}
