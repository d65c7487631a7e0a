//! The session book of the flow: the sessions, what each one asked for and when, the order
//! check, and the `/flow/stats` document made from them. No HTTP here: the handlers in
//! `flow` turn requests into [`Step`]s and [`Credentials`] and replies into status codes.
//!
//! Bounded: at most `max_sessions` sessions are kept (when a login finds the book full, the
//! session that logged out first is forgotten, or if none has, the oldest session), and each
//! keeps its first [`MAX_RECORDED_REQUESTS`] requests (later ones are only counted). A kept
//! session costs about 0.6 KiB for a login, a few pages and a logout, and at most about
//! 1.5 KiB (a long user name and 32 requests), so the default 200,000 sessions take 120 MiB
//! and never more than 300 MiB.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::BuildHasher;
use std::num::NonZeroU32;
use std::time::Instant;

use super::Rejection;

/// Requests kept per session; later ones are counted in `requests_not_kept`.
pub(crate) const MAX_RECORDED_REQUESTS: usize = 32;

/// One request of the flow, as the order check sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// `POST /flow/login`.
    Login,
    /// `GET /flow/page/{n}`.
    Page(NonZeroU32),
    /// `POST /flow/logout`.
    Logout,
}

impl Step {
    fn path(self) -> String {
        match self {
            Step::Login => "/flow/login".to_owned(),
            Step::Page(n) => format!("/flow/page/{n}"),
            Step::Logout => "/flow/logout".to_owned(),
        }
    }
}

/// How far a session has gone: what the order check compares the next step with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    LoggedIn,
    /// The highest page served.
    Page(NonZeroU32),
    LoggedOut,
}

impl Progress {
    /// Login, then pages in increasing `n`, then logout; nothing after logout.
    fn allows(self, step: Step) -> bool {
        match (self, step) {
            (Progress::LoggedIn, Step::Page(_) | Step::Logout)
            | (Progress::Page(_), Step::Logout) => true,
            (Progress::Page(last), Step::Page(n)) => n > last,
            _ => false,
        }
    }

    /// Where an accepted `step` leaves the session (a page below the highest one served
    /// does not lower it).
    fn after(self, step: Step) -> Progress {
        match (self, step) {
            (_, Step::Login) => Progress::LoggedIn,
            (Progress::Page(last), Step::Page(n)) => Progress::Page(last.max(n)),
            (_, Step::Page(n)) => Progress::Page(n),
            (_, Step::Logout) => Progress::LoggedOut,
        }
    }
}

/// A token or a session id as a request presented it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Presented {
    /// Not sent (or sent empty).
    Missing,
    /// Sent, but not 32 hexadecimal digits: it cannot be anyone's.
    Malformed,
    /// Sent.
    Given(u128),
}

impl Presented {
    pub(crate) fn parse(text: Option<&str>) -> Presented {
        match text {
            None | Some("") => Presented::Missing,
            Some(text) => parse_hex(text).map_or(Presented::Malformed, Presented::Given),
        }
    }
}

/// What a request carried to prove its session.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Credentials {
    /// `Authorization: Bearer TOKEN`.
    pub(crate) token: Presented,
    /// The `flow_sid` cookie.
    pub(crate) sid: Presented,
}

/// What a step needs besides the credentials.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Proof<'a> {
    /// A page: the credentials suffice.
    Credentials,
    /// A logout: the csrf value of its body (empty if the field was missing).
    Csrf(&'a str),
    /// A logout whose body was neither JSON nor a form.
    BadBody,
}

/// A request let through.
#[derive(Debug)]
pub(crate) struct Admitted {
    /// The session, for [`Book::finish`].
    pub(crate) seq: u64,
    /// The session's new csrf value (a page issues a new one; a logout leaves it).
    pub(crate) csrf: u128,
    /// The session's user.
    pub(crate) user: String,
}

/// What a login created.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Issued {
    pub(crate) token: u128,
    pub(crate) sid: u128,
    pub(crate) csrf: u128,
}

