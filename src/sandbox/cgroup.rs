//! TEMPORARY placeholder until the cgroup module lands (helper-1 owns this file).
use std::path::PathBuf;
pub struct CgroupLimits {
    pub memory_bytes: u64,
    pub pids: u64,
    pub cpus: u64,
}
#[derive(Debug, thiserror::Error)]
#[error("cgroup error")]
pub struct CgroupError;
pub struct CgroupHost;
impl CgroupHost {
    pub fn system() -> Self {
        CgroupHost
    }
    pub fn create(
        &self,
        _name: &str,
        _limits: &CgroupLimits,
    ) -> Result<Option<RunCgroup>, CgroupError> {
        Ok(None)
    }
}
pub struct RunCgroup;
impl RunCgroup {
    pub fn procs_files(&self) -> Vec<PathBuf> {
        vec![]
    }
    pub fn held(&self) -> Vec<&'static str> {
        vec![]
    }
    pub fn memory_limit_hit(&self) -> bool {
        false
    }
    pub fn kill_all(&self) {}
    pub fn remove(self) -> Result<(), CgroupError> {
        Ok(())
    }
}
