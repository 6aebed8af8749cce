//! Messages as the store writes them: the commit-log record codec (also what pull, query and view
//! responses carry), the properties string, message ids, and Java's string hash for tags and keys.

pub mod properties;
pub mod record;

pub use record::{decode_record, encode_record, DecodedRecord, EncodedRecord, MessageToStore, RecordAt, RecordError, StampedFields};

/// Java `String.hashCode()`: 31*h + c over UTF-16 code units, wrapping i32.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32))
}

/// The consume-queue tags code of a `TAGS` value: its Java hash, sign-extended; 0 without tags.
pub fn tags_code(tags: Option<&str>) -> i64 {
    tags.filter(|t| !t.is_empty()).map_or(0, |t| java_string_hash(t) as i64)
}

/// The offset message id: upper-case hex of store IP, store port (i32) and physical offset (i64).
pub fn offset_message_id(store_host: std::net::SocketAddr, physical_offset: i64) -> String {
    let mut bytes = Vec::with_capacity(28);
    match store_host.ip() {
        std::net::IpAddr::V4(ip) => bytes.extend_from_slice(&ip.octets()),
        std::net::IpAddr::V6(ip) => bytes.extend_from_slice(&ip.octets()),
    }
    bytes.extend_from_slice(&(store_host.port() as i32).to_be_bytes());
    bytes.extend_from_slice(&physical_offset.to_be_bytes());
    upper_hex(&bytes)
}

/// Upper-case hex without a formatting call per byte (ids are built on every put).
pub fn upper_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 0xF) as usize] as char);
    }
    out
}

/// Decodes an offset message id into the store address and physical offset (32 hex chars: IPv4).
pub fn decode_offset_message_id(id: &str) -> Option<(std::net::SocketAddr, i64)> {
    let bytes: Vec<u8> = (0..id.len())
        .step_by(2)
        .map(|i| id.get(i..i + 2).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit())).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect::<Option<_>>()?;
    let ip_len = match bytes.len() {
        16 => 4,
        28 => 16,
        _ => return None,
    };
    let ip: std::net::IpAddr = if ip_len == 4 {
        std::net::Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]).into()
    } else {
        let octets: [u8; 16] = bytes[..16].try_into().ok()?;
        std::net::Ipv6Addr::from(octets).into()
    };
    let port = i32::from_be_bytes(bytes[ip_len..ip_len + 4].try_into().ok()?);
    let offset = i64::from_be_bytes(bytes[ip_len + 4..ip_len + 12].try_into().ok()?);
    Some((std::net::SocketAddr::new(ip, u16::try_from(port).ok()?), offset))
}

/// The numbered message the crash tests append and check (`store-append-probe`).
pub fn probe_message(n: usize) -> MessageToStore {
    MessageToStore {
        topic: format!("Crash{}", n % 3),
        queue_id: (n % 2) as i32,
        flag: n as i32,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000 + n as i64,
        born_host: std::net::SocketAddr::from(([127, 0, 0, 1], 40000)),
        store_host: std::net::SocketAddr::from(([127, 0, 0, 1], 10911)),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: bytes::Bytes::from(format!("message {n} ").repeat(1 + n % 40)),
        properties: properties::serialize([("KEYS", format!("n{n}").as_str()), ("TAGS", "Crash")]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_known_values() {
        assert_eq!(java_string_hash("TagA"), 2598919);
        assert_eq!(java_string_hash("*"), 42);
        assert_eq!(java_string_hash(""), 0);
        // Non-BMP characters hash as two UTF-16 units.
        assert_eq!(java_string_hash("😀"), 0xd83d * 31 + 0xde00);
        assert_eq!(tags_code(None), 0);
    }

    #[test]
    fn offset_ids_match_the_reference_example_and_decode_back() {
        let host: std::net::SocketAddr = "192.168.0.1:10911".parse().unwrap();
        let id = offset_message_id(host, 3900);
        assert_eq!(id, "C0A8000100002A9F0000000000000F3C");
        assert_eq!(decode_offset_message_id(&id), Some((host, 3900)));
        assert_eq!(decode_offset_message_id("zz"), None);
        // `from_str_radix` alone would read "+F" as 0x0F.
        assert_eq!(decode_offset_message_id("+F00000100002A9F000000000001E240"), None);
    }
}
