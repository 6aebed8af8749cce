//! The simulation's oracle: what must hold after every step, whatever the faults.
//!
//! - **Election safety**: at most one leader per term, over the whole run.
//! - **Commit agreement**: every member's log, up to its committed index, equals one committed
//!   log (`committed`), built from what members report committed. A committed entry never changes
//!   and no truncate removes one.
//! - **Leader completeness**: a leader of term `T` holds every entry known committed in a term
//!   below `T`.
//! - **Acknowledged proposals**: a SUCCESS answer names an entry in the answering leader's log,
//!   committed there, with the proposal's bodies and positions; so it is part of `committed` and,
//!   by the rule above, in every later leader's log. Every proposal is answered at most once.
//!
//! **Power loss** (the guarantee under it). A SUCCESS answer means: in the page cache of a
//! quorum. It survives any number of process crashes. A power loss may lose it only if it hits a
//! member holding it, before a quorum of members had it on disk. So when a member loses power,
//! every entry it held that is neither on its disk nor on the disks of a quorum is *at risk*
//! (its acknowledgement may be counted although its bytes are gone). A committed entry at risk is
//! *forfeited*: it and every entry after it leave `committed` and may be lost or replaced; an
//! acknowledged entry at risk is exempt from the checks. A member may still show an entry at risk
//! in its committed prefix (its checkpoint said so) and may truncate it. An entry at risk that a
//! member commits again counts as committed once an entry after it commits that is not at risk
//! (that commit rests on fresh acknowledgements, which by log matching cover it). Every other
//! entry keeps every guarantee above.

use std::collections::{BTreeMap, HashSet};

use crate::entry::Entry;
use crate::log::RaftLog;

/// A member as the oracle sees it after a step.
pub struct View<'a> {
    pub id: &'a str,
    pub up: bool,
    pub leader_term: Option<i64>,
    pub term: i64,
    pub log: &'a crate::sim::MemLog,
    /// The lowest index changed since the last step (`MemLog::take_changed`).
    pub changed_from: i64,
    /// Committed entries truncates removed since the last step.
    pub cut_committed: Vec<Entry>,
}

#[derive(Debug, Default)]
pub struct Oracle {
    quorum: usize,
    leaders: BTreeMap<i64, String>,
    committed: Vec<Entry>,
    /// The lowest term in which each committed entry was known committed.
    commit_term: Vec<i64>,
    forfeited: BTreeMap<i64, Vec<Entry>>,
    /// Per member: its committed prefix is checked up to here.
    checked: Vec<i64>,

    /// Leaders (member, term) whose log was checked against the whole committed log.
    known_leaders: Vec<(usize, i64)>,
    scratch_leaders: Vec<(usize, i64)>,
    answered: HashSet<u64>,
    /// The entries SUCCESS answers acknowledged, by index (a lost one is named as such).
    acknowledged: BTreeMap<i64, Entry>,
    pub forfeits: u64,
    pub forfeited_entries: u64,
    pub acked: u64,
}

impl Oracle {
    pub fn new(members: usize) -> Oracle {
        Oracle { quorum: members / 2 + 1, checked: vec![-1; members], ..Oracle::default() }
    }

    pub fn committed_len(&self) -> usize {
        self.committed.len()
    }

