//! Writing config files the way Java's `MixAll.string2File` does: write `FILE.tmp`, keep the old
//! file as `FILE.bak`, then rename the new one into place, so a crash never leaves a torn file.

use std::io::Write;
use std::path::Path;

pub fn write_atomically(path: &Path, content: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(extension_with(path, "tmp"));
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(content)?;
        file.sync_all()?;
    }
    if path.exists() {
        std::fs::copy(path, path.with_extension(extension_with(path, "bak")))?;
    }
    std::fs::rename(&tmp, path)
}

/// `kvConfig.json` -> `json.tmp`, so the result is `kvConfig.json.tmp` as in Java.
fn extension_with(path: &Path, suffix: &str) -> String {
    match path.extension() {
        Some(ext) => format!("{}.{suffix}", ext.to_string_lossy()),
        None => suffix.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_keeps_a_backup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/kvConfig.json");
        write_atomically(&path, b"one").unwrap();
        write_atomically(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::read(dir.path().join("sub/kvConfig.json.bak")).unwrap(), b"one");
        assert!(!dir.path().join("sub/kvConfig.json.tmp").exists());
    }
}
