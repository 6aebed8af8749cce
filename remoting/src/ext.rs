//! `extFields`, the custom-header fields of a command: string to string, in arrival order, so a
//! decoded command re-encodes to the same bytes; a repeated key keeps its first place and its last
//! value (Java's map).
//!
//! A ROCKETMQ header's fields are kept as they arrived: the ext block's bytes (copied out of the
//! frame, so a parked request does not hold its read buffer) and where each key and value lies
//! in it. Typed headers read them from there (a send's or a pull's header costs one small
//! vector, not two strings per field and a hash map). The first change makes them a map; so do
//! blocks a map reads better (repeated keys, invalid UTF-8, many fields). JSON headers and
//! commands we build are maps from the start.

use bytes::Bytes;

type Map = indexmap::IndexMap<String, String, foldhash::fast::RandomState>;

/// Up to this many fields stay as their block: past it, the linear search of a lookup would cost
/// more than the map.
pub(crate) const MAX_BLOCK_FIELDS: usize = 32;

/// Where one field lies in its block: key start and end, value start and end.
pub(crate) type Span = [u32; 4];

#[derive(Clone)]
pub struct ExtFields {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    /// Valid UTF-8 keys and values, no key twice, at most [`MAX_BLOCK_FIELDS`].
    Block {
        block: Bytes,
        spans: Vec<Span>,
    },
    Map(Map),
}

impl Default for ExtFields {
    fn default() -> Self {
        ExtFields { repr: Repr::Map(Map::default()) }
    }
}

/// The bytes from `start` to `end` of `block` (a key's or a value's span).
fn part(block: &[u8], start: u32, end: u32) -> &[u8] {
    &block[start as usize..end as usize]
}

fn text(block: &[u8], start: u32, end: u32) -> &str {
    // Checked when the block was taken (`from_block`); never fails.
    std::str::from_utf8(part(block, start, end)).unwrap_or_default()
}

impl ExtFields {
    /// Fields as they lie in `block`, when it can be read as it is: at most [`MAX_BLOCK_FIELDS`]
    /// spans within it, valid UTF-8, no key twice. `None` when it cannot; the caller builds a map.
    pub(crate) fn from_block(block: Bytes, spans: Vec<Span>) -> Option<ExtFields> {
        if spans.len() > MAX_BLOCK_FIELDS {
            return None;
        }
        let within = |s: &Span| s[0] <= s[1] && s[1] <= s[2] && s[2] <= s[3] && s[3] as usize <= block.len();
        if !spans.iter().all(within) {
            return None;
        }
        let valid = |s: &Span| std::str::from_utf8(part(&block, s[0], s[1])).is_ok() && std::str::from_utf8(part(&block, s[2], s[3])).is_ok();
        if !spans.iter().all(valid) {
            return None;
        }
        let key = |s: &Span| part(&block, s[0], s[1]);
        // Lengths and first bytes first: a send's keys are "a" to "n", and a call to memcmp per
        // pair of them cost more than the rest of the decode.
        let same = |a: &[u8], b: &[u8]| a.len() == b.len() && a.first() == b.first() && a == b;
        let repeated = spans.iter().enumerate().any(|(i, a)| spans[..i].iter().any(|b| same(key(a), key(b))));
        if repeated {
            return None;
        }
        Some(ExtFields { repr: Repr::Block { block, spans } })
    }

    pub fn with_capacity(n: usize) -> ExtFields {
        ExtFields { repr: Repr::Map(Map::with_capacity_and_hasher(n, Default::default())) }
    }

