//! A small disk of a scenario's own: a tmpfs mounted on a temporary directory (so the
//! scenario needs root, as `mount` does), which the scenario fills to the last byte and
//! frees again. Unmounted when dropped.
//!
//! Only full, not read-only: Linux refuses to remount a filesystem read-only while a file on
//! it is open for writing (EBUSY), which the database's file always is.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs and the file that fills it.
pub struct SmallDisk {
    dir: tempfile::TempDir,
    filler: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size_mib` MiB; an error says why it could not.
    pub fn mount(size_mib: u32) -> Result<SmallDisk, String> {
        let dir = tempfile::tempdir().map_err(|error| error.to_string())?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .map_err(|error| format!("mount: {error}"))?;
        if !mounted.success() {
            return Err(format!(
                "mount -t tmpfs on {} failed ({mounted}); the scenario needs root",
                dir.path().display()
            ));
        }
        let filler = dir.path().join("filler");
        Ok(SmallDisk { dir, filler })
    }

    /// The mounted directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file until the disk has no byte left; returns how many it took.
    pub fn fill(&self) -> u64 {
        let Ok(mut file) = std::fs::File::create(&self.filler) else {
            return 0;
        };
        let chunk = vec![0_u8; 64 * 1024];
        let mut written = 0;
        while let Ok(count) = file.write(&chunk) {
            if count == 0 {
                break;
            }
            written += count as u64;
        }
        let _ = file.flush();
        written
    }

    /// Removes what [`fill`](Self::fill) wrote.
    pub fn free(&self) {
        let _ = std::fs::remove_file(&self.filler);
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
