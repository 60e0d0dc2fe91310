//! `docs/configuration.md`'s settings table against the code's one declaration of each
//! setting (`gsrelay::serve::settings`): the same rows in the same order, each with the
//! same file key, flag, environment variable and default. The meaning column is prose
//! and is not compared.

use gsrelay::serve::{Setting, SettingDefault, settings};
use std::collections::BTreeSet;
use std::path::Path;

const DOC: &str = "docs/configuration.md";
const SECTION: &str = "## Configuration reference";
const HEADER: &str = "| file key | flag | environment | default | meaning |";
const COLUMNS: [&str; 4] = ["file key", "flag", "environment", "default"];
/// What a cell shows for a setting without a key, flag or variable.
const NONE: &str = "—";

/// One row of the table: its line number, then its first four cells as written.
struct Row {
    line: usize,
    cells: [String; 4],
}

impl Row {
    /// What names the row: its key, or for `--config` (no key) its flag.
    fn id(&self) -> &str {
        id(&self.cells)
    }
}

/// The settings table of the reference section, rows in order.
fn documented() -> Vec<Row> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DOC);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{DOC}: {e}"));
    let section = text
        .find(SECTION)
        .unwrap_or_else(|| panic!("{DOC} has no {SECTION:?} section"));
    let start = text[..section].lines().count();
    let mut lines = text[section..]
        .lines()
        .enumerate()
        .map(|(i, l)| (start + i + 1, l));
    lines
        .by_ref()
        .find(|(_, l)| l.trim() == HEADER)
        .unwrap_or_else(|| panic!("{DOC}: no table headed {HEADER:?} under {SECTION:?}"));
    lines
        .skip(1) // the |---| line
        .take_while(|(_, l)| l.starts_with('|'))
        .map(|(line, l)| {
            let cells: Vec<String> = l.split('|').skip(1).map(|c| c.trim().to_owned()).collect();
            assert!(
                cells.len() > COLUMNS.len(),
                "{DOC}:{line}: fewer than {} cells: {l}",
                COLUMNS.len() + 1
            );
            Row {
                line,
                cells: std::array::from_fn(|i| cells[i].clone()),
            }
        })
        .collect()
}

fn code(s: &str) -> String {
    format!("`{s}`")
}

/// The four cells the reference should show for `setting`.
fn expected(setting: &Setting) -> [String; 4] {
    let cell = |v: &Option<String>| v.as_deref().map_or_else(|| NONE.to_owned(), code);
    [
        cell(&setting.key),
        cell(&setting.flag),
        cell(&setting.env),
        match &setting.default {
            SettingDefault::Value(v) => code(v),
            SettingDefault::Unset(what) => what.clone(),
        },
    ]
}

/// What names a row: its key, or its flag when it has none (`--config`).
fn id(cells: &[String; 4]) -> &str {
    if cells[0] == NONE {
        &cells[1]
    } else {
        &cells[0]
    }
}

#[test]
fn the_settings_table_is_the_declaration() {
    let rows = documented();
    let settings: Vec<[String; 4]> = settings().iter().map(expected).collect();
    let mut problems = Vec::new();

    for want in &settings {
        match rows.iter().find(|r| r.id() == id(want)) {
            None => problems.push(format!(
                "{} is not in the table; its row begins: | {} |",
                id(want),
                want.join(" | ")
            )),
            Some(row) => {
                for (column, (doc, code)) in COLUMNS.iter().zip(row.cells.iter().zip(want)) {
                    if doc != code {
                        problems.push(format!(
                            "{DOC}:{}: {}: the {column} is {doc} in the table but {code} in \
                             the code",
                            row.line,
                            row.id()
                        ));
                    }
                }
            }
        }
    }
    let declared: BTreeSet<&str> = settings.iter().map(id).collect();
    for row in &rows {
        if !declared.contains(row.id()) {
            problems.push(format!(
                "{DOC}:{}: {} is no setting of the code",
                row.line,
                row.id()
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for row in &rows {
        if !seen.insert(row.id()) {
            problems.push(format!("{DOC}:{}: {} is listed twice", row.line, row.id()));
        }
    }
    if problems.is_empty() {
        // Same rows: then the same order, the declaration's (the sections of `--help`).
        let doc_order: Vec<&str> = rows.iter().map(Row::id).collect();
        let code_order: Vec<&str> = settings.iter().map(id).collect();
        if doc_order != code_order {
            problems.push(format!(
                "the table's rows are not in the declaration's order, which is:\n  {}",
                code_order.join("\n  ")
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{DOC}'s settings table and the code disagree (the code's behaviour is the truth; \
         the settings are declared in crates/server/src/config/mod.rs):\n- {}",
        problems.join("\n- ")
    );
}

/// The parser above reads what the test compares: a table with a row per setting, not
/// an empty match that would pass by comparing nothing.
#[test]
fn the_table_is_found_and_read() {
    let rows = documented();
    assert!(rows.len() > 50, "{} rows", rows.len());
    let udp = rows
        .iter()
        .find(|r| r.id() == "`udp_max_queue_delay_ms`")
        .expect("udp_max_queue_delay_ms");
    assert_eq!(
        udp.cells[1..],
        [
            "`--udp-max-queue-delay-ms`",
            "`GSRELAY_UDP_MAX_QUEUE_DELAY_MS`",
            "`5`"
        ]
    );
}
