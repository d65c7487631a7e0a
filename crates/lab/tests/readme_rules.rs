//! The README's table of diagnosis rules is the rule table's own Markdown: a rule added or
//! changed in `crates/lab/src/diagnosis/rules/` changes the README with it
//! (`LOADLAB_BLESS=1 cargo test -p loadlab-lab --test readme_rules` rewrites the block).

use std::path::Path;

const BEGIN: &str = "<!-- rules: generated from crates/lab/src/diagnosis/rules (LOADLAB_BLESS=1 cargo test -p loadlab-lab --test readme_rules rewrites it) -->\n";
const END: &str = "<!-- rules:end -->\n";

#[test]
fn the_readme_lists_the_rules_of_the_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let start = readme.find(BEGIN).expect("the README's rules block") + BEGIN.len();
    let end = start
        + readme[start..]
            .find(END)
            .expect("the end of the rules block");
    let table = loadlab_lab::diagnosis::rules::markdown_table();
    if readme[start..end] != table {
        if std::env::var_os("LOADLAB_BLESS").is_some() {
            let new = format!("{}{table}{}", &readme[..start], &readme[end..]);
            std::fs::write(&path, new).unwrap();
            return;
        }
        panic!(
            "README.md's table of rules differs from the rule table; run \
             `LOADLAB_BLESS=1 cargo test -p loadlab-lab --test readme_rules`\n--- README\n{}\n--- table\n{table}",
            &readme[start..end]
        );
    }
}
