//! The credentials a 5.x gRPC client signs its requests with (`rocketmq-client-java`'s `Signature`):
//! `authorization: MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time, Signature=<HEX>`,
//! the signature being HMAC-SHA1 of the `x-mq-date-time` header under the secret key, in hex.
//! Read here; checked by the backend against its accounts when ACL is on.

use tonic::metadata::MetadataMap;

const AUTHORIZATION: &str = "authorization";
const DATE_TIME: &str = "x-mq-date-time";
const ALGORITHM: &str = "MQv2-HMAC-SHA1";

/// One request's credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub access_key: String,
    /// Hex, as the client wrote it.
    pub signature: String,
    /// What was signed.
    pub date_time: String,
}

/// The request's credentials: `None` when it has none (or not in the client's form).
pub fn credentials(metadata: &MetadataMap) -> Option<Credentials> {
    let header = metadata.get(AUTHORIZATION)?.to_str().ok()?;
    let rest = header.strip_prefix(ALGORITHM)?.trim_start();
    let (mut access_key, mut signature) = (None, None);
    for part in rest.split(',') {
        match part.trim().split_once('=') {
            Some(("Credential", v)) => access_key = Some(v.trim().to_owned()),
            Some(("Signature", v)) => signature = Some(v.trim().to_owned()),
            _ => {}
        }
    }
    let date_time = metadata.get(DATE_TIME)?.to_str().ok()?.to_owned();
    Some(Credentials { access_key: access_key.filter(|a| !a.is_empty())?, signature: signature?, date_time })
}

/// Whether `c` was signed with `secret_key` (hex compared without regard to case).
pub fn signature_matches(c: &Credentials, secret_key: &str) -> bool {
    use hmac::{Hmac, KeyInit, Mac};
    let Ok(mut mac) = Hmac::<sha1::Sha1>::new_from_slice(secret_key.as_bytes()) else { return false };
    mac.update(c.date_time.as_bytes());
    let expected: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02X}")).collect();
    expected.eq_ignore_ascii_case(&c.signature)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_java_clients_header_is_read_and_its_signature_checked() {
        let mut m = MetadataMap::new();
        m.insert(DATE_TIME, "20261202T120000Z".parse().unwrap());
        // HMAC-SHA1("20261202T120000Z") under "secret", upper-case hex as the Java client writes it.
        let sig = {
            use hmac::{Hmac, KeyInit, Mac};
            let mut mac = Hmac::<sha1::Sha1>::new_from_slice(b"secret").unwrap();
            mac.update(b"20261202T120000Z");
            mac.finalize().into_bytes().iter().map(|b| format!("{b:02X}")).collect::<String>()
        };
        let header = format!("MQv2-HMAC-SHA1 Credential=AK1, SignedHeaders=x-mq-date-time, Signature={sig}");
        m.insert(AUTHORIZATION, header.parse().unwrap());
        let c = credentials(&m).expect("read");
        assert_eq!((c.access_key.as_str(), c.date_time.as_str()), ("AK1", "20261202T120000Z"));
        assert!(signature_matches(&c, "secret"));
        assert!(!signature_matches(&c, "other"));
        m.insert(AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(credentials(&m), None);
    }
}
