//! NVIDIA's driver facts: which CUDA version a driver supports at most, and which GPU archs it
//! can drive at all, from the driver's version alone.
//!
//! The rows are NVIDIA's table "CUDA Toolkit and Corresponding Driver Versions" (the Linux
//! x86_64 "Toolkit Driver Version" of each release's first driver), in the CUDA Toolkit release
//! notes, section "CUDA Driver":
//! <https://docs.nvidia.com/cuda/archive/13.0.1/cuda-toolkit-release-notes/index.html> (rows
//! 11.0 to 13.0) and <https://docs.nvidia.com/cuda/archive/13.1.0/cuda-toolkit-release-notes/index.html>
//! (13.1). A driver supports the CUDA of the newest row whose driver it is at least; it supports
//! less than the next row's CUDA (R565 says `CUDA Version: 12.7`, between 12.6's 560.28.03 and
//! 12.8's 570.26), which is what an override of the driver's CUDA is checked against.
//!
//! A GPU arch can be driven only by a driver of the CUDA release that first supports it:
//! "Running any NVIDIA CUDA workload on NVIDIA Blackwell requires a compatible driver (R570 or
//! higher)" and "CUDA 12.8 is the first CUDA version that natively supports Blackwell (compute
//! capabilities 10.0 and 12.0)" (NVIDIA, Software Migration Guide for NVIDIA Blackwell RTX GPUs,
//! <https://forums.developer.nvidia.com/t/software-migration-guide-for-nvidia-blackwell-rtx-gpus-a-guide-to-cuda-12-8-pytorch-tensorrt-and-llama-cpp/321330>);
//! `sm_103` and `sm_121` first appear in CUDA 12.9 (its release notes,
//! <https://docs.nvidia.com/cuda/archive/12.9.0/cuda-toolkit-release-notes/index.html>, and 12.8's
//! ptxas rejects them), `sm_110` in 13.0 (`sm_101` renamed), Hopper and Ada in 11.8
//! (<https://docs.nvidia.com/cuda/archive/11.8.0/cuda-toolkit-release-notes/index.html>),
//! `sm_86` in 11.1 and `sm_80` in 11.0.
//!
//! It deliberately ignores the archs a newer branch stops driving (R580 is the last for
//! Maxwell, Pascal and Volta: kiln targets none of them), drivers older than the table (CUDA
//! 10.x and before) and archs it has no row for: of those it says nothing.

use serde::Serialize;

use crate::arch::Arch;
use crate::probe::machine::{MachineFacts, Sourced};

/// One row of NVIDIA's table: the first driver of a CUDA release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The CUDA release, `(12, 8)`.
    pub cuda: (u64, u64),
    /// Its minimum Linux driver, `570.26`.
    pub driver: &'static str,
}

impl Row {
    /// `12.8`.
    pub fn cuda_shown(&self) -> String {
        format!("{}.{}", self.cuda.0, self.cuda.1)
    }

    /// The driver's branch, `R570`.
    pub fn branch(&self) -> String {
        format!("R{}", self.driver.split('.').next().unwrap_or(self.driver))
    }

    fn min(&self) -> semver::Version {
        lenient(self.driver).unwrap_or_else(|| semver::Version::new(0, 0, 0))
    }
}

/// Where the rows come from, for evidence.
pub const TABLE_SOURCE: &str = "NVIDIA's CUDA Toolkit release notes, \"CUDA Toolkit and Corresponding Driver \
     Versions\", https://docs.nvidia.com/cuda/archive/13.0.1/cuda-toolkit-release-notes/index.html";

/// NVIDIA's rows, oldest first.
pub const TABLE: &[Row] = &[
    row(11, 0, "450.36.06"),
    row(11, 1, "455.23"),
    row(11, 2, "460.27.03"),
    row(11, 3, "465.19.01"),
    row(11, 4, "470.42.01"),
    row(11, 5, "495.29.05"),
    row(11, 6, "510.39.01"),
    row(11, 7, "515.43.04"),
    row(11, 8, "520.61.05"),
    row(12, 0, "525.60.13"),
    row(12, 1, "530.30.02"),
    row(12, 2, "535.54.03"),
    row(12, 3, "545.23.06"),
    row(12, 4, "550.54.14"),
    row(12, 5, "555.42.02"),
    row(12, 6, "560.28.03"),
    row(12, 8, "570.26"),
    row(12, 9, "575.51.03"),
    row(13, 0, "580.65.06"),
    row(13, 1, "590.44.01"),
];

const fn row(major: u64, minor: u64, driver: &'static str) -> Row {
    Row {
        cuda: (major, minor),
        driver,
    }
}

