//! Java `Properties` text: the body of the config codes (25/26/318/319) and the format of
//! `broker.conf` / namesrv config files.
//!
//! Reading follows `Properties.load` (its `LineReader` and `loadConvert`): lines end at `\n`, `\r`
//! or `\r\n`; leading blanks (space, tab, form feed) are skipped; `#` and `!` start comments; a
//! line ending in an odd number of backslashes continues on the next (whose leading blanks are
//! skipped); the key ends at the first unescaped `=`, `:` or blank; `\t \n \r \f \uXXXX` and
//! `\<any>` escapes are understood (a `\uXXXX` pair of UTF-16 surrogates is one character).
//!
//! Writing follows `Properties.store(OutputStream)`'s `saveConvert`, so every key and value reads
//! back as written and stays on its own line: `\\`, `\t`, `\n`, `\r`, `\f`; a space in a key, or
//! leading in a value; `=`, `:`, `#`, `!` in a key; every other character below U+0020 or above
//! U+007E as `\uXXXX` (UTF-16 units, upper-case hex), so the file is ASCII and a Java broker, which
//! reads it as ISO-8859-1, reads the same values. Unlike Java's `store`, `=`, `:`, `#` and `!`
//! inside a value are left as they are (they cannot end or comment out a value), so addresses
//! like `namesrvAddr=127.0.0.1:9876` read as they always did.

use indexmap::IndexMap;

/// Text `Properties.load` refuses (Java throws `IllegalArgumentException`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PropertiesError {
    #[error("malformed \\uxxxx encoding in {0:?}")]
    MalformedUnicodeEscape(String),
}

/// Parses properties text; later keys overwrite earlier ones, order of first appearance is kept.
/// A malformed `\uXXXX` escape is kept as its text (use [`parse_strict`] to refuse it, as Java).
pub fn parse(text: &str) -> IndexMap<String, String> {
    let mut out = IndexMap::new();
    for line in logical_lines(text) {
        let (key, value) = split_key_value(&line);
        out.insert(unescape(key, false).unwrap_or_default(), unescape(value, false).unwrap_or_default());
    }
    out
}

/// [`parse`], refusing a malformed `\uXXXX` escape as `Properties.load` does.
pub fn parse_strict(text: &str) -> Result<IndexMap<String, String>, PropertiesError> {
    let mut out = IndexMap::new();
    for line in logical_lines(text) {
        let (key, value) = split_key_value(&line);
        out.insert(unescape(key, true)?, unescape(value, true)?);
    }
    Ok(out)
}

/// Writes `key=value` lines, each key and value escaped as `Properties.store` escapes them.
pub fn write<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (k, v) in entries {
        escape_into(&mut out, k, true);
        out.push('=');
        escape_into(&mut out, v, false);
        out.push('\n');
    }
    out
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

/// Java's `LineReader`: the logical lines, continuations joined, blank and comment lines dropped.
fn logical_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut skip_blanks = true;
    // Set after a continuation: a line end there ends the (empty) continuation line.
    let mut appended_line_begin = false;
    let mut new_line = true;
    let mut comment = false;
    let mut preceding_backslash = false;
    let mut skip_lf = false;
    for c in text.chars() {
        if skip_lf {
            skip_lf = false;
            if c == '\n' {
                continue;
            }
        }
        if skip_blanks {
            if is_blank(c) || (!appended_line_begin && (c == '\r' || c == '\n')) {
                continue;
            }
            skip_blanks = false;
            appended_line_begin = false;
        }
        if new_line {
            new_line = false;
            if c == '#' || c == '!' {
                comment = true;
                continue;
            }
        }
        if c != '\n' && c != '\r' {
            if !comment {
                line.push(c);
            }
            preceding_backslash = c == '\\' && !preceding_backslash;
            continue;
        }
        // A line end.
        if comment || line.is_empty() {
            comment = false;
            new_line = true;
            skip_blanks = true;
            preceding_backslash = false;
            line.clear();
            continue;
        }
        if preceding_backslash {
            line.pop();
            skip_blanks = true;
            appended_line_begin = true;
            preceding_backslash = false;
            skip_lf = c == '\r';
        } else {
            lines.push(std::mem::take(&mut line));
            new_line = true;
            skip_blanks = true;
            skip_lf = c == '\r';
        }
    }
    if !comment && !line.is_empty() {
        if preceding_backslash {
            line.pop();
        }
        lines.push(line);
    }
    lines
}

fn split_key_value(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' | b' ' | b'\t' | b'\x0c' => break,
            _ => i += 1,
        }
    }
    let key_end = i.min(bytes.len());
    let mut j = key_end;
    while j < bytes.len() && matches!(bytes[j], b' ' | b'\t' | b'\x0c') {
        j += 1;
    }
    if j < bytes.len() && matches!(bytes[j], b'=' | b':') {
        j += 1;
        while j < bytes.len() && matches!(bytes[j], b' ' | b'\t' | b'\x0c') {
            j += 1;
        }
    }
    // Both stop at an ASCII byte or the end (a skipped escape's bytes are never a separator), so
    // both are character boundaries.
    (&line[..key_end], &line[j..])
}