/// Requests refused, per cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowRejections {
    /// 401: no `Authorization: Bearer` header.
    pub missing_token: u64,
    /// 401: a token no session has (never issued, malformed, evicted or reset).
    pub unknown_token: u64,
    /// 401: the token of a session that has logged out.
    pub logged_out: u64,
    /// 403: no `flow_sid` cookie.
    pub missing_cookie: u64,
    /// 403: a `flow_sid` cookie that is not the token's session's.
    pub wrong_cookie: u64,
    /// 403: a logout without the csrf value of the session's last reply.
    pub wrong_csrf: u64,
    /// 400: a login or logout body that is neither JSON nor a form, or a login without a
    /// valid `user`.
    pub bad_body: u64,
}

impl FlowRejections {
    /// Every refused request.
    pub fn total(&self) -> u64 {
        self.missing_token
            + self.unknown_token
            + self.logged_out
            + self.missing_cookie
            + self.wrong_cookie
            + self.wrong_csrf
            + self.bad_body
    }

    fn count(&mut self, cause: Rejection) {
        let counter = match cause {
            Rejection::MissingToken => &mut self.missing_token,
            Rejection::UnknownToken => &mut self.unknown_token,
            Rejection::LoggedOut => &mut self.logged_out,
            Rejection::MissingCookie => &mut self.missing_cookie,
            Rejection::WrongCookie => &mut self.wrong_cookie,
            Rejection::WrongCsrf => &mut self.wrong_csrf,
            Rejection::BadBody => &mut self.bad_body,
        };
        *counter += 1;
    }
}

/// One request of a session, as `/flow/stats` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowRequest {
    /// `/flow/login`, `/flow/page/N` or `/flow/logout`.
    pub path: String,
    /// The status of the reply.
    pub status: u16,
    /// Microseconds from the end of the session's previous reply to the arrival of this
    /// request: the client's think time plus the network. `None` for the login, and when
    /// another request of the session was still being served when this one arrived.
    pub gap_us: Option<u64>,
}

/// One session, as `/flow/stats` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowSession {
    /// The session id (the `flow_sid` cookie).
    pub sid: String,
    /// The user given at login.
    pub user: String,
    /// Whether the session logged out.
    pub logged_out: bool,
    /// Its requests in order of arrival, refused ones included: the first 32 only.
    pub requests: Vec<FlowRequest>,
    /// Its requests after the first 32.
    pub requests_not_kept: u64,
    /// Its requests that broke the order login, pages in increasing `n`, logout.
    pub out_of_order: u64,
    /// Its refused requests, per cause.
    pub rejected: FlowRejections,
}

impl FlowSession {
    /// The paths of [`requests`](Self::requests), in order.
    pub fn paths(&self) -> Vec<&str> {
        self.requests.iter().map(|r| r.path.as_str()).collect()
    }
}

/// Counters over every session since the start or the last reset, evicted ones included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowTotals {
    /// Successful logins.
    pub sessions_started: u64,
    /// Successful logouts.
    pub sessions_completed: u64,
    /// Sessions kept that have not logged out.
    pub sessions_active: u64,
    /// Sessions forgotten to keep the book under `max_sessions`.
    pub sessions_evicted: u64,
    /// Sessions kept now (listed in `sessions` unless filtered).
    pub sessions_kept: u64,
    /// The most sessions kept (`--flow-sessions`).
    pub max_sessions: u64,
    /// Login, page and logout requests, refused ones included.
    pub requests: u64,
    /// Requests that broke their session's order.
    pub out_of_order: u64,
    /// Refused requests, per cause.
    pub rejected: FlowRejections,
    /// Refused requests that named no kept session (by token or cookie).
    pub unattributed: u64,
}

#[derive(Debug, Clone, Copy)]
struct Record {
    step: Step,
    status: u16,
    gap_us: Option<u64>,
}

#[derive(Debug)]
struct Session {
    sid: u128,
    token: u128,
    user: String,
    /// The csrf value of the last reply.
    csrf: u128,
    progress: Progress,
    requests: Vec<Record>,
    requests_not_kept: u64,
    out_of_order: u64,
    rejected: FlowRejections,
    /// When the last reply was finished.
    last_reply: Option<Instant>,
    /// Requests admitted and not yet answered.
    in_flight: u32,
}

