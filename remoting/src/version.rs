//! Java's `MQVersion.Version`: the `version` every command carries is an ordinal of that enum.

/// `MQVersion.getVersionDesc(version)`: the enum constant's name, e.g. 479 -> "V5_3_3".
///
/// From 4.0.0 on the enum is regular (a SNAPSHOT and a release per x.y.z, 4.0.0 through 5.9.9);
/// the 3.x prefix is not, and is spelled out in [`V3_NAMES`] and [`v3_name`].
pub fn version_desc(version: i32) -> String {
    const V4_0_0_SNAPSHOT: i32 = 212;
    const HIGHER_VERSION: i32 = 612;
    match version {
        v if v >= HIGHER_VERSION => "HIGHER_VERSION".to_owned(),
        v if v >= V4_0_0_SNAPSHOT => {
            let step = (v - V4_0_0_SNAPSHOT) / 2;
            let (major, minor, patch) = (4 + step / 100, step / 10 % 10, step % 10);
            let snapshot = if (v - V4_0_0_SNAPSHOT) % 2 == 0 { "_SNAPSHOT" } else { "" };
            format!("V{major}_{minor}_{patch}{snapshot}")
        }
        // Java indexes the array, so a negative ordinal throws; the number is the best we can say.
        v if v < 0 => v.to_string(),
        v => v3_name(v),
    }
}

/// 3.0.0's pre-releases, ordinals 0 to 15.
const V3_NAMES: [&str; 16] = [
    "V3_0_0_SNAPSHOT",
    "V3_0_0_ALPHA1",
    "V3_0_0_BETA1",
    "V3_0_0_BETA2",
    "V3_0_0_BETA3",
    "V3_0_0_BETA4",
    "V3_0_0_BETA5",
    "V3_0_0_BETA6_SNAPSHOT",
    "V3_0_0_BETA6",
    "V3_0_0_BETA7_SNAPSHOT",
    "V3_0_0_BETA7",
    "V3_0_0_BETA8_SNAPSHOT",
    "V3_0_0_BETA8",
    "V3_0_0_BETA9_SNAPSHOT",
    "V3_0_0_BETA9",
    "V3_0_0_FINAL",
];

/// Ordinals 0 to 211: 3.0.0's pre-releases, then pairs for 3.0.1-3.0.15 (16-45), 3.1.0-3.2.9
/// (46-85) and 3.3.1-3.9.9, whose patch numbers start at 1 (86-211).
fn v3_name(v: i32) -> String {
    let pair = |base: i32| ((v - base) / 2, if (v - base) % 2 == 0 { "_SNAPSHOT" } else { "" });
    let (minor, patch, snapshot) = match v {
        0..=15 => return V3_NAMES[v as usize].to_owned(),
        16..=45 => {
            let (i, s) = pair(16);
            (0, i + 1, s)
        }
        46..=85 => {
            let (i, s) = pair(46);
            (1 + i / 10, i % 10, s)
        }
        _ => {
            let (i, s) = pair(86);
            (3 + i / 9, 1 + i % 9, s)
        }
    };
    format!("V3_{minor}_{patch}{snapshot}")
}

#[cfg(test)]
mod tests {
    use super::version_desc;

    #[test]
    fn ordinals_name_the_versions_java_names() {
        // Ordinals read off Java 5.3.3's MQVersion.Version.
        for (ordinal, name) in [
            (0, "V3_0_0_SNAPSHOT"),
            (15, "V3_0_0_FINAL"),
            (16, "V3_0_1_SNAPSHOT"),
            (45, "V3_0_15"),
            (46, "V3_1_0_SNAPSHOT"),
            (67, "V3_2_0"),
            (85, "V3_2_9"),
            (86, "V3_3_1_SNAPSHOT"),
            (105, "V3_4_1"),
            (211, "V3_9_9"),
            (212, "V4_0_0_SNAPSHOT"),
            (407, "V4_9_7"),
            (409, "V4_9_8"),
            (413, "V5_0_0"),
            (479, "V5_3_3"),
            (611, "V5_9_9"),
            (612, "HIGHER_VERSION"),
            (10_000, "HIGHER_VERSION"),
        ] {
            assert_eq!(version_desc(ordinal), name, "ordinal {ordinal}");
        }
    }
}
