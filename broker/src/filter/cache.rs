//! Compiled expressions, kept: Java compiles a subscription's expression once, at the heartbeat
//! (`ConsumerFilterManager`), and each pull finds it there. Ours are looked up by their text, so a
//! pull carrying its subscription and one using its group's heartbeat share the compiled form, and
//! an expression that does not compile is refused from the cache too.
//!
//! Bounded in entries and in the bytes of the texts kept (the compiled form is of the same order:
//! each literal once, plus the tree); past either bound the least recently used entries go.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;

use super::{compile, Expr, FilterError};

/// Expressions kept at most.
pub const MAX_CACHED_EXPRESSIONS: usize = 4096;
/// Bytes of expression text kept at most (each text is at most `MAX_EXPRESSION_BYTES`).
pub const MAX_CACHED_BYTES: usize = 32 << 20;

type Compiled = Result<Arc<Expr>, FilterError>;

struct Entry {
    compiled: Compiled,
    last_used: u64,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<Arc<str>, Entry>,
    bytes: usize,
    clock: u64,
}

impl Cache {
    fn get(&mut self, text: &str) -> Option<Compiled> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(text).map(|e| {
            e.last_used = clock;
            e.compiled.clone()
        })
    }

    fn insert(&mut self, text: &str, compiled: Compiled) {
        if text.len() > MAX_CACHED_BYTES {
            return;
        }
        while !self.entries.is_empty() && (self.entries.len() >= MAX_CACHED_EXPRESSIONS || self.bytes + text.len() > MAX_CACHED_BYTES) {
            self.evict_oldest();
        }
        self.clock += 1;
        let key: Arc<str> = Arc::from(text);
        self.bytes += key.len();
        if let Some(old) = self.entries.insert(key.clone(), Entry { compiled, last_used: self.clock }) {
            drop(old);
            self.bytes -= key.len();
        }
    }

    fn evict_oldest(&mut self) {
        let Some(oldest) = self.entries.iter().min_by_key(|(_, e)| e.last_used).map(|(k, _)| k.clone()) else { return };
        self.entries.remove(&oldest);
        self.bytes -= oldest.len();
    }
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| Mutex::new(Cache::default()));

/// [`compile`], once per distinct text while it stays in the cache.
pub fn compile_cached(text: &str) -> Compiled {
    if let Some(hit) = CACHE.lock().get(text) {
        return hit;
    }
    // Compiled outside the lock: two pulls of a new expression may both compile it, and no pull
    // waits on another's compilation.
    let compiled = compile(text).map(Arc::new);
    CACHE.lock().insert(text, compiled.clone());
    compiled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_keeps_the_recently_used_within_its_bounds() {
        let mut cache = Cache::default();
        let ok = |t: &str| compile(t).map(Arc::new);
        for i in 0..MAX_CACHED_EXPRESSIONS + 10 {
            let text = format!("a = {i}");
            cache.insert(&text, ok(&text));
            if i % 100 == 0 {
                assert!(cache.get("a = 0").is_some(), "used often, kept");
            }
        }
        assert_eq!(cache.entries.len(), MAX_CACHED_EXPRESSIONS);
        assert!(cache.get("a = 0").is_some());
        assert!(cache.get("a = 1").is_none(), "the least recently used went first");
        let big = format!("a IN ({})", ["'x'"; 10].join(","));
        let before = cache.bytes;
        cache.insert(&big, ok(&big));
        assert!(cache.bytes <= before + big.len());
        assert_eq!(cache.bytes, cache.entries.keys().map(|k| k.len()).sum::<usize>());
    }
}