impl Session {
    /// Whether the session accepts a request with `sid` and `proof`, given that its token
    /// was right.
    fn check(&self, sid: Presented, proof: Proof<'_>) -> Result<(), Rejection> {
        if self.progress == Progress::LoggedOut {
            return Err(Rejection::LoggedOut);
        }
        match sid {
            Presented::Missing => return Err(Rejection::MissingCookie),
            Presented::Given(sid) if sid == self.sid => {}
            Presented::Given(_) | Presented::Malformed => return Err(Rejection::WrongCookie),
        }
        match proof {
            Proof::Credentials => Ok(()),
            Proof::BadBody => Err(Rejection::BadBody),
            Proof::Csrf(csrf) if parse_hex(csrf) == Some(self.csrf) => Ok(()),
            Proof::Csrf(_) => Err(Rejection::WrongCsrf),
        }
    }

    fn record(&mut self, step: Step, status: u16, gap_us: Option<u64>) {
        if self.requests.len() < MAX_RECORDED_REQUESTS {
            self.requests.push(Record {
                step,
                status,
                gap_us,
            });
        } else {
            self.requests_not_kept += 1;
        }
    }

    fn view(&self) -> FlowSession {
        let requests = self.requests.iter().map(|r| FlowRequest {
            path: r.step.path(),
            status: r.status,
            gap_us: r.gap_us,
        });
        FlowSession {
            sid: hex(self.sid),
            user: self.user.clone(),
            logged_out: self.progress == Progress::LoggedOut,
            requests: requests.collect(),
            requests_not_kept: self.requests_not_kept,
            out_of_order: self.out_of_order,
            rejected: self.rejected,
        }
    }
}

/// Unguessable 128-bit values: SipHash of a counter, keyed by `RandomState` from the
/// operating system's randomness. Not for real secrets; enough that no client guesses
/// another session's token.
#[derive(Debug)]
struct Secrets {
    keys: RandomState,
    counter: u64,
}

impl Secrets {
    fn next(&mut self) -> u128 {
        self.counter += 1;
        let high = self.keys.hash_one((self.counter, 0_u8));
        let low = self.keys.hash_one((self.counter, 1_u8));
        (u128::from(high) << 64) | u128::from(low)
    }
}

/// Every kept session, with the indexes that find it from a token or a cookie.
#[derive(Debug)]
pub(crate) struct Book {
    max_sessions: usize,
    /// By login order (`seq`), so the first is the oldest.
    sessions: BTreeMap<u64, Session>,
    by_token: HashMap<u128, u64>,
    by_sid: HashMap<u128, u64>,
    /// Kept sessions that logged out, the first to log out first: evicted before any other.
    completed: VecDeque<u64>,
    /// Never reset, so that a page finishing after a reset cannot touch a new session.
    next_seq: u64,
    active: u64,
    totals: FlowTotals,
    secrets: Secrets,
}

impl Book {
    pub(crate) fn new(max_sessions: usize) -> Self {
        Book {
            max_sessions,
            sessions: BTreeMap::new(),
            by_token: HashMap::new(),
            by_sid: HashMap::new(),
            completed: VecDeque::new(),
            next_seq: 0,
            active: 0,
            totals: FlowTotals::default(),
            secrets: Secrets {
                keys: RandomState::new(),
                counter: 0,
            },
        }
    }

    /// Opens a session for `user`, evicting one first if the book is full.
    pub(crate) fn login(&mut self, user: String) -> Issued {
        self.totals.requests += 1;
        if self.sessions.len() >= self.max_sessions {
            self.evict_one();
        }
        let token = self.fresh(|book, value| book.by_token.contains_key(&value));
        let sid = self.fresh(|book, value| value == token || book.by_sid.contains_key(&value));
        let csrf = self.secrets.next();
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut session = Session {
            sid,
            token,
            user,
            csrf,
            progress: Progress::LoggedIn,
            requests: Vec::new(),
            requests_not_kept: 0,
            out_of_order: 0,
            rejected: FlowRejections::default(),
            last_reply: None,
            in_flight: 0,
        };
        session.record(Step::Login, 200, None);
        session.last_reply = Some(Instant::now());
        self.sessions.insert(seq, session);
        self.by_token.insert(token, seq);
        self.by_sid.insert(sid, seq);
        self.active += 1;
        self.totals.sessions_started += 1;
        Issued { token, sid, csrf }
    }

