//! Session variables: `${NAME}` naming a value a flow took from an earlier response.

use loadlab_template::{Draw, Generator, Origin, Slot, Template};

fn vars() -> Vec<String> {
    vec!["token".into(), "next".into()]
}

fn render(t: &Template, values: &[Box<str>]) -> String {
    let mut out = Vec::new();
    let draw = Draw::new(7, None).with_vars(values);
    t.render(&draw, &mut Generator::new(1, 0), &mut out);
    String::from_utf8(out).unwrap()
}

fn compile(text: &str, slot: Slot) -> Result<Template, loadlab_template::TemplateError> {
    Template::compile_session(text, slot, &Origin::flag("step"), None, &vars())
}

#[test]
fn a_variable_renders_its_value_per_slot() {
    let values: Vec<Box<str>> = vec!["a b/c".into(), "/page/2".into()];
    let url = compile("/flow${next}?t=${token}&n=${seq}", Slot::Url).unwrap();
    assert!(url.uses_vars() && url.uses_seq());
    // In a URL the value is percent-encoded as a column's is ('/' stays).
    assert_eq!(render(&url, &values), "/flow/page/2?t=a%20b/c&n=7");
    let body = compile("{\"t\":\"${token}\"}", Slot::Body).unwrap();
    assert_eq!(render(&body, &values), "{\"t\":\"a b/c\"}");
    // A header never carries a line break or a NUL, whatever a response gave.
    let header = compile("Bearer ${token}", Slot::Header).unwrap();
    let bad: Vec<Box<str>> = vec!["x\r\ny\0z".into(), String::new().into()];
    assert_eq!(render(&header, &bad), "Bearer xyz");
}

#[test]
fn a_variable_not_set_yet_renders_as_nothing() {
    let t = compile("<${token}>", Slot::Body).unwrap();
    let mut out = Vec::new();
    t.render(&Draw::new(1, None), &mut Generator::new(1, 0), &mut out);
    assert_eq!(out, b"<>");
    // Its length is not known before the run.
    assert_eq!(t.max_len(None), 2);
}

#[test]
fn without_variables_a_template_does_not_use_any() {
    let t = compile("/health?n=${seq}", Slot::Url).unwrap();
    assert!(!t.uses_vars());
    let plain = Template::parse("/${token}", Slot::Url, &Origin::flag("--url"), &[]);
    let err = plain.unwrap_err().to_string();
    assert!(
        err.contains("unknown name `${token}`") && !err.contains("session"),
        "{err}"
    );
}

#[test]
fn an_unknown_name_lists_the_sessions_variables_and_an_argument_is_refused() {
    let err = compile("/${tokn}", Slot::Url).unwrap_err().to_string();
    assert!(
        err.contains("unknown name `${tokn}`")
            && err.contains("the session's variables (taken by earlier requests) are token, next"),
        "{err}"
    );
    let err = compile("/${token:3}", Slot::Url).unwrap_err().to_string();
    assert!(
        err.contains("the session variable `token` takes no argument: write `${token}`"),
        "{err}"
    );
}