    /// How a lost committed entry is named: `acknowledged` when a SUCCESS answer covered it.
    fn kind(&self, e: &Entry) -> &'static str {
        if self.acknowledged.get(&e.index) == Some(e) {
            "acknowledged"
        } else {
            "committed"
        }
    }

    fn allowed(&self, index: i64, e: &Entry) -> bool {
        self.forfeited.get(&index).is_some_and(|v| v.contains(e))
    }

    /// A member restarted: check its whole committed prefix again.
    pub fn restarted(&mut self, member: usize) {
        self.checked[member] = -1;
    }

    /// After every step.
    pub fn check(&mut self, views: &[View]) -> Result<(), String> {
        let mut touched: Vec<usize> = Vec::new();
        for (n, v) in views.iter().enumerate() {
            if let Some(term) = v.leader_term {
                match self.leaders.get(&term) {
                    Some(l) if l != v.id => return Err(format!("two leaders in term {term}: {l} and {}", v.id)),
                    Some(_) => {}
                    None => {
                        self.leaders.insert(term, v.id.to_owned());
                    }
                }
            }
            for e in &v.cut_committed {
                let i = e.index as usize;
                if self.committed.get(i) == Some(e) {
                    return Err(format!("{} truncated {} entry {} (term {})", v.id, self.kind(e), e.index, e.term));
                }
            }
            if !v.up {
                continue;
            }
            let log = v.log;
            let upto = log.committed_index().min(log.end_index());
            let from = (self.checked[n] + 1).min(v.changed_from.max(0)).max(log.begin_index().max(0));
            // A member's committed prefix may still show forfeited entries (it committed them
            // before they were forfeited): they count as committed again only once the member
            // commits an entry after them that was never forfeited.
            let mut held_back: Vec<Entry> = Vec::new();
            for i in from..=upto {
                let Some(e) = log.entry(i) else { return Err(format!("{} misses entry {i} below its commit index", v.id)) };
                let slot = i as usize;
                if slot < self.committed.len() {
                    let same = &self.committed[slot] == e;
                    if !same && !self.allowed(i, e) {
                        return Err(format!(
                            "{} has {:?} committed at {i}, the group committed {:?} ({})",
                            v.id,
                            brief(e),
                            brief(&self.committed[slot]),
                            self.kind(&self.committed[slot])
                        ));
                    }
                    if same && v.term < self.commit_term[slot] {
                        self.commit_term[slot] = v.term;
                        touched.push(slot);
                    }
                } else if slot == self.committed.len() + held_back.len() {
                    if self.allowed(i, e) {
                        held_back.push(e.clone());
                        continue;
                    }
                    for e in held_back.drain(..).chain(std::iter::once(e.clone())) {
                        touched.push(self.committed.len());
                        self.committed.push(e);
                        self.commit_term.push(v.term);
                    }
                } else {
                    return Err(format!("{} commits {i} past the committed log's end {}", v.id, self.committed.len()));
                }
            }
            let upto = if held_back.is_empty() { upto } else { self.committed.len() as i64 - 1 };
            self.checked[n] = upto;
        }
        self.check_leaders(views, &touched)
    }

    /// Leader completeness, for new leaders against everything and for known leaders against
    /// what changed.
    fn check_leaders(&mut self, views: &[View], touched: &[usize]) -> Result<(), String> {
        let mut current = std::mem::take(&mut self.scratch_leaders);
        current.clear();
        for (n, v) in views.iter().enumerate() {
            let Some(term) = v.leader_term.filter(|_| v.up) else { continue };
            let lacks = |slot: usize| -> Option<String> {
                if self.commit_term[slot] >= term {
                    return None;
                }
                let want = &self.committed[slot];
                if v.log.entry(slot as i64) == Some(want) {
                    return None;
                }
                Some(format!("leader {} of term {term} lacks {} {:?}, committed in term {}", v.id, self.kind(want), brief(want), self.commit_term[slot]))
            };
            let found =
                if self.known_leaders.contains(&(n, term)) { touched.iter().find_map(|&slot| lacks(slot)) } else { (0..self.committed.len()).find_map(lacks) };
            if let Some(e) = found {
                return Err(e);
            }
            current.push((n, term));
        }
        self.scratch_leaders = std::mem::replace(&mut self.known_leaders, current);
        Ok(())
    }

    /// A SUCCESS answer from member `n`, checked after [`Oracle::check`] ran for the step.
    pub fn acknowledged(&mut self, view: &View, term: i64, index: i64, pos: i64, bodies: &[bytes::Bytes], positions: &[i64]) -> Result<(), String> {
        self.acked += 1;
        let first = index + 1 - bodies.len() as i64;
        if positions.len() != bodies.len() {
            return Err(format!("{} answered {} positions for {} bodies", view.id, positions.len(), bodies.len()));
        }
        if view.log.committed_index() < index {
            return Err(format!("{} acknowledged {index} above its commit index {}", view.id, view.log.committed_index()));
        }
        for (k, body) in bodies.iter().enumerate() {
            let i = first + k as i64;
            let Some(e) = view.log.get(i) else { return Err(format!("{} acknowledged {i}, not in its log", view.id)) };
            if e.term != term || e.body != body || e.pos != positions[k] {
                return Err(format!("{} acknowledged {i} as term {term}, but holds {:?}", view.id, brief(&e)));
            }
            if self.committed.get(i as usize) != Some(&e) && !self.allowed(i, &e) {
                return Err(format!("{} acknowledged {i}, which is not the committed entry", view.id));
            }
            self.acknowledged.insert(i, e);
        }
        if positions.last() != Some(&pos) {
            return Err(format!("{} answered pos {pos}, its last entry is at {:?}", view.id, positions.last()));
        }
        Ok(())
    }

    /// A proposal was answered; at most once.
    pub fn answered(&mut self, token: u64) -> Result<(), String> {
        if self.answered.insert(token) {
            Ok(())
        } else {
            Err(format!("proposal {token} answered twice"))
        }
    }

    /// Member `n` is about to lose power; `disks` are every member's durable entries with the
    /// index of the first. Every entry it loses (in its page cache, not on its disk) that is not
    /// on a quorum of disks is at risk from now on: the leader may count, or already have
    /// counted, its acknowledgement. A committed entry at risk is forfeited with every entry after
    /// it; an entry not yet committed stays at risk until a commit after it that does not rest on
    /// an entry at risk (see [`Oracle::check`]).
    pub fn power_loss(&mut self, n: usize, live: &crate::sim::MemLog, disks: &[(i64, &[Entry])]) {
        let on_disk = |(begin, disk): &(i64, &[Entry]), e: &Entry| e.index >= *begin && disk.get((e.index - begin) as usize) == Some(e);
        let mut first_forfeit: Option<usize> = None;
        for e in live.entries() {
            if on_disk(&disks[n], e) {
                continue;
            }
            let holders = disks.iter().filter(|d| on_disk(d, e)).count();
            if holders >= self.quorum {
                continue;
            }
            let slot = e.index as usize;
            if self.committed.get(slot) == Some(e) {
                first_forfeit = Some(first_forfeit.map_or(slot, |f| f.min(slot)));
            } else if !self.allowed(e.index, e) {
                self.forfeited.entry(e.index).or_default().push(e.clone());
            }
        }
        let Some(from) = first_forfeit else { return };
        self.forfeits += 1;
        for (k, e) in self.committed.drain(from..).enumerate() {
            self.forfeited_entries += 1;
            let at_risk = self.forfeited.entry((from + k) as i64).or_default();
            if !at_risk.contains(&e) {
                at_risk.push(e);
            }
        }
        self.commit_term.truncate(from);
        for c in &mut self.checked {
            *c = (*c).min(from as i64 - 1);
        }
    }
}

fn brief(e: &Entry) -> (i64, i64, i64, String) {
    (e.index, e.term, e.pos, String::from_utf8_lossy(&e.body[..e.body.len().min(12)]).into_owned())
}