    /// A new secret that `taken` does not refuse.
    fn fresh(&mut self, taken: impl Fn(&Book, u128) -> bool) -> u128 {
        loop {
            let value = self.secrets.next();
            if !taken(self, value) {
                return value;
            }
        }
    }

    fn evict_one(&mut self) {
        let evicted = match self.completed.pop_front() {
            Some(seq) => self.sessions.remove(&seq),
            None => {
                let oldest = self.sessions.pop_first().map(|(_, session)| session);
                if oldest.is_some() {
                    self.active -= 1;
                }
                oldest
            }
        };
        if let Some(session) = evicted {
            self.by_token.remove(&session.token);
            self.by_sid.remove(&session.sid);
            self.totals.sessions_evicted += 1;
        }
    }

    /// Counts a request refused before it could name a session (a login with a bad body).
    pub(crate) fn refuse(&mut self, cause: Rejection) {
        self.totals.requests += 1;
        self.totals.rejected.count(cause);
        self.totals.unattributed += 1;
    }

    /// Checks a page or logout request that arrived at `arrival` and records it in the
    /// session its token names (or, failing that, its cookie). The token is checked first
    /// (401), then the cookie (403), then the body of a logout (400, then 403).
    ///
    /// An admitted page must be [`finish`](Self::finish)ed when its reply is ready; every
    /// other reply counts as finished now.
    pub(crate) fn admit(
        &mut self,
        step: Step,
        credentials: Credentials,
        proof: Proof<'_>,
        arrival: Instant,
    ) -> Result<Admitted, Rejection> {
        self.totals.requests += 1;
        let find = |index: &HashMap<u128, u64>, presented| match presented {
            Presented::Given(value) => index.get(&value).copied(),
            Presented::Missing | Presented::Malformed => None,
        };
        let by_token = find(&self.by_token, credentials.token);
        let by_sid = find(&self.by_sid, credentials.sid);
        let verdict = match (credentials.token, by_token) {
            (Presented::Missing, _) => Err(Rejection::MissingToken),
            (_, None) => Err(Rejection::UnknownToken),
            (_, Some(seq)) => self
                .sessions
                .get(&seq)
                .map_or(Err(Rejection::UnknownToken), |s| {
                    s.check(credentials.sid, proof)
                }),
        };
        if let Err(cause) = verdict {
            self.totals.rejected.count(cause);
        }
        let attributed = by_token.or(by_sid);
        let Some((seq, session)) =
            attributed.and_then(|seq| self.sessions.get_mut(&seq).map(|s| (seq, s)))
        else {
            // Only a refused request names no session.
            self.totals.unattributed += 1;
            return Err(verdict.err().unwrap_or(Rejection::UnknownToken));
        };

        if !session.progress.allows(step) {
            session.out_of_order += 1;
            self.totals.out_of_order += 1;
        }
        let gap = match (session.in_flight, session.last_reply) {
            (0, Some(last)) => arrival.checked_duration_since(last),
            _ => None,
        };
        let gap_us = gap.map(|gap| u64::try_from(gap.as_micros()).unwrap_or(u64::MAX));
        let status = verdict.err().map_or(200, |cause| cause.status().as_u16());
        session.record(step, status, gap_us);
        if let Err(cause) = verdict {
            session.rejected.count(cause);
            session.last_reply = Some(Instant::now());
            return Err(cause);
        }

        session.progress = session.progress.after(step);
        match step {
            Step::Page(_) => {
                session.in_flight += 1;
                session.csrf = self.secrets.next();
            }
            Step::Logout | Step::Login => {
                session.last_reply = Some(Instant::now());
                if session.progress == Progress::LoggedOut {
                    self.completed.push_back(seq);
                    self.active -= 1;
                    self.totals.sessions_completed += 1;
                }
            }
        }
        Ok(Admitted {
            seq,
            csrf: session.csrf,
            user: session.user.clone(),
        })
    }

