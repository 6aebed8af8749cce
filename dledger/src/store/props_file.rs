//! The two small Java properties files of a DLedger node, `checkpoint` and `currterm`, written as
//! Java's `IOUtils.properties2String` + `string2File` write them and read with Java's
//! `Properties.load` rules.
//!
//! Text: one `key=value\n` per key, nothing escaped, in the iteration order of the `Properties`
//! object. On Java 9 and later that is the order of its internal `ConcurrentHashMap` (16 bins),
//! which for these keys is `committedIndex, endIndex` and `voteLeader, currTerm`; Java 8's
//! `Hashtable` gives `endIndex, committedIndex` and `voteLeader, currTerm`. Readers do not care.
//!
//! Writing: Java writes `<f>.tmp`, copies the old `<f>` to `<f>.bak`, deletes `<f>` and renames
//! `.tmp` to `<f>`, without fsync. We write the same files, but fsync `.tmp` and rename it over
//! `<f>` (atomic), so there is never a moment with no `<f>` (a crash there makes Java forget its
//! term and vote). Reading: `<f>`; when it is missing (a Java node that crashed between delete and
//! rename) or empty (written without fsync before a crash), its `.tmp`, else its `.bak`, where
//! Java reads nothing.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use tracing::warn;

pub const CHECKPOINT_FILE: &str = "checkpoint";
pub const END_INDEX_KEY: &str = "endIndex";
pub const COMMITTED_INDEX_KEY: &str = "committedIndex";
pub const TERM_FILE: &str = "currterm";
pub const TERM_KEY: &str = "currTerm";
pub const VOTE_KEY: &str = "voteLeader";

/// `checkpoint` as Java 9+ writes it.
pub fn checkpoint_text(end_index: i64, committed_index: i64) -> String {
    format!("{COMMITTED_INDEX_KEY}={committed_index}\n{END_INDEX_KEY}={end_index}\n")
}

/// `currterm` as Java writes it (an absent vote is an empty value).
pub fn term_text(term: i64, vote: Option<&str>) -> String {
    format!("{VOTE_KEY}={}\n{TERM_KEY}={term}\n", vote.unwrap_or(""))
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Writes `text` to `path` as described in the module docs.
pub fn write(path: &Path, text: &str) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = with_suffix(path, ".tmp");
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
    }
    match std::fs::read(path) {
        Ok(previous) => std::fs::write(with_suffix(path, ".bak"), previous)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        if let Ok(dir) = std::fs::File::open(dir) {
            let _ = dir.sync_all();
        }
    }
    Ok(())
}

/// The properties of `path` (or of its `.tmp`, then `.bak`, when it is missing or empty: Java
/// never writes an empty one, but without fsync a crash can leave one); `None` when none of them
/// holds anything. Bytes are read as Java reads them here (platform charset, UTF-8 in practice;
/// invalid sequences become U+FFFD).
pub fn read(path: &Path) -> io::Result<Option<HashMap<String, String>>> {
    for candidate in [path.to_owned(), with_suffix(path, ".tmp"), with_suffix(path, ".bak")] {
        let bytes = match std::fs::read(&candidate) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let text = String::from_utf8_lossy(&bytes);
        let props: HashMap<String, String> = remoting::properties::parse(&text).into_iter().collect();
        if props.is_empty() {
            continue;
        }
        if candidate != path {
            warn!(path = %path.display(), using = %candidate.display(), "file missing or empty, reading its .tmp/.bak instead");
        }
        return Ok(Some(props));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_javas_and_the_old_file_goes_to_bak() {
        assert_eq!(checkpoint_text(-1, -1), "committedIndex=-1\nendIndex=-1\n");
        assert_eq!(term_text(3, None), "voteLeader=\ncurrTerm=3\n");
        assert_eq!(term_text(4, Some("n1")), "voteLeader=n1\ncurrTerm=4\n");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x").join("currterm");
        assert!(read(&path).unwrap().is_none());
        write(&path, &term_text(1, None)).unwrap();
        assert!(!with_suffix(&path, ".bak").exists(), "no old file, no .bak (as Java)");
        write(&path, &term_text(2, Some("n0"))).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "voteLeader=n0\ncurrTerm=2\n");
        assert_eq!(std::fs::read_to_string(with_suffix(&path, ".bak")).unwrap(), "voteLeader=\ncurrTerm=1\n");
        assert!(!with_suffix(&path, ".tmp").exists());
        let props = read(&path).unwrap().unwrap();
        assert_eq!(props.get("currTerm").map(String::as_str), Some("2"));
        assert_eq!(props.get("voteLeader").map(String::as_str), Some("n0"));
    }

    #[test]
    fn a_missing_file_is_read_from_its_tmp_then_its_bak() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("currterm");
        std::fs::write(with_suffix(&path, ".bak"), "currTerm=5\nvoteLeader=\n").unwrap();
        std::fs::write(with_suffix(&path, ".tmp"), "").unwrap();
        assert_eq!(read(&path).unwrap().unwrap().get("currTerm").map(String::as_str), Some("5"), "an empty .tmp is skipped");
        std::fs::write(with_suffix(&path, ".tmp"), "currTerm : 6\n# comment\n").unwrap();
        assert_eq!(read(&path).unwrap().unwrap().get("currTerm").map(String::as_str), Some("6"));
        std::fs::write(&path, "").unwrap();
        assert_eq!(read(&path).unwrap().unwrap().get("currTerm").map(String::as_str), Some("6"), "an empty main file is no file");
        std::fs::write(&path, "currTerm=7").unwrap();
        assert_eq!(read(&path).unwrap().unwrap().get("currTerm").map(String::as_str), Some("7"), "the main file wins");
    }
}
