//! The pieces together, as the engine will use them: a flow read from TOML, its templates
//! compiled with the flow's variables, sessions walking it against an in-process imitation
//! of the scenario target's `/flow` server (login, pages, logout: a bearer token, a session
//! cookie and a csrf value carried from reply to request). No network.

use std::collections::HashMap;

use loadlab_session::{apply_all, CookieJar, Flow, Vars};
use loadlab_template::{Data, Draw, Generator, Origin, Slot, Template};
use rand::rngs::SmallRng;
use rand::SeedableRng;

const FLOW: &str = r#"
think = "1s"

[[steps]]
name = "login"
method = "POST"
path = "/flow/login"
headers = { Content-Type = "application/json" }
body = '{"user": "${user}"}'
extract = [
    { var = "token", json = "/token" },
    { var = "next", jsonpath = "$.next" },
    { var = "csrf", json = "/csrf" },
]

[[steps]]
loop = 3
steps = [
    { name = "page", path = "${next}", headers = { Authorization = "Bearer ${token}" }, think = { uniform = ["500ms", "1.5s"] }, extract = [
        { var = "csrf", regex = 'name="csrf" value="([^"]+)"' },
        { var = "next", regex = '<a rel="next" href="([^"]+)">' },
    ] },
]

[[steps]]
name = "logout"
method = "POST"
path = "/flow/logout"
headers = { Authorization = "Bearer ${token}", Content-Type = "application/json" }
body = '{"csrf": "${csrf}"}'
think = "0s"
extract = [{ var = "after", header = "Location" }]
"#;

/// An imitation of the scenario target's `/flow` server: enough of its rules to fail a
/// session that carries a value wrong.
#[derive(Default)]
struct Server {
    /// token → (session id, last csrf, logged out).
    sessions: HashMap<String, (String, String, bool)>,
    counter: u32,
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: String::new(),
        }
    }
}

impl Server {
    fn fresh(&mut self, what: &str) -> String {
        self.counter += 1;
        format!("{what}{:04}", self.counter)
    }

    fn handle(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: &str,
    ) -> Reply {
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        if (method, path) == ("POST", "/flow/login") {
            let user: serde_json::Value = serde_json::from_str(body).unwrap();
            assert_eq!(user["user"], "ann");
            let (token, sid, csrf) = (self.fresh("t"), self.fresh("s"), self.fresh("c"));
            self.sessions
                .insert(token.clone(), (sid.clone(), csrf.clone(), false));
            return Reply {
                status: 200,
                headers: vec![(
                    "Set-Cookie".into(),
                    format!("flow_sid={sid}; Path=/flow; HttpOnly"),
                )],
                body: format!(
                    r#"{{"token":"{token}","user":"ann","next":"/flow/page/1","csrf":"{csrf}"}}"#
                ),
            };
        }
        let Some(token) = header("Authorization").and_then(|a| a.strip_prefix("Bearer ")) else {
            return Reply::status(401);
        };
        let fresh_csrf = self.fresh("c");
        let Some((sid, csrf, out)) = self.sessions.get_mut(token) else {
            return Reply::status(401);
        };
        if *out {
            return Reply::status(401);
        }
        if header("Cookie") != Some(&format!("flow_sid={sid}")) {
            return Reply::status(403);
        }
        if let Some(n) = path.strip_prefix("/flow/page/") {
            let n: u32 = n.parse().unwrap();
            *csrf = fresh_csrf;
            return Reply {
                status: 200,
                headers: vec![("Content-Type".into(), "text/html".into())],
                body: format!(
                    r#"<p>page {n}</p><input name="csrf" value="{csrf}" type="hidden"><a rel="next" href="/flow/page/{}">"#,
                    n + 1
                ),
            };
        }
        if (method, path) == ("POST", "/flow/logout") {
            let sent: serde_json::Value = serde_json::from_str(body).unwrap();
            if sent["csrf"] != csrf.as_str() {
                return Reply::status(403);
            }
            *out = true;
            return Reply {
                status: 200,
                headers: vec![
                    (
                        "Set-Cookie".into(),
                        "flow_sid=; Path=/flow; Max-Age=0".into(),
                    ),
                    ("Location".into(), "/flow/login".into()),
                ],
                body: r#"{"user":"ann","next":"/flow/login"}"#.into(),
            };
        }
        Reply::status(404)
    }
}