/// Java's `loadConvert`, over UTF-16 units so a surrogate pair written as two `\uXXXX` is one
/// character again (an unpaired surrogate, which a Rust string cannot hold, becomes U+FFFD).
fn unescape(s: &str, strict: bool) -> Result<String, PropertiesError> {
    let mut units: Vec<u16> = Vec::with_capacity(s.len());
    let mut chars = s.chars();
    let mut buf = [0u16; 2];
    while let Some(c) = chars.next() {
        if c != '\\' {
            units.extend_from_slice(c.encode_utf16(&mut buf));
            continue;
        }
        let escaped = match chars.next() {
            Some('t') => '\t',
            Some('n') => '\n',
            Some('r') => '\r',
            Some('f') => '\u{c}',
            Some('u') => {
                let hex: String = chars.clone().take(4).collect();
                match (hex.len() == 4 && hex.chars().all(|h| h.is_ascii_hexdigit())).then(|| u16::from_str_radix(&hex, 16).ok()).flatten() {
                    Some(unit) => {
                        chars.nth(3);
                        units.push(unit);
                        continue;
                    }
                    None if strict => return Err(PropertiesError::MalformedUnicodeEscape(s.to_owned())),
                    None => {
                        units.extend("\\u".encode_utf16());
                        continue;
                    }
                }
            }
            Some(other) => other,
            None => continue,
        };
        units.extend_from_slice(escaped.encode_utf16(&mut buf));
    }
    Ok(String::from_utf16_lossy(&units))
}

/// Java's `saveConvert` with `escapeUnicode` (see the module comment for the one difference).
fn escape_into(out: &mut String, s: &str, is_key: bool) {
    let mut buf = [0u16; 2];
    for (i, c) in s.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{c}' => out.push_str("\\f"),
            ' ' if is_key || i == 0 => out.push_str("\\ "),
            '=' | ':' | '#' | '!' if is_key => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            c => {
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_java_separators_comments_and_continuations() {
        let text = "# comment\n! also\nlistenPort=9876\nbrokerName : broker-a\nflag true\nlong = a\\\n    b\nesc=x\\ty\\u0041\n\n";
        let p = parse(text);
        assert_eq!(p["listenPort"], "9876");
        assert_eq!(p["brokerName"], "broker-a");
        assert_eq!(p["flag"], "true");
        assert_eq!(p["long"], "ab");
        assert_eq!(p["esc"], "x\tyA");
        assert_eq!(p.len(), 5);
    }

    #[test]
    fn escapes_are_decoded_as_java_decodes_them() {
        let p = parse("a=x\\ny\\r\\u000a\\u000Dz\nb=\\u0041\\uD83D\\uDE00\nc=\\q\\\\");
        assert_eq!(p["a"], "x\ny\r\n\rz");
        assert_eq!(p["b"], "A\u{1F600}");
        assert_eq!(p["c"], "q\\");
        assert_eq!(parse_strict("a=\\u00zz"), Err(PropertiesError::MalformedUnicodeEscape("\\u00zz".to_owned())));
        assert_eq!(parse_strict("a=\\u00").map(|_| ()), Err(PropertiesError::MalformedUnicodeEscape("\\u00".to_owned())));
        assert_eq!(parse("a=\\u00zz")["a"], "\\u00zz");
    }

    #[test]
    fn crlf_ends_a_line_once_and_continues_a_line_once() {
        let p = parse("a=1\\\r\n   2\r\nb=3\r\rc=4");
        assert_eq!(p.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>(), vec![("a", "12"), ("b", "3"), ("c", "4")]);
        // A continuation followed by an empty line ends there; a comment sign there is content.
        let p = parse("a=1\\\n\nb=2\\\n#3\n");
        assert_eq!((p["a"].as_str(), p["b"].as_str()), ("1", "2#3"));
        // A value ending in one backslash at the end of the text loses it, as in Java.
        assert_eq!(parse("a=x\\")["a"], "x");
    }

    #[test]
    fn written_values_stay_on_their_line_and_are_ascii() {
        let value = "smuggle\nbrokerIP1=10.66.66.66\r\\\u{1}\u{2}\u{e4}\u{1F600} end\\";
        let text = write([("regionId", value), ("k=:#! \u{c}", " lead")]);
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.is_ascii(), "{text}");
        assert_eq!(
            text,
            "regionId=smuggle\\nbrokerIP1=10.66.66.66\\r\\\\\\u0001\\u0002\\u00E4\\uD83D\\uDE00 end\\\\\n\
             k\\=\\:\\#\\!\\ \\f=\\ lead\n"
        );
        let back = parse(&text);
        assert_eq!((back.len(), back["regionId"].as_str(), back["k=:#! \u{c}"].as_str()), (2, value, " lead"));
    }

    proptest::proptest! {
        #[test]
        fn any_map_written_reads_back_equal(map in proptest::collection::btree_map(".*", ".*", 0..8)) {
            let text = write(map.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            let back = parse_strict(&text).unwrap();
            proptest::prop_assert!(back.len() <= map.len());
            proptest::prop_assert_eq!(back.into_iter().collect::<std::collections::BTreeMap<_, _>>(), map);
            proptest::prop_assert_eq!(text.lines().count(), text.matches('\n').count());
        }

        #[test]
        fn any_control_or_escape_heavy_map_reads_back_equal(
            map in proptest::collection::btree_map("[ =:#!\\\\\t\n\r\u{c}\u{1}\u{2}a\u{e4}\u{1F600}]{0,12}", "[ =:#!\\\\\t\n\r\u{c}\u{1}\u{2}a\u{e4}\u{1F600}]{0,12}", 0..8)
        ) {
            let text = write(map.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            proptest::prop_assert_eq!(text.lines().count(), map.len());
            let back = parse_strict(&text).unwrap();
            proptest::prop_assert_eq!(back.into_iter().collect::<std::collections::BTreeMap<_, _>>(), map);
        }
    }

    #[test]
    fn write_then_parse_round_trips() {
        let entries = [("a key", "v=1"), ("path", "/tmp/x y"), ("empty", ""), ("tab", "\tz")];
        let p = parse(&write(entries.iter().map(|(k, v)| (*k, *v))));
        for (k, v) in entries {
            assert_eq!(p[k], v);
        }
    }
}
