//! The `/flow` endpoints: login → pages → logout with a token, a cookie and a csrf value;
//! 401s and 403s; what `/flow/stats` saw of each session (paths, think gaps, order); the
//! session cap; the page capacity knob.

use std::thread;

use loadlab_target::FlowSession;
use loadlab_target_common::testing::{self, run_to_exit};

use crate::util::{concurrently, ms, timed, Reply, Target};

const BIN: &str = env!("CARGO_BIN_EXE_loadlab-target");

const JSON: (&str, &str) = ("Content-Type", "application/json");
const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

#[derive(Debug, serde::Deserialize)]
struct LoginReply {
    token: String,
    user: String,
    next: String,
    csrf: String,
}

/// A logged-in session, as a client holds it.
struct User<'a> {
    target: &'a Target,
    token: String,
    sid: String,
}

impl<'a> User<'a> {
    fn login(target: &'a Target, name: &str) -> Self {
        let reply = target.send(
            "POST",
            "/flow/login",
            &[JSON],
            &format!(r#"{{"user": "{name}"}}"#),
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
        let login: LoginReply = serde_json::from_str(&reply.body).expect("login reply");
        let cookie = reply.header("set-cookie").expect("Set-Cookie");
        let sid = cookie
            .strip_prefix("flow_sid=")
            .and_then(|rest| rest.split_once(';'))
            .map(|(sid, _)| sid.to_owned())
            .expect("flow_sid cookie");
        assert_eq!(cookie, format!("flow_sid={sid}; Path=/flow; HttpOnly"));
        User {
            target,
            token: login.token,
            sid,
        }
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }

    fn cookie(&self) -> String {
        format!("flow_sid={}", self.sid)
    }

    fn page(&self, n: u32) -> Reply {
        let (bearer, cookie) = (self.bearer(), self.cookie());
        let headers = [
            ("Authorization", bearer.as_str()),
            ("Cookie", cookie.as_str()),
        ];
        self.target
            .send("GET", &format!("/flow/page/{n}"), &headers, "")
    }

    /// Page `n`, which must be served; returns its csrf value.
    fn read_page(&self, n: u32) -> String {
        let reply = self.page(n);
        assert_eq!(reply.status, 200, "page {n}: {}", reply.body);
        let next = format!(r#"<a rel="next" href="/flow/page/{}">"#, n + 1);
        assert!(reply.body.contains(&next), "{}", reply.body);
        csrf_of(&reply.body)
    }

    fn logout(&self, csrf: &str) -> Reply {
        let (bearer, cookie) = (self.bearer(), self.cookie());
        let headers = [
            ("Authorization", bearer.as_str()),
            ("Cookie", cookie.as_str()),
            FORM,
        ];
        self.target
            .send("POST", "/flow/logout", &headers, &format!("csrf={csrf}"))
    }

    /// What `/flow/stats` saw of this session.
    fn seen(&self) -> FlowSession {
        let stats = self.target.flow_stats();
        stats
            .session(&self.sid)
            .expect("session in /flow/stats")
            .clone()
    }
}

/// The value a client would take with the regex `name="csrf" value="([0-9a-f]+)"`.
fn csrf_of(html: &str) -> String {
    let (_, rest) = html
        .split_once(r#"<input name="csrf" value=""#)
        .expect("csrf input");
    let (csrf, _) = rest.split_once('"').expect("end of the csrf value");
    assert_eq!(csrf.len(), 32, "{csrf}");
    csrf.to_owned()
}

fn statuses(session: &FlowSession) -> Vec<u16> {
    session.requests.iter().map(|r| r.status).collect()
}

#[test]
fn login_pages_logout_with_token_and_cookie() {
    let target = Target::start(|_| {});
    let reply = target.send("POST", "/flow/login", &[JSON], r#"{"user": "ada"}"#);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let login: LoginReply = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(
        (login.user.as_str(), login.next.as_str()),
        ("ada", "/flow/page/1")
    );
    assert_eq!((login.token.len(), login.csrf.len()), (32, 32));

    let user = User::login(&target, "ada");
    assert_ne!(user.token, user.sid);
    assert_ne!(user.token, login.token, "a fresh token per login");
    let first = user.read_page(1);
    let second = user.read_page(2);
    assert_ne!(first, second, "a new csrf per page");
    let bye = user.logout(&second);
    assert_eq!(bye.status, 200, "{}", bye.body);
    assert_eq!(
        bye.header("set-cookie"),
        Some("flow_sid=; Path=/flow; Max-Age=0")
    );
    assert!(bye.body.contains(r#""next":"/flow/login""#), "{}", bye.body);
    for path in ["/flow/page/0", "/flow/page/one"] {
        assert_eq!(target.get(path).status, 404, "{path}");
    }

    let seen = user.seen();
    assert_eq!(
        seen.paths(),
        [
            "/flow/login",
            "/flow/page/1",
            "/flow/page/2",
            "/flow/logout"
        ]
    );
    assert_eq!(statuses(&seen), [200; 4]);
    assert_eq!((seen.user.as_str(), seen.logged_out), ("ada", true));
    assert_eq!((seen.rejected.total(), seen.out_of_order), (0, 0));
    let totals = target.flow_stats().totals;
    assert_eq!((totals.sessions_started, totals.sessions_completed), (2, 1));
    assert_eq!((totals.sessions_active, totals.requests), (1, 5));
    assert_eq!((totals.out_of_order, totals.rejected.total()), (0, 0));
}

#[test]
fn login_takes_json_or_a_form_and_refuses_bad_bodies() {
    let target = Target::start(|_| {});
    let form = target.send("POST", "/flow/login", &[FORM], "user=grace+hopper");
    assert_eq!(form.status, 200, "{}", form.body);
    let login: LoginReply = serde_json::from_str(&form.body).unwrap();
    assert_eq!(login.user, "grace hopper");

    let long = format!(r#"{{"user": "{}"}}"#, "x".repeat(129));
    let bad: [(&[(&str, &str)], &str); 6] = [
        (&[], ""),
        (&[JSON], ""),
        (&[JSON], "{}"),
        (&[JSON], r#"{"user": ""}"#),
        (&[JSON], &long),
        (&[("Content-Type", "text/plain")], "user=ada"),
    ];
    for (headers, body) in bad {
        let reply = target.send("POST", "/flow/login", headers, body);
        assert_eq!(reply.status, 400, "{headers:?} {body}: {}", reply.body);
    }
    let totals = target.flow_stats().totals;
    assert_eq!(totals.sessions_started, 1);
    assert_eq!((totals.rejected.bad_body, totals.unattributed), (6, 6));
}

#[test]
fn a_page_without_a_valid_token_is_401() {
    let target = Target::start(|_| {});
    let user = User::login(&target, "ada");
    let cookie = user.cookie();
    let cookie = ("Cookie", cookie.as_str());
    let unknown = format!("Bearer {}", "0".repeat(32));
    let refused: [&[(&str, &str)]; 5] = [
        &[cookie],
        &[cookie, ("Authorization", "Basic YWRhOnB3")],
        &[cookie, ("Authorization", &unknown)],
        &[cookie, ("Authorization", "Bearer not-a-token")],
        &[],
    ];
    for headers in refused {
        let reply = target.send("GET", "/flow/page/1", headers, "");
        assert_eq!(reply.status, 401, "{headers:?}: {}", reply.body);
    }
    // Still logged in: the right token and cookie are served.
    user.read_page(1);

    // The first four named the session by its cookie; the last named nothing.
    let seen = user.seen();
    assert_eq!(
        (seen.rejected.missing_token, seen.rejected.unknown_token),
        (2, 2)
    );
    assert_eq!(statuses(&seen), [200, 401, 401, 401, 401, 200]);
    let totals = target.flow_stats().totals;
    assert_eq!(totals.rejected.missing_token, 3);
    assert_eq!(totals.unattributed, 1);
}

#[test]
fn a_page_without_the_sessions_cookie_is_403() {
    let target = Target::start(|_| {});
    let ada = User::login(&target, "ada");
    let bob = User::login(&target, "bob");
    let bearer = ada.bearer();
    let bearer = ("Authorization", bearer.as_str());
    let bobs = bob.cookie();
    let refused: [&[(&str, &str)]; 3] = [
        &[bearer],
        &[bearer, ("Cookie", &bobs)],
        &[bearer, ("Cookie", "theme=dark; flow_sid=nope")],
    ];
    for headers in refused {
        let reply = target.send("GET", "/flow/page/1", headers, "");
        assert_eq!(reply.status, 403, "{headers:?}: {}", reply.body);
    }
    let also = format!("theme=dark; {}", ada.cookie());
    let with_others = target.send("GET", "/flow/page/1", &[bearer, ("Cookie", &also)], "");
    assert_eq!(with_others.status, 200, "{}", with_others.body);

    let seen = ada.seen();
    assert_eq!(
        (seen.rejected.missing_cookie, seen.rejected.wrong_cookie),
        (1, 2)
    );
    assert_eq!(
        bob.seen().rejected.total(),
        0,
        "counted in the token's session"
    );
}

#[test]
fn logout_needs_the_last_csrf() {
    let target = Target::start(|_| {});
    let user = User::login(&target, "ada");
    let stale = user.read_page(1);
    let last = user.read_page(2);
    for csrf in [stale.as_str(), "nope", ""] {
        let reply = user.logout(csrf);
        assert_eq!(reply.status, 403, "csrf {csrf:?}: {}", reply.body);
    }
    // A body that is neither JSON nor a form.
    let (bearer, cookie) = (user.bearer(), user.cookie());
    let auth = [
        ("Authorization", bearer.as_str()),
        ("Cookie", cookie.as_str()),
    ];
    assert_eq!(target.send("POST", "/flow/logout", &auth, "").status, 400);
    assert!(!user.seen().logged_out);

    let json = [auth[0], auth[1], JSON];
    let body = format!(r#"{{"csrf": "{last}"}}"#);
    let bye = target.send("POST", "/flow/logout", &json, &body);
    assert_eq!(bye.status, 200, "{}", bye.body);
    // The session is over: its token is refused.
    assert_eq!(user.page(3).status, 401);

    let seen = user.seen();
    assert!(seen.logged_out);
    assert_eq!(
        (
            seen.rejected.wrong_csrf,
            seen.rejected.bad_body,
            seen.rejected.logged_out
        ),
        (3, 1, 1)
    );
    assert_eq!(seen.out_of_order, 1, "a page after logout");
}

#[test]
fn the_server_measures_think_gaps() {
    let target = Target::start(|_| {});
    let user = User::login(&target, "ada");
    thread::sleep(ms(50));
    user.read_page(1);
    thread::sleep(ms(120));
    user.read_page(2);
    let seen = user.seen();
    let gaps: Vec<Option<u64>> = seen.requests.iter().map(|r| r.gap_us).collect();
    assert_eq!(gaps[0], None, "a login follows no reply");
    let think = [gaps[1].unwrap(), gaps[2].unwrap()];
    for (gap, slept) in think.into_iter().zip([50_000, 120_000]) {
        assert!(gap >= slept && gap < 500_000, "gaps {gaps:?}");
    }
}

#[test]
fn out_of_order_requests_are_counted() {
    let target = Target::start(|_| {});
    let user = User::login(&target, "ada");
    user.read_page(2);
    user.read_page(1); // backwards
    user.read_page(2); // a repeat
    let csrf = user.read_page(4);
    assert_eq!(user.logout(&csrf).status, 200);
    assert_eq!(user.page(5).status, 401); // after logout
    let in_order = User::login(&target, "bob");
    let csrf = in_order.read_page(1);
    assert_eq!(in_order.logout(&csrf).status, 200);

    let seen = user.seen();
    assert_eq!(
        seen.paths(),
        [
            "/flow/login",
            "/flow/page/2",
            "/flow/page/1",
            "/flow/page/2",
            "/flow/page/4",
            "/flow/logout",
            "/flow/page/5"
        ]
    );
    assert_eq!(seen.out_of_order, 3);
    assert_eq!(in_order.seen().out_of_order, 0);
    let totals = target.flow_stats().totals;
    assert_eq!(totals.out_of_order, 3);
    assert_eq!((totals.sessions_started, totals.sessions_completed), (2, 2));
}

#[test]
fn stats_filter_by_user_and_reset() {
    let target = Target::start(|_| {});
    let ada = User::login(&target, "ada");
    User::login(&target, "bob");
    User::login(&target, "ada");
    let stats: loadlab_target::FlowStats =
        serde_json::from_str(&target.ok("/flow/stats?user=ada")).unwrap();
    assert_eq!(stats.sessions.len(), 2);
    assert!(stats.sessions.iter().all(|s| s.user == "ada"));
    assert_eq!(stats.totals.sessions_kept, 3);

    let reset = target.send("POST", "/flow/stats/reset", &[], "");
    assert_eq!((reset.status, reset.body.as_str()), (200, "reset"));
    let stats = target.flow_stats();
    assert!(stats.sessions.is_empty());
    assert_eq!(stats.totals.sessions_started, 0);
    // The sessions are gone with the counters.
    assert_eq!(ada.page(1).status, 401);
    assert_eq!(target.flow_stats().totals.rejected.unknown_token, 1);
}

#[test]
fn the_session_cap_evicts_logged_out_sessions_first() {
    let target = Target::start(|c| c.flow_sessions = 2);
    let ada = User::login(&target, "ada");
    let bob = User::login(&target, "bob");
    let csrf = bob.read_page(1);
    assert_eq!(bob.logout(&csrf).status, 200);
    let cyd = User::login(&target, "cyd");
    let users = |target: &Target| -> Vec<String> {
        let stats = target.flow_stats();
        stats.sessions.into_iter().map(|s| s.user).collect()
    };
    assert_eq!(
        users(&target),
        ["ada", "cyd"],
        "bob logged out: evicted first"
    );
    User::login(&target, "dee");
    assert_eq!(users(&target), ["cyd", "dee"], "then the oldest");
    assert_eq!(ada.page(1).status, 401);
    cyd.read_page(1);
    let totals = target.flow_stats().totals;
    assert_eq!(
        (
            totals.sessions_evicted,
            totals.sessions_kept,
            totals.max_sessions
        ),
        (2, 2, 2)
    );
}

#[test]
fn flow_capacity_makes_concurrent_pages_queue() {
    let work = ms(50);
    let target = Target::start(|c| {
        c.workers = Some(2);
        c.flow_capacity = Some(1);
        c.flow_work = work;
    });
    let users = [User::login(&target, "ada"), User::login(&target, "bob")];
    let (replies, elapsed) = concurrently(2, |i| users[i].page(1).status);
    assert_eq!(replies, [200, 200]);
    assert!(
        elapsed >= work * 2,
        "two pages on one place took {elapsed:?}"
    );
    let pages = target.flow_stats().pages;
    assert_eq!((pages.capacity, pages.work_ms), (Some(1), 50));
    assert_eq!((pages.completed, pages.queued, pages.busy), (2, 0, 0));
    // Logins and logouts do not wait for a place.
    let (_, login) = timed(|| User::login(&target, "cyd"));
    assert!(login < work, "{login:?}");
}

#[test]
fn without_a_capacity_pages_overlap() {
    let work = ms(300);
    let target = Target::start(|c| {
        c.workers = Some(1);
        c.flow_work = work;
    });
    let users = [User::login(&target, "ada"), User::login(&target, "bob")];
    let (_, elapsed) = concurrently(2, |i| users[i].read_page(1));
    assert!(elapsed >= work, "{elapsed:?}");
    assert!(elapsed < work * 16 / 10, "two pages took {elapsed:?}");
    assert_eq!(target.flow_stats().pages.capacity, None);
}

#[test]
fn the_binary_documents_and_checks_the_flow_flags() {
    let help = run_to_exit(BIN, &["--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in ["--flow-sessions", "--flow-capacity", "--flow-work-ms"] {
        assert!(help.contains(flag), "{flag} in --help:\n{help}");
    }
    for (flag, value) in [
        ("--flow-capacity", "0"),
        ("--flow-sessions", "0"),
        ("--flow-work-ms", "600001"),
    ] {
        let stderr = testing::refused(BIN, &["--bind", ":0", flag, value]);
        assert!(stderr.contains(flag), "{stderr}");
    }
}
