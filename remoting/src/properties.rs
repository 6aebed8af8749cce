//! Java `Properties` text: the body of the config codes (25/26/318/319) and the format of
//! `broker.conf` / namesrv config files. Parsing follows `Properties.load`: `=`, `:` or whitespace
//! separate key and value; `#` and `!` start comments; a trailing backslash continues a line;
//! `\t \n \r \f \uXXXX` and `\<any>` escapes are understood.

use indexmap::IndexMap;

/// Parses properties text; later keys overwrite earlier ones, order of first appearance is kept.
pub fn parse(text: &str) -> IndexMap<String, String> {
    let mut out = IndexMap::new();
    for line in logical_lines(text) {
        let (key, value) = split_key_value(&line);
        out.insert(unescape(key), unescape(value));
    }
    out
}

/// Writes `key=value` lines, escaping as `Properties.store` would need for a round trip.
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

/// Joins continuation lines and drops blank lines and comments.
fn logical_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current: Option<String> = None;
    for raw in text.split(['\n', '\r']) {
        let trimmed = raw.trim_start_matches([' ', '\t', '\u{c}']);
        let line = match current.take() {
            Some(mut acc) => {
                acc.push_str(trimmed);
                acc
            }
            None => {
                if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
                    continue;
                }
                trimmed.to_owned()
            }
        };
        if ends_with_odd_backslashes(&line) {
            let mut line = line;
            line.pop();
            current = Some(line);
        } else {
            lines.push(line);
        }
    }
    if let Some(rest) = current {
        lines.push(rest);
    }
    lines
}

fn ends_with_odd_backslashes(line: &str) -> bool {
    line.bytes().rev().take_while(|b| *b == b'\\').count() % 2 == 1
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
    (&line[..key_end], &line[j..])
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => out.push_str(&hex),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

fn escape_into(out: &mut String, s: &str, is_key: bool) {
    for (i, c) in s.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{c}' => out.push_str("\\f"),
            '=' | ':' | '#' | '!' if is_key || i == 0 => {
                out.push('\\');
                out.push(c);
            }
            ' ' if is_key || i == 0 => out.push_str("\\ "),
            c => out.push(c),
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
    fn write_then_parse_round_trips() {
        let entries = [("a key", "v=1"), ("path", "/tmp/x y"), ("empty", ""), ("tab", "\tz")];
        let p = parse(&write(entries.iter().map(|(k, v)| (*k, *v))));
        for (k, v) in entries {
            assert_eq!(p[k], v);
        }
    }
}
