//! `list`: each test with its target, package, snapshot status and, with
//! `--partition`, its shard; as a table or as JSON lines (`"type": "list"`).

use super::json::FORMAT_VERSION;
use super::table::grid;
use crate::case::TestCase;
use crate::partition::Partition;
use anstyle::Style;

/// One listed test.
#[derive(Debug, Clone)]
pub struct Listed {
    pub case: TestCase,
    /// Its shard, with `--partition`.
    pub shard: Option<u64>,
    /// `cpu`, `cpu (pending)`, `missing`, … (see [`crate::snapshots::status`]).
    pub snapshots: String,
}

/// The table, then a count.
pub fn render(tests: &[Listed], partition: Option<Partition>) -> String {
    let plain = Style::new();
    let rows: Vec<Vec<(String, Style)>> = tests
        .iter()
        .map(|t| {
            let mut name = t.case.name.clone();
            if t.case.ignored {
                name += " (ignored)";
            }
            let mut row = vec![
                (name, plain),
                (t.case.binary.target.clone(), plain),
                (t.case.binary.package.clone(), plain),
                (t.snapshots.clone(), plain),
            ];
            if let (Some(s), Some(p)) = (t.shard, partition) {
                row.push((format!("{s}/{}", p.total), plain));
            }
            row
        })
        .collect();
    let mut headers = vec!["TEST", "TARGET", "PACKAGE", "SNAPSHOT"];
    if partition.is_some() {
        headers.push("SHARD");
    }
    let mut out = grid(&headers, &rows, &[]);
    let noun = if tests.len() == 1 { "test" } else { "tests" };
    out += &match partition {
        Some(p) => format!("{} {noun} in partition {p}\n", tests.len()),
        None => format!("{} {noun}\n", tests.len()),
    };
    out
}

/// One JSON object per line.
pub fn render_json(tests: &[Listed]) -> String {
    tests
        .iter()
        .map(|t| {
            let line = serde_json::json!({
                "format_version": FORMAT_VERSION,
                "type": "list",
                "package": t.case.binary.package,
                "binary_id": t.case.binary.id(),
                "name": t.case.full_name(),
                "test": t.case.name,
                "ignored": t.case.ignored,
                "shard": t.shard,
                "snapshots": t.snapshots,
            });
            format!("{line}\n")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::fixtures::outcome;
    use anstream::adapter::strip_str;
    use vramtest_model::report::Status;

    fn listed() -> Vec<Listed> {
        let mut ignored = outcome("slow", Status::Passed).case;
        ignored.ignored = true;
        vec![
            Listed {
                case: outcome("adamw", Status::Passed).case,
                shard: Some(2),
                snapshots: "cpu, cuda (pending)".into(),
            },
            Listed {
                case: ignored,
                shard: Some(2),
                snapshots: "missing".into(),
            },
        ]
    }

    #[test]
    fn a_table_with_the_shard() {
        let p: Partition = "hash:2/3".parse().unwrap();
        let text = strip_str(&render(&listed(), Some(p))).to_string();
        insta::assert_snapshot!(text);
        let text = strip_str(&render(&listed()[..1], None)).to_string();
        assert!(
            text.ends_with("1 test\n") && !text.contains("SHARD"),
            "{text}"
        );
    }

    #[test]
    fn json_lines() {
        let text = render_json(&listed());
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["type"], "list");
        assert_eq!(lines[0]["name"], "mlp::vram::adamw");
        assert_eq!(lines[0]["shard"], 2);
        assert_eq!(lines[1]["ignored"], true);
        assert_eq!(lines[1]["snapshots"], "missing");
    }
}