    /// The reply to an admitted page is ready (or the client went away). Nothing if the
    /// session has been evicted or reset since.
    pub(crate) fn finish(&mut self, seq: u64) {
        if let Some(session) = self.sessions.get_mut(&seq) {
            session.in_flight = session.in_flight.saturating_sub(1);
            session.last_reply = Some(Instant::now());
        }
    }

    /// The totals and the kept sessions (only `user`'s if given), oldest login first.
    pub(crate) fn snapshot(&self, user: Option<&str>) -> (FlowTotals, Vec<FlowSession>) {
        let totals = FlowTotals {
            sessions_active: self.active,
            sessions_kept: self.sessions.len() as u64,
            max_sessions: self.max_sessions as u64,
            ..self.totals
        };
        let sessions = self
            .sessions
            .values()
            .filter(|s| user.is_none_or(|user| s.user == user))
            .map(Session::view);
        (totals, sessions.collect())
    }

    /// Forgets every session and zeroes the totals.
    pub(crate) fn reset(&mut self) {
        self.sessions.clear();
        self.by_token.clear();
        self.by_sid.clear();
        self.completed.clear();
        self.active = 0;
        self.totals = FlowTotals::default();
    }
}

/// 32 lowercase hexadecimal digits.
pub(crate) fn hex(value: u128) -> String {
    format!("{value:032x}")
}

