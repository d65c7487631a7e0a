//! Request names from paths, identifiers folded, so that a log's many `/users/123` and
//! `/users/456` are one endpoint, `/users/{id}`, in results, SLOs and the why.
//!
//! A path segment is folded when it is all digits (`{id}`), a UUID (`{uuid}`), or at least
//! 8 hexadecimal characters with a digit among them (`{hex}`: hashes, object ids); the
//! query string is left out of the name.

/// The name of `target` (a path with or without its query).
pub fn fold(target: &str) -> String {
    let path = target.split(['?', '#']).next().unwrap_or("");
    // An absolute URL (a proxy's log): its path.
    let path = match path.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => path,
    };
    if path.is_empty() {
        return "/".into();
    }
    path.split('/')
        .map(|seg| match kind(seg) {
            Some(k) => k,
            None => seg,
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn kind(seg: &str) -> Option<&'static str> {
    let b = seg.as_bytes();
    if b.is_empty() {
        return None;
    }
    if b.iter().all(u8::is_ascii_digit) {
        return Some("{id}");
    }
    let uuid = b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        });
    if uuid {
        return Some("{uuid}");
    }
    if b.len() >= 8 && b.iter().all(u8::is_ascii_hexdigit) && b.iter().any(u8::is_ascii_digit) {
        return Some("{hex}");
    }
    None
}

/// A rule that names the requests whose path it matches (`--name-rule`, `name_rules` in a
/// plan), tried before the folding: `^/static/=static` names every request under `/static/`
/// `static`; the name may use the pattern's groups (`^/api/(v\d+)/=api $1`).
#[derive(Clone, Debug)]
pub struct NameRule {
    re: regex::Regex,
    name: String,
}

/// Why a rule cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("name rule {given:?}: {why}")]
pub struct NameRuleError {
    given: String,
    why: String,
}

impl std::str::FromStr for NameRule {
    type Err = NameRuleError;

    /// `PATTERN=NAME`, split at the last `=` (a pattern may hold one, a name may not).
    fn from_str(s: &str) -> Result<NameRule, NameRuleError> {
        let err = |why: String| NameRuleError {
            given: s.to_string(),
            why,
        };
        let (pattern, name) = s
            .rsplit_once('=')
            .ok_or_else(|| err("not PATTERN=NAME (e.g. `^/static/=static`)".into()))?;
        if name.trim().is_empty() {
            return Err(err("the name after `=` is empty".into()));
        }
        let re = regex::Regex::new(pattern).map_err(|e| err(e.to_string()))?;
        Ok(NameRule {
            re,
            name: name.trim().to_string(),
        })
    }
}

/// The name of `target`: the first rule whose pattern its path matches (its groups expanded
/// into the rule's name), else [`fold`].
pub fn name(target: &str, rules: &[NameRule]) -> String {
    let path = target.split(['?', '#']).next().unwrap_or("");
    for r in rules {
        if let Some(c) = r.re.captures(path) {
            let mut out = String::new();
            c.expand(&r.name, &mut out);
            return out;
        }
    }
    fold(target)
}

#[cfg(test)]
mod tests {
    use super::{fold, name, NameRule};

    #[test]
    fn rules_name_what_folding_cannot_in_order() {
        let rules: Vec<NameRule> = ["^/static/=static", "^/api/(v[0-9]+)/=api $1", "^/x=x"]
            .iter()
            .map(|r| r.parse().unwrap())
            .collect();
        assert_eq!(name("/static/app.9f3a.js?v=2", &rules), "static");
        assert_eq!(name("/api/v2/users/7", &rules), "api v2");
        assert_eq!(name("/users/7", &rules), "/users/{id}");
        // A pattern with an `=` in it: split at the last one.
        let r: NameRule = "^/a=b=ab".parse().unwrap();
        assert_eq!(name("/a=b/c", &[r]), "ab");
        for bad in ["static", "^/(=x", "^/a="] {
            assert!(bad.parse::<NameRule>().is_err(), "{bad}");
        }
    }

    #[test]
    fn identifiers_are_folded_and_words_kept() {
        assert_eq!(fold("/users/123/orders/9?x=1"), "/users/{id}/orders/{id}");
        assert_eq!(fold("/o/123e4567-e89b-12d3-a456-426614174000"), "/o/{uuid}");
        assert_eq!(fold("/blob/5f3a9c0d12ab"), "/blob/{hex}");
        // Words stay, hexadecimal-looking ones too when no digit says otherwise.
        assert_eq!(fold("/cafe/deadbeef/api/v2"), "/cafe/deadbeef/api/v2");
        assert_eq!(fold("/"), "/");
        assert_eq!(fold(""), "/");
        assert_eq!(fold("http://shop.example/items/42"), "/items/{id}");
    }
}