    /// The map, made from the block on the first change.
    fn map_mut(&mut self) -> &mut Map {
        if let Repr::Block { .. } = self.repr {
            let map: Map = self.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
            self.repr = Repr::Map(map);
        }
        match &mut self.repr {
            Repr::Map(map) => map,
            Repr::Block { .. } => unreachable!("made a map above"),
        }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        match &self.repr {
            Repr::Block { block, spans } => spans.iter().find(|s| part(block, s[0], s[1]) == key.as_bytes()).map(|s| text(block, s[2], s[3])),
            Repr::Map(map) => map.get(key).map(String::as_str),
        }
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` (in its place if present, else last); the value it had.
    pub fn insert(&mut self, key: String, value: String) -> Option<String> {
        self.map_mut().insert(key, value)
    }

    /// Removes `key`, keeping the others in order; the value it had.
    pub fn shift_remove(&mut self, key: &str) -> Option<String> {
        self.map_mut().shift_remove(key)
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Block { spans, .. } => spans.len(),
            Repr::Map(map) => map.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The fields in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            inner: match &self.repr {
                Repr::Block { block, spans } => IterRepr::Block(block, spans.iter()),
                Repr::Map(map) => IterRepr::Map(map.iter()),
            },
        }
    }
}

pub struct Iter<'a> {
    inner: IterRepr<'a>,
}

enum IterRepr<'a> {
    Block(&'a Bytes, std::slice::Iter<'a, Span>),
    Map(indexmap::map::Iter<'a, String, String>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        match &mut self.inner {
            IterRepr::Block(block, spans) => spans.next().map(|s| (text(block, s[0], s[1]), text(block, s[2], s[3]))),
            IterRepr::Map(iter) => iter.next().map(|(k, v)| (k.as_str(), v.as_str())),
        }
    }
}

impl<'a> IntoIterator for &'a ExtFields {
    type Item = (&'a str, &'a str);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl IntoIterator for ExtFields {
    type Item = (String, String);
    type IntoIter = indexmap::map::IntoIter<String, String>;

    fn into_iter(mut self) -> Self::IntoIter {
        std::mem::take(self.map_mut()).into_iter()
    }
}

impl FromIterator<(String, String)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        ExtFields { repr: Repr::Map(iter.into_iter().collect()) }
    }
}

impl std::ops::Index<&str> for ExtFields {
    type Output = str;

    fn index(&self, key: &str) -> &str {
        self.get(key).unwrap_or_else(|| panic!("no ext field {key:?}"))
    }
}

impl PartialEq for ExtFields {
    fn eq(&self, other: &ExtFields) -> bool {
        self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(pairs: &[(&str, &[u8])]) -> (Bytes, Vec<Span>) {
        let mut bytes = Vec::new();
        let mut spans = Vec::new();
        for (k, v) in pairs {
            let k0 = bytes.len() as u32;
            bytes.extend_from_slice(k.as_bytes());
            let k1 = bytes.len() as u32;
            bytes.extend_from_slice(v);
            spans.push([k0, k1, k1, bytes.len() as u32]);
        }
        (Bytes::from(bytes), spans)
    }

    #[test]
    fn a_block_reads_like_the_map_of_its_fields_and_becomes_one_when_changed() {
        let (bytes, spans) = block(&[("topic", b"T"), ("queueId", b"3")]);
        let mut ext = ExtFields::from_block(bytes, spans).expect("a clean block");
        let map: ExtFields = [("topic".to_owned(), "T".to_owned()), ("queueId".to_owned(), "3".to_owned())].into_iter().collect();
        assert_eq!((ext.get("topic"), ext.get("queueId"), ext.get("none"), ext.len()), (Some("T"), Some("3"), None, 2));
        assert_eq!(ext, map);
        assert_eq!(ext.insert("topic".into(), "U".into()).as_deref(), Some("T"));
        assert_eq!(ext.iter().collect::<Vec<_>>(), [("topic", "U"), ("queueId", "3")], "changed in place, order kept");
    }

    #[test]
    fn blocks_a_map_reads_better_are_refused() {
        let (bytes, spans) = block(&[("k", b"1"), ("k", b"2")]);
        assert!(ExtFields::from_block(bytes, spans).is_none(), "a repeated key");
        let (bytes, spans) = block(&[("k", b"\xff")]);
        assert!(ExtFields::from_block(bytes, spans).is_none(), "invalid UTF-8");
        let many: Vec<(String, Vec<u8>)> = (0..=MAX_BLOCK_FIELDS).map(|i| (format!("k{i}"), b"v".to_vec())).collect();
        let many: Vec<(&str, &[u8])> = many.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
        let (bytes, spans) = block(&many);
        assert!(ExtFields::from_block(bytes, spans).is_none(), "too many fields");
        let (bytes, mut spans) = block(&[("k", b"v")]);
        spans[0][3] = 99;
        assert!(ExtFields::from_block(bytes, spans).is_none(), "a span past the block");
    }
}