/// A GPU arch, the first CUDA release that supports it, and the source.
type ArchRow = ((u32, u32), (u64, u64), &'static str);

/// The first CUDA release that supports each GPU arch, and its source.
const ARCH_CUDA: &[ArchRow] = &[
    ((8, 0), (11, 0), "CUDA 11.0 release notes: sm_80 (Ampere)"),
    ((8, 6), (11, 1), "CUDA 11.1 release notes: sm_86"),
    ((8, 9), (11, 8), "CUDA 11.8 release notes: sm_89 (Ada)"),
    ((9, 0), (11, 8), "CUDA 11.8 release notes: sm_90 (Hopper)"),
    (
        (10, 0),
        (12, 8),
        "NVIDIA's Blackwell migration guide: R570 or higher, CUDA 12.8 first supports 10.0 and 12.0",
    ),
    (
        (12, 0),
        (12, 8),
        "NVIDIA's Blackwell migration guide: R570 or higher, CUDA 12.8 first supports 10.0 and 12.0",
    ),
    ((10, 3), (12, 9), "CUDA 12.9 release notes: sm_103"),
    ((12, 1), (12, 9), "CUDA 12.9 release notes: sm_121"),
    ((11, 0), (13, 0), "CUDA 13.0 release notes: sm_110 (sm_101 renamed)"),
];

/// What the table says of a driver version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Older than every row (CUDA 10.x and before): the table says nothing.
    Older,
    /// Its row, and the next one (`None` for the newest row: the driver may be newer than
    /// every row, and then supports at least this CUDA).
    Row { row: Row, next: Option<Row> },
}

/// The table's answer for driver `version` (`570.124.06`).
pub fn lookup(version: &semver::Version) -> Lookup {
    let Some(i) = TABLE.iter().rposition(|r| r.min() <= *version) else {
        return Lookup::Older;
    };
    Lookup::Row {
        row: TABLE[i],
        next: TABLE.get(i + 1).copied(),
    }
}

/// The CUDA version driver `version` supports, from the table: `None` when the driver is older
/// than the table, or newer than its newest row (it may support a newer CUDA than kiln knows).
pub fn cuda_of(version: &semver::Version) -> Option<Row> {
    match lookup(version) {
        Lookup::Row { row, next: Some(_) } => Some(row),
        _ => None,
    }
}

/// What a GPU arch needs of the driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArchNeeds {
    pub arch: Arch,
    /// The first CUDA release and driver that support it.
    pub row: Row,
    pub source: &'static str,
}

/// What `arch` needs of the driver; `None` for an arch the table has no row for.
pub fn needs(arch: Arch) -> Option<ArchNeeds> {
    let (_, cuda, source) = ARCH_CUDA.iter().find(|(a, ..)| *a == (arch.major, arch.minor))?;
    let row = *TABLE.iter().find(|r| r.cuda == *cuda)?;
    Some(ArchNeeds { arch, row, source })
}

/// `Err(needs)` when driver `version` cannot drive a GPU of `arch`.
pub fn drives(version: &semver::Version, arch: Arch) -> Result<(), ArchNeeds> {
    match needs(arch) {
        Some(n) if *version < n.row.min() => Err(n),
        _ => Ok(()),
    }
}

/// Why a driver version and the CUDA version said for it cannot both be true.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Impossible {
    pub driver: String,
    pub driver_source: String,
    pub cuda: String,
    pub cuda_source: String,
    /// The table's row for the driver, and the next one.
    pub row: Row,
    pub next: Option<Row>,
}

/// Checks that `cuda` can be the CUDA version of driver `version`: at least its row's, below
/// the next row's.
pub fn consistent(version: &semver::Version, cuda: &semver::Version) -> Result<(), (Row, Option<Row>)> {
    let Lookup::Row { row, next } = lookup(version) else {
        return Ok(());
    };
    let c = (cuda.major, cuda.minor);
    let below_next = next.is_none_or(|n| c < n.cuda);
    if c >= row.cuda && below_next {
        Ok(())
    } else {
        Err((row, next))
    }
}

impl std::fmt::Display for Impossible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (row, d) = (&self.row, &self.driver);
        write!(
            f,
            "{}={d} and {}={} cannot both hold: NVIDIA's table gives driver {d} ({}, from {}) CUDA {}",
            self.driver_source,
            self.cuda_source,
            self.cuda,
            row.branch(),
            row.driver,
            row.cuda_shown()
        )?;
        if let Some(n) = &self.next {
            write!(f, ", and CUDA {} needs driver {} or newer", n.cuda_shown(), n.driver)?;
        }
        write!(
            f,
            " ({TABLE_SOURCE}); correct one of them, or leave {} unset: kiln reads the CUDA version from the driver's",
            self.cuda_source
        )
    }
}

