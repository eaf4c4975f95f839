//! containerd's config as each release line merges its files (the main
//! config and its `imports`), as data beside the upstream function each
//! rule cites. Pure: `paths::config` reads the files, bounded, and asks here
//! how the line that runs them merges a plugin's table.

/// A containerd release line whose config merge nodectl knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    V1_6,
    V1_7,
    V2_0,
    V2_1,
    V2_2,
    V2_3,
}

/// How a later file's plugin table meets an earlier file's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PluginMerge {
    /// The later file's table replaces the earlier one whole: keys the
    /// later file leaves out fall back to the plugin's defaults.
    ReplaceTable,
    /// Merged key by key: the last file with a key wins.
    ByKey,
}

/// The line of a version as the daemon reports it ("1.7.34", "v2.3.4",
/// "2.0.0-rc.1"); `None` for a line nodectl does not know (its merge could
/// be either, so a reading keyed by it is a gap, never a guess).
pub fn line_of(version: &str) -> Option<Line> {
    let version = version.trim().trim_start_matches('v');
    let mut parts = version.split(['.', '-', '+']);
    let major = parts.next()?;
    let minor = parts.next()?;
    Some(match (major, minor) {
        ("1", "6") => Line::V1_6,
        ("1", "7") => Line::V1_7,
        ("2", "0") => Line::V2_0,
        ("2", "1") => Line::V2_1,
        ("2", "2") => Line::V2_2,
        ("2", "3") => Line::V2_3,
        _ => return None,
    })
}

impl Line {
    /// (major, minor), as `model::ConfigApart` names lines.
    pub fn major_minor(self) -> (u32, u32) {
        match self {
            Line::V1_6 => (1, 6),
            Line::V1_7 => (1, 7),
            Line::V2_0 => (2, 0),
            Line::V2_1 => (2, 1),
            Line::V2_2 => (2, 2),
            Line::V2_3 => (2, 3),
        }
    }
}

/// How `line` merges a plugin's table across its config files.
///
/// 1.6 and 1.7 (`services/server/config/config.go`, `mergeConfig`, read at
/// v1.6.20 and v1.7.34): `mergo.Merge(to, from, mergo.WithOverride,
/// mergo.WithAppendSlice)` over `Plugins map[string]toml.Tree`; a
/// `toml.Tree` is opaque to mergo, so a later file's plugin replaces the
/// earlier one's whole tree.
///
/// 2.0 to 2.3 (`cmd/containerd/server/config/config.go`, `mergeConfig`,
/// read at v2.0.11 and v2.3.4): `mergo.Merge(to, from, mergo.WithOverride,
/// mergo.WithTransformers(sliceTransformer{}))` over `Plugins
/// map[string]interface{}` (2.3: `map[string]any`): nested maps are merged
/// key by key, a later file's key overriding.
pub fn plugin_merge(line: Line) -> PluginMerge {
    match line {
        Line::V1_6 | Line::V1_7 => PluginMerge::ReplaceTable,
        Line::V2_0 | Line::V2_1 | Line::V2_2 | Line::V2_3 => PluginMerge::ByKey,
    }
}

/// Which merges the lines that could run a config use: (a plugin's table
/// replaced whole by one of them, merged by key by one of them).
pub fn merges_of<'a>(lines: impl IntoIterator<Item = &'a Line>) -> (bool, bool) {
    let merges: Vec<PluginMerge> = lines.into_iter().map(|l| plugin_merge(*l)).collect();
    (
        merges.contains(&PluginMerge::ReplaceTable),
        merges.contains(&PluginMerge::ByKey),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_to_their_line_and_an_unknown_one_is_none() {
        assert_eq!(line_of("1.6.20"), Some(Line::V1_6));
        assert_eq!(line_of("v1.7.34"), Some(Line::V1_7));
        assert_eq!(line_of("2.0.0-rc.1"), Some(Line::V2_0));
        assert_eq!(line_of("v2.3.4"), Some(Line::V2_3));
        assert_eq!(line_of("1.5.18"), None);
        assert_eq!(line_of("3.0.0"), None);
        assert_eq!(line_of(""), None);
        assert_eq!(line_of("garbage"), None);
    }

    #[test]
    fn the_1x_lines_replace_a_plugin_table_and_the_2x_lines_merge_it_by_key() {
        assert_eq!(plugin_merge(Line::V1_6), PluginMerge::ReplaceTable);
        assert_eq!(plugin_merge(Line::V1_7), PluginMerge::ReplaceTable);
        for line in [Line::V2_0, Line::V2_1, Line::V2_2, Line::V2_3] {
            assert_eq!(plugin_merge(line), PluginMerge::ByKey);
        }
    }
}
