//! The book's table of diagnosis rules (docs/src/diagnosis.md) is the rule table's own
//! Markdown: a rule added or changed in `crates/lab/src/diagnosis/rules/` changes the page
//! with it
//! (`LOADLAB_BLESS=1 cargo test -p loadlab-lab --test readme_rules` rewrites the block).

use std::path::Path;

const BEGIN: &str = "<!-- rules: generated from crates/lab/src/diagnosis/rules (LOADLAB_BLESS=1 cargo test -p loadlab-lab --test readme_rules rewrites it) -->\n";
const END: &str = "<!-- rules:end -->\n";

#[test]
fn the_book_lists_the_rules_of_the_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/diagnosis.md");
    let page = std::fs::read_to_string(&path).unwrap();
    let start = page
        .find(BEGIN)
        .expect("the rules block of docs/src/diagnosis.md")
        + BEGIN.len();
    let end = start + page[start..].find(END).expect("the end of the rules block");
    let table = loadlab_lab::diagnosis::rules::markdown_table();
    if page[start..end] != table {
        if std::env::var_os("LOADLAB_BLESS").is_some() {
            let new = format!("{}{table}{}", &page[..start], &page[end..]);
            std::fs::write(&path, new).unwrap();
            return;
        }
        panic!(
            "docs/src/diagnosis.md's table of rules differs from the rule table; run \
             `LOADLAB_BLESS=1 cargo test -p loadlab-lab --test readme_rules`\n--- docs/src/diagnosis.md\n{}\n--- table\n{table}",
            &page[start..end]
        );
    }
}