/// The inverse of [`hex`] (either case).
fn parse_hex(text: &str) -> Option<u128> {
    let digits = text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit());
    digits
        .then(|| u128::from_str_radix(text, 16).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(n: u32) -> Step {
        Step::Page(NonZeroU32::new(n).unwrap())
    }

    fn of(issued: Issued) -> Credentials {
        Credentials {
            token: Presented::Given(issued.token),
            sid: Presented::Given(issued.sid),
        }
    }

    /// Admits `step` for `issued`'s session (a logout with the right csrf), finishing pages.
    fn go(book: &mut Book, issued: Issued, step: Step) -> Result<Admitted, Rejection> {
        let csrf = hex(book.sessions[&book.by_token[&issued.token]].csrf);
        let proof = match step {
            Step::Logout => Proof::Csrf(&csrf),
            _ => Proof::Credentials,
        };
        let admitted = book.admit(step, of(issued), proof, Instant::now())?;
        book.finish(admitted.seq);
        Ok(admitted)
    }

    #[test]
    fn hex_round_trips_and_refuses_other_text() {
        let value = 0x0123_4567_89ab_cdef_0011_2233_4455_6677;
        assert_eq!(hex(value), "0123456789abcdef0011223344556677");
        assert_eq!(parse_hex(&hex(value)), Some(value));
        assert_eq!(parse_hex(&hex(value).to_uppercase()), Some(value));
        for bad in [
            "",
            "abc",
            "+123456789abcdef0011223344556677",
            &"g".repeat(32),
        ] {
            assert_eq!(parse_hex(bad), None, "{bad}");
        }
    }

    #[test]
    fn secrets_differ() {
        let mut book = Book::new(10);
        let a = book.login("a".into());
        let b = book.login("b".into());
        let all = [a.token, a.sid, a.csrf, b.token, b.sid, b.csrf];
        let distinct: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len());
    }

    #[test]
    fn order_is_login_pages_increasing_then_logout() {
        let mut book = Book::new(10);
        let s = book.login("u".into());
        go(&mut book, s, page(1)).unwrap();
        go(&mut book, s, page(3)).unwrap();
        go(&mut book, s, page(2)).unwrap(); // backwards
        go(&mut book, s, page(3)).unwrap(); // not above the highest
        go(&mut book, s, page(4)).unwrap();
        go(&mut book, s, Step::Logout).unwrap();
        assert_eq!(go(&mut book, s, page(5)).unwrap_err(), Rejection::LoggedOut);
        let (totals, sessions) = book.snapshot(None);
        assert_eq!(totals.out_of_order, 3);
        assert_eq!((totals.sessions_started, totals.sessions_completed), (1, 1));
        let session = &sessions[0];
        assert_eq!(session.out_of_order, 3);
        assert_eq!(session.rejected.logged_out, 1);
        assert!(session.logged_out);
        assert_eq!(
            session.paths(),
            [
                "/flow/login",
                "/flow/page/1",
                "/flow/page/3",
                "/flow/page/2",
                "/flow/page/3",
                "/flow/page/4",
                "/flow/logout",
                "/flow/page/5"
            ]
        );
        let statuses: Vec<u16> = session.requests.iter().map(|r| r.status).collect();
        assert_eq!(statuses, [200, 200, 200, 200, 200, 200, 200, 401]);
    }

    #[test]
    fn logout_right_after_login_is_in_order() {
        let mut book = Book::new(10);
        let s = book.login("u".into());
        go(&mut book, s, Step::Logout).unwrap();
        assert_eq!(book.snapshot(None).0.out_of_order, 0);
    }

    #[test]
    fn refusals_are_attributed_by_token_then_cookie() {
        let mut book = Book::new(10);
        let a = book.login("a".into());
        let b = book.login("b".into());
        let now = Instant::now();
        let cases = [
            (
                Presented::Missing,
                Presented::Given(a.sid),
                Rejection::MissingToken,
            ),
            (
                Presented::Malformed,
                Presented::Given(a.sid),
                Rejection::UnknownToken,
            ),
            (
                Presented::Given(a.token),
                Presented::Given(b.sid),
                Rejection::WrongCookie,
            ),
            (
                Presented::Given(a.token),
                Presented::Missing,
                Rejection::MissingCookie,
            ),
            (
                Presented::Given(a.token),
                Presented::Malformed,
                Rejection::WrongCookie,
            ),
        ];
        for (token, sid, cause) in cases {
            let credentials = Credentials { token, sid };
            let refused = book.admit(page(1), credentials, Proof::Credentials, now);
            assert_eq!(refused.unwrap_err(), cause, "{token:?} {sid:?}");
        }
        // Nothing names a session: counted in the totals only.
        let stranger = Credentials {
            token: Presented::Given(1),
            sid: Presented::Missing,
        };
        let refused = book.admit(page(1), stranger, Proof::Credentials, now);
        assert_eq!(refused.unwrap_err(), Rejection::UnknownToken);

        let (totals, sessions) = book.snapshot(None);
        let (a, b) = (&sessions[0], &sessions[1]);
        assert_eq!(a.rejected.total(), 5);
        assert_eq!((a.rejected.missing_token, a.rejected.unknown_token), (1, 1));
        assert_eq!((a.rejected.wrong_cookie, a.rejected.missing_cookie), (2, 1));
        assert_eq!(b.rejected.total(), 0);
        assert_eq!(totals.rejected.total(), 6);
        assert_eq!(totals.unattributed, 1);
        assert_eq!(totals.requests, 2 + 6);
        // Refused pages do not move the session on: page 1 is still in order.
        assert_eq!(totals.out_of_order, 0);
    }

    #[test]
    fn logout_needs_the_last_csrf_and_a_readable_body() {
        let mut book = Book::new(10);
        let s = book.login("u".into());
        let first = go(&mut book, s, page(1)).unwrap().csrf;
        let second = go(&mut book, s, page(2)).unwrap().csrf;
        assert_ne!(first, second);
        let now = Instant::now();
        let stale = hex(first);
        for (proof, cause) in [
            (Proof::Csrf(&stale), Rejection::WrongCsrf),
            (Proof::Csrf(""), Rejection::WrongCsrf),
            (Proof::BadBody, Rejection::BadBody),
        ] {
            let refused = book.admit(Step::Logout, of(s), proof, now);
            assert_eq!(refused.unwrap_err(), cause);
        }
        let last = hex(second);
        book.admit(Step::Logout, of(s), Proof::Csrf(&last), now)
            .unwrap();
        let (totals, sessions) = book.snapshot(None);
        assert_eq!(sessions[0].rejected.wrong_csrf, 2);
        assert_eq!(sessions[0].rejected.bad_body, 1);
        assert!(sessions[0].logged_out);
        assert_eq!(totals.sessions_completed, 1);
    }

    #[test]
    fn a_full_book_evicts_the_first_logged_out_then_the_oldest() {
        let mut book = Book::new(3);
        let a = book.login("a".into());
        let b = book.login("b".into());
        let c = book.login("c".into());
        go(&mut book, c, Step::Logout).unwrap();
        go(&mut book, a, Step::Logout).unwrap();
        let users = |book: &Book| -> Vec<String> {
            let (_, sessions) = book.snapshot(None);
            sessions.into_iter().map(|s| s.user).collect()
        };
        book.login("d".into()); // evicts c, the first to log out
        assert_eq!(users(&book), ["a", "b", "d"]);
        book.login("e".into()); // evicts a
        assert_eq!(users(&book), ["b", "d", "e"]);
        book.login("f".into()); // none logged out: evicts b, the oldest
        assert_eq!(users(&book), ["d", "e", "f"]);
        let (totals, _) = book.snapshot(None);
        assert_eq!(totals.sessions_evicted, 3);
        assert_eq!(totals.sessions_kept, 3);
        assert_eq!(totals.sessions_active, 3);
        assert_eq!(totals.sessions_started, 6);
        // An evicted session's token is unknown, and the request is nobody's.
        let refused = book.admit(page(1), of(b), Proof::Credentials, Instant::now());
        assert_eq!(refused.unwrap_err(), Rejection::UnknownToken);
        assert_eq!(book.snapshot(None).0.unattributed, 1);
    }

    #[test]
    fn requests_beyond_the_cap_are_counted() {
        let mut book = Book::new(1);
        let s = book.login("u".into());
        for n in 1..=40 {
            go(&mut book, s, page(n)).unwrap();
        }
        let (_, sessions) = book.snapshot(None);
        assert_eq!(sessions[0].requests.len(), MAX_RECORDED_REQUESTS);
        assert_eq!(
            sessions[0].requests_not_kept,
            41 - MAX_RECORDED_REQUESTS as u64
        );
    }

    #[test]
    fn a_request_during_another_has_no_gap() {
        let mut book = Book::new(1);
        let s = book.login("u".into());
        let first = book
            .admit(page(1), of(s), Proof::Credentials, Instant::now())
            .unwrap();
        let second = book
            .admit(page(2), of(s), Proof::Credentials, Instant::now())
            .unwrap();
        book.finish(first.seq);
        book.finish(second.seq);
        go(&mut book, s, page(3)).unwrap();
        let (_, sessions) = book.snapshot(None);
        let gaps: Vec<bool> = sessions[0]
            .requests
            .iter()
            .map(|r| r.gap_us.is_some())
            .collect();
        assert_eq!(gaps, [false, true, false, true]);
    }

    #[test]
    fn reset_forgets_sessions_and_totals() {
        let mut book = Book::new(4);
        let s = book.login("u".into());
        let admitted = book
            .admit(page(1), of(s), Proof::Credentials, Instant::now())
            .unwrap();
        book.reset();
        book.finish(admitted.seq); // a page finishing after the reset
        let (totals, sessions) = book.snapshot(None);
        assert!(sessions.is_empty());
        assert_eq!(
            totals,
            FlowTotals {
                max_sessions: 4,
                ..FlowTotals::default()
            }
        );
        let refused = book.admit(page(2), of(s), Proof::Credentials, Instant::now());
        assert_eq!(refused.unwrap_err(), Rejection::UnknownToken);
    }

    #[test]
    fn snapshot_filters_by_user() {
        let mut book = Book::new(4);
        for user in ["a", "b", "a"] {
            book.login(user.into());
        }
        let (totals, sessions) = book.snapshot(Some("a"));
        assert_eq!(sessions.len(), 2);
        assert_eq!(totals.sessions_kept, 3);
    }
}
