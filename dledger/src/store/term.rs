//! `currterm`: the member's term and vote (Java `MemberState.loadTerm` / `persistTerm`), in
//! `<storeBaseDir>/dledger-<selfId>/currterm`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use super::props_file::{self, TERM_FILE, TERM_KEY, VOTE_KEY};
use super::StoreError;
use crate::config::DLedgerConfig;
use crate::log::{LogError, TermStore};

/// The member's current term, shared by its [`TermFile`] and its
/// [`FileStore`](super::FileStore) (Java's store asks `memberState.currTerm()`, to ignore commit
/// indexes from older terms). Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct CurrentTerm(Arc<AtomicI64>);

impl CurrentTerm {
    pub fn new(term: i64) -> CurrentTerm {
        CurrentTerm(Arc::new(AtomicI64::new(term)))
    }

    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Acquire)
    }

    pub fn set(&self, term: i64) {
        self.0.store(term, Ordering::Release);
    }
}

/// The `currterm` file of one member.
#[derive(Debug)]
pub struct TermFile {
    path: PathBuf,
    term: CurrentTerm,
    vote: Option<String>,
}

impl TermFile {
    /// Reads `<config.node_dir()>/currterm`. A missing file is term 0 and no vote, as Java. A
    /// term that is not a number refuses to open (Java logs it and starts at term 0, which
    /// forgets a vote; a node must not vote twice in one term).
    pub fn open(config: &DLedgerConfig) -> Result<TermFile, StoreError> {
        Self::open_path(config.node_dir().join(TERM_FILE))
    }

    pub fn open_path(path: impl Into<PathBuf>) -> Result<TermFile, StoreError> {
        let path = path.into();
        let props = props_file::read(&path).map_err(|source| StoreError::Io { path: path.clone(), source })?;
        let mut term = 0;
        let mut vote = None;
        if let Some(props) = props {
            if let Some(text) = props.get(TERM_KEY) {
                // Java's Long.valueOf: an optional sign and decimal digits, nothing around them.
                term = text.parse::<i64>().map_err(|_| StoreError::Corrupt { path: path.clone(), detail: format!("{TERM_KEY}={text:?} is not a number") })?;
            }
            vote = props.get(VOTE_KEY).filter(|v| !v.is_empty()).cloned();
        }
        Ok(TermFile { path, term: CurrentTerm::new(term), vote })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The handle the store reads the current term through.
    pub fn current_term(&self) -> CurrentTerm {
        self.term.clone()
    }

    pub fn vote(&self) -> Option<&str> {
        self.vote.as_deref()
    }
}

impl TermStore for TermFile {
    fn load(&self) -> (i64, Option<String>) {
        (self.term.get(), self.vote.clone())
    }

    /// Writes the file (fsynced, renamed over the old one; see `props_file`) before the new term
    /// is visible.
    fn persist(&mut self, term: i64, vote: Option<&str>) -> Result<(), LogError> {
        props_file::write(&self.path, &props_file::term_text(term, vote)).map_err(|e| LogError::Io(format!("{}: {e}", self.path.display())))?;
        self.term.set(term);
        self.vote = vote.map(str::to_owned);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_term_and_vote_survive_a_reopen_in_javas_text() {
        let dir = tempfile::tempdir().unwrap();
        let config = DLedgerConfig { store_base_dir: dir.path().to_string_lossy().into_owned(), self_id: "n1".into(), ..Default::default() };
        let mut terms = TermFile::open(&config).unwrap();
        assert_eq!(terms.load(), (0, None), "no file: term 0, no vote");
        let shared = terms.current_term();
        terms.persist(7, Some("n2")).unwrap();
        assert_eq!(shared.get(), 7);
        let path = dir.path().join("dledger-n1").join("currterm");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "voteLeader=n2\ncurrTerm=7\n");
        terms.persist(8, None).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "voteLeader=\ncurrTerm=8\n");
        assert_eq!(TermFile::open(&config).unwrap().load(), (8, None));
        std::fs::write(&path, "currTerm=9\nvoteLeader=n0\n").unwrap();
        assert_eq!(TermFile::open(&config).unwrap().load(), (9, Some("n0".to_owned())));
        std::fs::write(&path, "currTerm=nine\n").unwrap();
        assert!(matches!(TermFile::open(&config), Err(StoreError::Corrupt { .. })));
    }
}
