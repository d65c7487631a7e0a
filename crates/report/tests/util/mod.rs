//! What the report crate's tests share.

use std::path::{Path, PathBuf};

/// A fresh, empty directory in the system's temporary directory, named for this test
/// process and `name`, removed when dropped: whether its test passed or failed, no
/// directory is left behind (a `name` with a `/` in it, as a test of odd names has, makes
/// a directory inside another: the outer one is removed).
pub struct TempDir {
    dir: PathBuf,
    outer: PathBuf,
}

impl TempDir {
    /// Creates it (an old one of the same name is removed first).
    pub fn new(name: &str) -> TempDir {
        let relative = PathBuf::from(format!("loadlab-report-{}-{name}", std::process::id()));
        let first = relative.components().next().expect("a name");
        let outer = std::env::temp_dir().join(first);
        let dir = std::env::temp_dir().join(&relative);
        let _ = std::fs::remove_dir_all(&outer);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir { dir, outer }
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

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.outer);
    }
}
