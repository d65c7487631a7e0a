//! Properties of the template syntax's literal text and its `$${` escape.

use loadlab_template::{Draw, Generator, Origin, Slot, Template};
use proptest::prelude::*;

/// Text rich in the characters the syntax cares about.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::string::string_regex("[a$${}\\\\:,é\n\r\t ]{0,40}").unwrap(),
        any::<String>(),
    ]
}

fn render(t: &Template) -> Vec<u8> {
    let mut out = Vec::new();
    t.render(&Draw::default(), &mut Generator::new(0, 0), &mut out);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Text without `${` is a literal of the same bytes, in every slot that accepts it.
    #[test]
    fn text_without_expressions_is_literal(s in text()) {
        prop_assume!(!s.contains("${"));
        prop_assert!(!Template::has_expressions(&s));
        for slot in [Slot::Url, Slot::Body, Slot::Header] {
            if slot == Slot::Header && s.contains(['\r', '\n', '\0']) {
                continue;
            }
            let t = Template::parse(&s, slot, &Origin::flag("p"), &[]).unwrap();
            prop_assert_eq!(t.as_literal(), Some(s.as_bytes()));
            prop_assert_eq!(render(&t), s.as_bytes());
        }
    }

    /// Any text with every `${` written `$${` parses back to the text itself.
    #[test]
    fn escapes_round_trip(s in text()) {
        let escaped = Template::escape(&s);
        prop_assert!(!Template::has_expressions(&escaped));
        let t = Template::parse(&escaped, Slot::Body, &Origin::flag("p"), &[]).unwrap();
        prop_assert_eq!(t.as_literal(), Some(s.as_bytes()));
    }

    /// `has_expressions` agrees with the parser: text it calls literal parses to a
    /// literal, text with an expression never does.
    #[test]
    fn has_expressions_agrees_with_parse(s in text()) {
        let columns = vec!["a".to_owned()];
        match Template::parse(&s, Slot::Body, &Origin::flag("p"), &columns) {
            Ok(t) => prop_assert_eq!(t.as_literal().is_some(), !Template::has_expressions(&s)),
            Err(_) => prop_assert!(Template::has_expressions(&s)),
        }
    }
}