/// Completes the machine's driver facts from the table: the CUDA version of a driver whose
/// version alone is known, sourced to the table; and checks a CUDA version an override gave
/// (`KILN_DRIVER_VERSION`, `KILN_DRIVER_CUDA`) against the driver's row. What nvidia-smi said of
/// both is taken as it is.
pub fn complete(m: &mut MachineFacts) -> Result<(), Box<Impossible>> {
    let Some(driver) = &m.driver else { return Ok(()) };
    let Some(version) = lenient(&driver.value) else {
        return Ok(());
    };
    match &m.driver_cuda {
        Some(cuda) if driver.source.starts_with("KILN_") || cuda.source.starts_with("KILN_") => {
            consistent(&version, &cuda.value).map_err(|(row, next)| {
                Box::new(Impossible {
                    driver: driver.value.clone(),
                    driver_source: driver.source.clone(),
                    cuda: format!("{}.{}", cuda.value.major, cuda.value.minor),
                    cuda_source: cuda.source.clone(),
                    row,
                    next,
                })
            })
        }
        Some(_) => Ok(()),
        None => {
            if let Some(row) = cuda_of(&version) {
                m.driver_cuda = Some(Sourced {
                    value: semver::Version::new(row.cuda.0, row.cuda.1, 0),
                    source: format!(
                        "driver {} ({}) by NVIDIA's driver table, {} from {}",
                        driver.value,
                        driver.source,
                        row.branch(),
                        row.driver
                    ),
                });
            }
            Ok(())
        }
    }
}

/// `580.95.05` → 580.95.5 (driver versions are not semver).
pub fn lenient(s: &str) -> Option<semver::Version> {
    crate::probe::machine::lenient_semver(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> semver::Version {
        lenient(s).unwrap()
    }

    #[test]
    fn the_table_gives_each_driver_its_cuda() {
        // NVIDIA's rows: 12.8 GA needs >= 570.26, 12.9 GA >= 575.51.03, 13.0 GA >= 580.65.06.
        assert_eq!(cuda_of(&v("560.35.03")).unwrap().cuda, (12, 6));
        assert_eq!(cuda_of(&v("570.26")).unwrap().cuda, (12, 8));
        assert_eq!(cuda_of(&v("570.124.06")).unwrap().cuda, (12, 8));
        assert_eq!(cuda_of(&v("575.57.08")).unwrap().cuda, (12, 9));
        assert_eq!(cuda_of(&v("580.159.04")).unwrap().cuda, (13, 0));
        assert_eq!(cuda_of(&v("565.57.01")).unwrap().cuda, (12, 6));
        assert_eq!(cuda_of(&v("418.39")), None, "older than the table");
        assert_eq!(cuda_of(&v("610.1")), None, "newer than the table");
        assert_eq!(cuda_of(&v("570.26")).unwrap().branch(), "R570");
    }

    #[test]
    fn blackwell_needs_r570_and_sm_121_r575() {
        let a = |s: &str| s.parse::<Arch>().unwrap();
        let n = drives(&v("560.35.03"), a("12.0")).unwrap_err();
        assert_eq!((n.row.driver, n.row.cuda), ("570.26", (12, 8)));
        assert!(drives(&v("560.35.03"), a("10.0")).is_err());
        assert!(drives(&v("560.35.03"), a("9.0")).is_ok());
        assert!(drives(&v("570.124.06"), a("12.0")).is_ok());
        let n = drives(&v("570.124.06"), a("12.1")).unwrap_err();
        assert_eq!(n.row.branch(), "R575");
        assert!(drives(&v("575.51.03"), a("12.1")).is_ok());
        assert!(drives(&v("580.65.06"), a("11.0")).is_ok());
        assert!(drives(&v("610.1"), a("12.1")).is_ok());
        assert!(drives(&v("418.39"), a("7.5")).is_ok(), "no row: nothing said");
    }

    #[test]
    fn an_override_outside_the_drivers_row_is_impossible() {
        assert!(consistent(&v("560.35.03"), &v("13.0")).is_err());
        assert!(consistent(&v("560.35.03"), &v("12.6")).is_ok());
        // R565 reports CUDA 12.7 (no toolkit has that number): between its row and the next.
        assert!(consistent(&v("565.57.01"), &v("12.7")).is_ok());
        assert!(consistent(&v("580.95.05"), &v("12.8")).is_err());
        assert!(consistent(&v("580.95.05"), &v("13.0")).is_ok());
        assert!(consistent(&v("610.1"), &v("13.3")).is_ok());
        assert!(consistent(&v("610.1"), &v("12.9")).is_err());
    }
}
