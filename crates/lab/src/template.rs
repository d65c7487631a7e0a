//! `{placeholder}` templates in commands, URLs and environment values. `{{` and `}}` stand
//! for literal braces.

use std::collections::BTreeSet;

/// Renders `text`, asking `lookup` for each placeholder; unknown ones are left as written.
pub fn render(text: &str, lookup: &mut dyn FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let c = rest.as_bytes()[i];
        let after = &rest[i + 1..];
        if after.as_bytes().first() == Some(&c) {
            out.push(c as char);
            rest = &after[1..];
            continue;
        }
        if c == b'{' {
            if let Some(end) = after.find('}') {
                let name = &after[..end];
                match lookup(name) {
                    Some(v) => out.push_str(&v),
                    None => {
                        out.push('{');
                        out.push_str(name);
                        out.push('}');
                    }
                }
                rest = &after[end + 1..];
                continue;
            }
        }
        out.push(c as char);
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Placeholders used in `text`.
pub fn placeholders(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    render(text, &mut |name| {
        found.push(name.to_string());
        None
    });
    found
}

/// Checks that every placeholder in `text` is known.
pub fn check(text: &str, known: &BTreeSet<String>) -> Result<(), String> {
    match placeholders(text).into_iter().find(|p| !known.contains(p)) {
        Some(p) => Err(format!("unknown placeholder {{{p}}}")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_and_escapes() {
        let mut f = |n: &str| (n == "port").then(|| "8080".to_string());
        assert_eq!(render("127.0.0.1:{port}/x", &mut f), "127.0.0.1:8080/x");
        assert_eq!(render("{{literal}} {port}", &mut f), "{literal} 8080");
        assert_eq!(render("{missing}", &mut f), "{missing}");
        assert_eq!(placeholders("a {x} b {y}"), vec!["x", "y"]);
        let known: BTreeSet<String> = ["x".to_string()].into();
        assert!(check("{x}", &known).is_ok());
        assert_eq!(
            check("{x}{z}", &known).unwrap_err(),
            "unknown placeholder {z}"
        );
    }
}
