//! `{placeholder}` templates in commands, URLs and environment values. `{{` and `}}` stand
//! for literal braces. `${...}` (and `$${...}`) is the request templates' syntax, rendered
//! per request by the engine: this renderer leaves it as written, so a plan's `{port}` and a
//! request's `${seq}` never collide.

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
        if c == b'{' && out.ends_with('$') {
            // A request template's `${...}`: copied whole (a `\}` inside is not its end).
            let end = request_expr_end(after);
            out.push('{');
            out.push_str(&after[..end]);
            rest = &after[end..];
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

/// Where the `${...}` whose text after `{` is `after` ends: just past its `}`, or the end
/// of `after` if it is not closed (the engine reports that).
fn request_expr_end(after: &str) -> usize {
    let b = after.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'}' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// `text` as plan text that renders to itself: braces doubled, except in request
/// templates (`${...}`), which the renderer leaves as written.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let c = rest.as_bytes()[i];
        let after = &rest[i + 1..];
        if c == b'{' && out.ends_with('$') {
            let end = request_expr_end(after);
            out.push('{');
            out.push_str(&after[..end]);
            rest = &after[end..];
            continue;
        }
        out.push(c as char);
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

    #[test]
    fn request_templates_are_left_as_written() {
        let mut f = |n: &str| (n == "port").then(|| "8080".to_string());
        assert_eq!(
            render("http://h:{port}/u/${id}?s=${seq}", &mut f),
            "http://h:8080/u/${id}?s=${seq}"
        );
        assert_eq!(render("$${port} {port}", &mut f), "$${port} 8080");
        assert_eq!(
            render("${pick:a\\},b} {port}", &mut f),
            "${pick:a\\},b} 8080"
        );
        assert_eq!(render("${open", &mut f), "${open");
        assert!(placeholders("${seq} {x} ${id}") == vec!["x"]);
        for text in [
            "/a/{b}/${id}?x={{y}}",
            "${pick:a\\},b}{z}",
            "plain",
            "}{",
            "$${seq}",
        ] {
            assert_eq!(render(&escape(text), &mut f), text, "{text}");
        }
    }
}
