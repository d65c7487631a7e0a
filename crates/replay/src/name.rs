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

#[cfg(test)]
mod tests {
    use super::fold;

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
