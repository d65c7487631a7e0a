//! What the report crate's tests share.

use std::path::{Path, PathBuf};

/// A fresh directory named `name` (a `/` in it nests one directory in another, as the test
/// of odd names wants) inside a temporary directory of `tempfile`'s, which removes it all
/// when dropped, whether its test passed or failed.
pub struct TempDir {
    _outer: tempfile::TempDir,
    dir: PathBuf,
}

impl TempDir {
    /// Creates it.
    pub fn new(name: &str) -> TempDir {
        let outer = tempfile::Builder::new()
            .prefix("loadlab-report-")
            .tempdir()
            .unwrap();
        let dir = outer.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir { _outer: outer, dir }
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.dir
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.dir
    }
}