/// A step's templates, compiled once.
struct Compiled {
    method: Template,
    path: Template,
    headers: Vec<(String, Template)>,
    body: Template,
}

fn render(t: &Template, draw: &Draw<'_>, gen: &mut Generator) -> String {
    let mut out = Vec::new();
    t.render(draw, gen, &mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn sessions_carry_token_cookie_and_csrf_through_the_flow() {
    let flow: Flow = toml::from_str(FLOW).unwrap();
    let data = Data::from_rows("users.csv", vec!["user".into()], vec![vec!["ann".into()]]).unwrap();
    let columns = data.columns().to_vec();
    assert_eq!(flow.variables_used_before_set(&columns), []);
    assert_eq!(flow.variables_named_like_columns(&columns), []);

    // Compiled once, with the flow's variables: the slots Vars keeps.
    let names = flow.variables();
    assert_eq!(names, ["token", "next", "csrf", "after"]);
    let compile = |text: &str, slot| {
        Template::compile_session(text, slot, &Origin::flag("flow"), Some(&data), &names).unwrap()
    };
    let compiled: Vec<Compiled> = flow
        .steps()
        .map(|s| Compiled {
            method: compile(&s.method, Slot::Header),
            path: compile(&s.path, Slot::Url),
            headers: s
                .headers
                .iter()
                .map(|(n, v)| (n.clone(), compile(v, Slot::Header)))
                .collect(),
            body: compile(&s.body, Slot::Body),
        })
        .collect();

    let mut server = Server::default();
    let mut gen = Generator::new(1, 0);
    let mut rng = SmallRng::seed_from_u64(3);
    for session in 0..2u64 {
        let (mut vars, mut jar) = (Vars::with_names(&names), CookieJar::new());
        let mut now = 1_700_000_000 + session * 100;
        let (mut pages, mut think_ns) = (0, 0u64);
        for at in flow.walk() {
            let c = &compiled[at.id];
            let draw = Draw::new(session + 1, Some(data.row(0))).with_vars(vars.values());
            let method = render(&c.method, &draw, &mut gen);
            let path = render(&c.path, &draw, &mut gen);
            let mut headers: Vec<(String, String)> = c
                .headers
                .iter()
                .map(|(n, t)| (n.clone(), render(t, &draw, &mut gen)))
                .collect();
            let body = render(&c.body, &draw, &mut gen);
            if let Some(cookie) = jar.header("flow.test", &path, false, now) {
                headers.push(("Cookie".into(), cookie));
            }

            let reply = server.handle(&method, &path, &headers, &body);
            assert_eq!(reply.status, 200, "{} {method} {path}", at.step.name);
            for (_, v) in reply.headers.iter().filter(|(n, _)| n == "Set-Cookie") {
                jar.store(v.as_bytes(), "flow.test", &path, now).unwrap();
            }
            apply_all(
                &at.step.extract,
                &reply.headers,
                reply.body.as_bytes(),
                &mut vars,
            )
            .unwrap_or_else(|(i, f)| panic!("{}", at.step.extract[i].explain(f)));

            pages += usize::from(at.step.name == "page");
            let pause = flow.think_after(at.step).sample(&mut rng);
            think_ns += pause;
            now += pause / 1_000_000_000;
        }
        assert_eq!(pages, 3);
        assert_eq!(vars.get("next"), Some("/flow/page/4"));
        assert_eq!(vars.get("after"), Some("/flow/login"));
        // Logout's Max-Age=0 deleted the session cookie.
        assert!(jar.is_empty());
        // login 1 s, three pages 0.5 to 1.5 s each, logout none.
        assert!(
            (2_500_000_000..=5_500_000_000).contains(&think_ns),
            "{think_ns}"
        );
    }
    assert_eq!(server.sessions.len(), 2);
    assert!(server.sessions.values().all(|(_, _, out)| *out));
}

#[test]
fn a_wrong_carry_is_caught_by_the_server() {
    // Without the cookie jar the first page is refused: the imitation checks what the
    // real server checks.
    let mut server = Server::default();
    let login = server.handle("POST", "/flow/login", &[], r#"{"user":"ann"}"#);
    let token = serde_json::from_str::<serde_json::Value>(&login.body).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string();
    let page = server.handle(
        "GET",
        "/flow/page/1",
        &[("Authorization".into(), format!("Bearer {token}"))],
        "",
    );
    assert_eq!(page.status, 403);
}
