//! torch's ABI facts, as the probe reads them from an imported torch: what decides whether an
//! extension built against one torch loads in another. It deliberately ignores everything else
//! about torch (its import is the probe's, its kernels the binaries scan's).

use serde::{Deserialize, Serialize};

/// What decides the ABI of an extension built against torch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TorchFacts {
    pub version: Option<String>,
    pub cuda: Option<String>,
    pub git_version: Option<String>,
    pub cxx11_abi: Option<bool>,
    #[serde(default)]
    pub arch_list: Option<Vec<String>>,
}

impl TorchFacts {
    /// One line that changes whenever an extension built against torch must be rebuilt: the
    /// version, CUDA version, git commit, C++11 ABI and compiled arch list.
    pub fn fingerprint(&self) -> String {
        let git = self.git_version.as_deref().unwrap_or("?");
        let archs = self.arch_list.as_ref().map_or("?".to_string(), |a| a.join(","));
        format!(
            "torch {} cuda {} git {} cxx11abi {} archs {archs}",
            self.version.as_deref().unwrap_or("?"),
            self.cuda.as_deref().unwrap_or("none"),
            git.chars().take(12).collect::<String>(),
            self.cxx11_abi.map_or("?".to_string(), |b| b.to_string())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_fingerprint_changes_with_each_abi_fact() {
        let base = TorchFacts {
            version: Some("2.14.1+cu130".into()),
            cuda: Some("13.0".into()),
            git_version: Some("0123456789abcdef0123".into()),
            cxx11_abi: Some(true),
            arch_list: Some(vec!["sm_90".into(), "sm_120".into()]),
        };
        assert_eq!(
            base.fingerprint(),
            "torch 2.14.1+cu130 cuda 13.0 git 0123456789ab cxx11abi true archs sm_90,sm_120"
        );
        let variants = [
            TorchFacts {
                version: Some("2.15.0+cu132".into()),
                ..base.clone()
            },
            TorchFacts {
                cuda: Some("13.2".into()),
                ..base.clone()
            },
            TorchFacts {
                git_version: Some("ffff".into()),
                ..base.clone()
            },
            TorchFacts {
                cxx11_abi: Some(false),
                ..base.clone()
            },
            TorchFacts {
                arch_list: Some(vec!["sm_90".into()]),
                ..base.clone()
            },
        ];
        for v in variants {
            assert_ne!(v.fingerprint(), base.fingerprint());
        }
    }
}
