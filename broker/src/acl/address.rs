//! White remote addresses (Java's `RemoteAddressStrategyFactory`): a pattern of `plain_acl.yml`
//! (an account's `whiteRemoteAddress`, a `globalWhiteRemoteAddresses` entry) and whether a
//! client's IP matches it.
//!
//! The IPv4 forms Java takes: blank (matches nothing), `*` or `*.*.*.*` (everything), one address,
//! a list `a,b,c`, a last-octet set `192.168.1.{1,2,3}`, and a range in one octet, `*` or `m-n`,
//! after which the remaining octets are not looked at (`192.168.*`, `10.10.103.*`,
//! `192.168.1.10-20`). IPv6 addresses are taken whole (one address or a list).

use std::net::IpAddr;

#[derive(Clone, Debug, PartialEq)]
pub enum AddressRule {
    /// A blank pattern: no address is white.
    Nothing,
    /// `*`: every address.
    Everything,
    /// One or more addresses.
    Set(Vec<IpAddr>),
    /// The first `head.len()` octets equal `head`, and the next one is in `from..=to`.
    Range { head: Vec<u8>, from: u8, to: u8 },
}

fn octet(s: &str, pattern: &str) -> Result<u8, String> {
    s.trim().parse::<u8>().map_err(|_| format!("Netaddress examine scope Exception netaddress is {pattern}"))
}

fn address(s: &str) -> Result<IpAddr, String> {
    s.trim().parse::<IpAddr>().map_err(|_| format!("Netaddress examine Exception netaddress is {s}"))
}

impl AddressRule {
    /// Parses a pattern; the error is Java's `AclException` message.
    pub fn parse(pattern: &str) -> Result<AddressRule, String> {
        let p = pattern.trim();
        if p.is_empty() {
            return Ok(AddressRule::Nothing);
        }
        if p == "*" || p == "*.*.*.*" || p == "*:*:*:*:*:*:*:*" {
            return Ok(AddressRule::Everything);
        }
        if let Some(open) = p.find('{').filter(|_| p.ends_with('}')) {
            let prefix = &p[..open];
            let members = &p[open + 1..p.len() - 1];
            let last_is_set = prefix.ends_with('.') || prefix.ends_with(':');
            if !last_is_set {
                return Err(format!("MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress {pattern}"));
            }
            let addrs = members.split(',').filter(|m| !m.trim().is_empty()).map(|m| address(&format!("{prefix}{}", m.trim())));
            return addrs.collect::<Result<Vec<_>, _>>().map(AddressRule::Set);
        }
        if p.contains(',') {
            let addrs = p.split(',').filter(|m| !m.trim().is_empty()).map(address);
            return addrs.collect::<Result<Vec<_>, _>>().map(AddressRule::Set);
        }
        if p.contains('*') || (p.contains('-') && !p.contains(':')) {
            if p.contains(':') {
                return Err(format!("IPv6 ranges are not supported here: {pattern}"));
            }
            let parts: Vec<&str> = p.split('.').filter(|s| !s.is_empty()).collect();
            for (i, part) in parts.iter().enumerate().skip(1).take(3) {
                let part = part.trim();
                let range = if part == "*" {
                    Some((0, 255))
                } else if let Some((from, to)) = part.split_once('-') {
                    if from.is_empty() {
                        return Err(format!("RangeRemoteAddressStrategy netaddress examine scope Exception value {part}"));
                    }
                    let (from, to) = (octet(from, pattern)?, octet(to, pattern)?);
                    if from > to {
                        return Err(format!("RangeRemoteAddressStrategy netaddress examine scope Exception start is {from} , end is {to}"));
                    }
                    Some((from, to))
                } else {
                    None
                };
                if let Some((from, to)) = range {
                    let head = parts[..i].iter().map(|o| octet(o, pattern)).collect::<Result<Vec<_>, _>>()?;
                    return Ok(AddressRule::Range { head, from, to });
                }
            }
            return Err(format!("Netaddress examine scope Exception netaddress is {pattern}"));
        }
        address(p).map(|a| AddressRule::Set(vec![a]))
    }

    pub fn matches(&self, ip: IpAddr) -> bool {
        match self {
            AddressRule::Nothing => false,
            AddressRule::Everything => true,
            AddressRule::Set(addrs) => addrs.iter().any(|a| *a == ip || Some(*a) == ipv4_of(ip)),
            AddressRule::Range { head, from, to } => match ipv4_of(ip) {
                Some(IpAddr::V4(v4)) => {
                    let o = v4.octets();
                    o[..head.len()] == head[..] && (*from..=*to).contains(&o[head.len()])
                }
                _ => false,
            },
        }
    }
}

/// An IPv4 address, also when it arrives IPv4-mapped on an IPv6 socket.
fn ipv4_of(ip: IpAddr) -> Option<IpAddr> {
    match ip {
        IpAddr::V4(_) => Some(ip),
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn javas_pattern_forms_match_as_java_matches_them() {
        assert!(!AddressRule::parse("").unwrap().matches(ip("127.0.0.1")));
        assert!(AddressRule::parse("*").unwrap().matches(ip("10.1.2.3")));
        assert!(AddressRule::parse("192.168.0.1").unwrap().matches(ip("192.168.0.1")));
        assert!(!AddressRule::parse("192.168.0.1").unwrap().matches(ip("192.168.0.2")));
        let set = AddressRule::parse("192.168.1.{1,2}").unwrap();
        assert!(set.matches(ip("192.168.1.2")) && !set.matches(ip("192.168.1.3")));
        let list = AddressRule::parse("10.0.0.1,10.0.0.9").unwrap();
        assert!(list.matches(ip("10.0.0.9")) && !list.matches(ip("10.0.0.8")));
        let last = AddressRule::parse("10.10.103.*").unwrap();
        assert!(last.matches(ip("10.10.103.77")) && !last.matches(ip("10.10.104.77")));
        // Java looks at the first wildcard octet only: the rest is not checked.
        let third = AddressRule::parse("192.168.*").unwrap();
        assert!(third.matches(ip("192.168.5.7")) && !third.matches(ip("192.169.5.7")));
        let range = AddressRule::parse("192.168.1.10-20").unwrap();
        assert!(range.matches(ip("192.168.1.15")) && !range.matches(ip("192.168.1.21")));
        assert!(AddressRule::parse("::1").unwrap().matches(ip("::1")));
        assert!(AddressRule::parse("127.0.0.1").unwrap().matches(ip("::ffff:127.0.0.1")));
    }

    #[test]
    fn bad_patterns_are_refused_with_javas_messages() {
        for bad in ["192.168.1.300", "nonsense", "192.168.1.{1,x}", "192.168.1.-5", "192.168.1.20-10", "1.2.3.4{5}"] {
            assert!(AddressRule::parse(bad).is_err(), "{bad}");
        }
    }
}
