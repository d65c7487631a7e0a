//! A small stateful flow for load tools that drive arriving users: log in, read pages, log
//! out, with a bearer token, a session cookie and a csrf value to carry from reply to
//! request; and `/flow/stats`, what the server saw of each session.
//!
//! | request | needs | reply |
//! |---|---|---|
//! | `POST /flow/login`, JSON `{"user": NAME}` or form `user=NAME` | a user of 1 to 128 bytes, else 400 | 200 JSON `{"token", "user", "next": "/flow/page/1", "csrf"}` and `Set-Cookie: flow_sid=SID; Path=/flow; HttpOnly` |
//! | `GET /flow/page/{n}`, `n` ≥ 1 (else 404) | `Authorization: Bearer TOKEN` (else 401) and `Cookie: flow_sid=SID` of the same session (else 403) | 200 HTML with `<input name="csrf" value="CSRF" type="hidden">` (new on every page) and `<a rel="next" href="/flow/page/{n+1}">` |
//! | `POST /flow/logout`, JSON `{"csrf": CSRF}` or form `csrf=CSRF` | token and cookie as for a page, then a readable body (else 400) whose `csrf` is the session's last one (else 403) | 200 JSON `{"user", "next": "/flow/login"}` and `Set-Cookie: flow_sid=; Path=/flow; Max-Age=0` |
//! | `GET /flow/stats[?user=NAME]` | | 200 JSON [`FlowStats`] |
//! | `POST /flow/stats/reset` | | 200 `reset`: forgets every session and zeroes the totals |
//!
//! Tokens, session ids and csrf values are 32 hexadecimal digits. The 401s: no token, a
//! token no session has, the token of a session that has logged out. The 403s: no cookie,
//! another session's cookie, a wrong csrf.
//!
//! **Order.** A session must go login, then pages in increasing `n` (gaps allowed), then
//! logout. A request that does not, refused or not, adds one to its session's
//! `out_of_order`; a refused request does not move the session on.
//!
//! **Gaps.** For each request the server records the time from the end of the session's
//! previous reply (when the handler finished it) to the arrival of the request (when its
//! head was read, before its body): the user's think time plus the network.
//!
//! **Capacity.** With `--flow-capacity N`, at most N page requests are served at once; the
//! others wait in line (first come, first served). Each holds its place for
//! `--flow-work-ms` (an async wait that leaves the worker free): pages top out at
//! N / work pages per second, a knee a load plan can find. Logins and logouts never wait.
//!
//! **Bounds.** `--flow-sessions` (200,000 by default) sessions are kept, 32 requests each;
//! see `book`.
//!
//! `/stats` counts these requests under `other`.

mod book;

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use actix_web::dev::Payload;
use actix_web::http::header::{AUTHORIZATION, COOKIE, SET_COOKIE};
use actix_web::http::StatusCode;
use actix_web::{web, Either, FromRequest, HttpRequest, HttpResponse, ResponseError};
use tokio::sync::Semaphore;

use crate::{AppState, Config};
use book::{hex, Book, Credentials, Presented, Proof, Step};

pub use book::{FlowRejections, FlowRequest, FlowSession, FlowTotals};

type State = web::Data<AppState>;

/// The cookie that carries the session id.
const COOKIE_NAME: &str = "flow_sid";

/// Longest user name a login accepts, in bytes.
const MAX_USER: usize = 128;

/// The body of `GET /flow/stats`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowStats {
    /// Counters over every session since the start or the last reset.
    pub totals: FlowTotals,
    /// The capacity of the page requests and its gauges.
    pub pages: FlowPages,
    /// The kept sessions (only the `user` asked for, if any), oldest login first.
    pub sessions: Vec<FlowSession>,
}

impl FlowStats {
    /// The kept session whose id (the `flow_sid` cookie) is `sid`.
    pub fn session(&self, sid: &str) -> Option<&FlowSession> {
        self.sessions.iter().find(|s| s.sid == sid)
    }
}

/// The page requests' capacity (`--flow-capacity`, `--flow-work-ms`) and gauges. Not reset by
/// `/flow/stats/reset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowPages {
    /// Page requests served at once (`None`: no limit).
    pub capacity: Option<usize>,
    /// Milliseconds each page request holds its place.
    pub work_ms: u64,
    /// Admitted page requests waiting for a place now.
    pub queued: u64,
    /// Page requests holding a place now.
    pub busy: u64,
    /// Page requests served since the server started.
    pub completed: u64,
}

/// Why a flow request was refused. Each is counted under its own name in
/// [`FlowRejections`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Rejection {
    #[error("missing token: send `Authorization: Bearer TOKEN` with the token of /flow/login")]
    MissingToken,
    #[error("unknown token")]
    UnknownToken,
    #[error("this session has logged out")]
    LoggedOut,
    #[error("missing cookie `flow_sid`")]
    MissingCookie,
    #[error("the cookie `flow_sid` is another session's")]
    WrongCookie,
    #[error("wrong csrf: send the value of the last page")]
    WrongCsrf,
    #[error(
        "bad body: send JSON or a form (application/x-www-form-urlencoded) with `user` \
         (login, 1 to 128 bytes) or `csrf` (logout)"
    )]
    BadBody,
}

impl Rejection {
    pub(crate) fn status(self) -> StatusCode {
        match self {
            Rejection::MissingToken | Rejection::UnknownToken | Rejection::LoggedOut => {
                StatusCode::UNAUTHORIZED
            }
            Rejection::MissingCookie | Rejection::WrongCookie | Rejection::WrongCsrf => {
                StatusCode::FORBIDDEN
            }
            Rejection::BadBody => StatusCode::BAD_REQUEST,
        }
    }
}

impl ResponseError for Rejection {
    fn status_code(&self) -> StatusCode {
        self.status()
    }
}

/// The flow's state: the session book and the page capacity.
pub(crate) struct Flow {
    book: Mutex<Book>,
    pages: PageWork,
}

impl Flow {
    pub(crate) fn new(config: &Config) -> Self {
        Flow {
            book: Mutex::new(Book::new(config.flow_sessions)),
            pages: PageWork {
                permits: config.flow_capacity.map(Semaphore::new),
                capacity: config.flow_capacity,
                work: config.flow_work,
                gauges: Gauges::default(),
            },
        }
    }

    /// The book, even if a handler panicked while holding it (its counters stay usable).
    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stats(&self, user: Option<&str>) -> FlowStats {
        let (totals, sessions) = self.book().snapshot(user);
        FlowStats {
            totals,
            pages: self.pages.stats(),
            sessions,
        }
    }
}

/// Page requests served at once, and how long each takes.
struct PageWork {
    /// `None`: no limit.
    permits: Option<Semaphore>,
    capacity: Option<usize>,
    work: Duration,
    gauges: Gauges,
}

#[derive(Debug, Default)]
struct Gauges {
    queued: AtomicU64,
    busy: AtomicU64,
    completed: AtomicU64,
}

/// Adds one to a gauge while alive, so that a request dropped midway (its client went away)
/// leaves it right.
struct Raised<'a>(&'a AtomicU64);

impl<'a> Raised<'a> {
    fn new(gauge: &'a AtomicU64) -> Self {
        gauge.fetch_add(1, Relaxed);
        Raised(gauge)
    }
}

impl Drop for Raised<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl PageWork {
    /// Waits for a place in line, then holds it for the work time.
    async fn serve(&self) {
        let gauges = &self.gauges;
        let queued = Raised::new(&gauges.queued);
        // The semaphore is never closed, and is fair: first come, first served.
        let _permit = match &self.permits {
            Some(permits) => permits.acquire().await.ok(),
            None => None,
        };
        drop(queued);
        let busy = Raised::new(&gauges.busy);
        if !self.work.is_zero() {
            actix_rt::time::sleep(self.work).await;
        }
        drop(busy);
        gauges.completed.fetch_add(1, Relaxed);
    }

    fn stats(&self) -> FlowPages {
        FlowPages {
            capacity: self.capacity,
            work_ms: u64::try_from(self.work.as_millis()).unwrap_or(u64::MAX),
            queued: self.gauges.queued.load(Relaxed),
            busy: self.gauges.busy.load(Relaxed),
            completed: self.gauges.completed.load(Relaxed),
        }
    }
}

/// Registers the flow's endpoints.
pub(crate) fn configure(config: &mut web::ServiceConfig) {
    config
        .route("/flow/login", web::post().to(login))
        .route("/flow/page/{n}", web::get().to(page))
        .route("/flow/logout", web::post().to(logout))
        .route("/flow/stats", web::get().to(stats))
        .route("/flow/stats/reset", web::post().to(reset));
}

/// When a request arrived: taken by the first extractor of a handler, once the head is read
/// and before the body is.
struct Arrival(Instant);

impl FromRequest for Arrival {
    type Error = Infallible;
    type Future = Ready<Result<Self, Infallible>>;

    fn from_request(_: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(Ok(Arrival(Instant::now())))
    }
}

/// A JSON or form body, or why it could not be read.
type Body<T> = Result<Either<web::Json<T>, web::Form<T>>, actix_web::Error>;

fn read<T>(body: Body<T>) -> Option<T> {
    match body.ok()? {
        Either::Left(json) => Some(json.into_inner()),
        Either::Right(form) => Some(form.into_inner()),
    }
}

/// The bearer token and the `flow_sid` cookie of `request`.
fn credentials(request: &HttpRequest) -> Credentials {
    let headers = request.headers();
    let token = match headers.get(AUTHORIZATION).map(|v| v.to_str()) {
        None => Presented::Missing,
        Some(value) => match value.ok().and_then(|v| v.split_once(' ')) {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
                Presented::parse(Some(token.trim()))
            }
            // Another scheme (or none): no bearer token.
            _ => Presented::Missing,
        },
    };
    let sid = headers
        .get_all(COOKIE)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|cookies| cookies.split(';'))
        .filter_map(|cookie| cookie.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.trim_matches('"'));
    Credentials {
        token,
        sid: Presented::parse(sid),
    }
}

#[derive(Debug, serde::Deserialize)]
struct LoginBody {
    user: String,
}

#[derive(Debug, serde::Serialize)]
struct LoginReply<'a> {
    token: String,
    user: &'a str,
    next: &'static str,
    csrf: String,
}

async fn login(state: State, body: Body<LoginBody>) -> Result<HttpResponse, Rejection> {
    let valid = |user: &String| (1..=MAX_USER).contains(&user.len());
    let Some(user) = read(body).map(|b| b.user).filter(valid) else {
        state.flow.book().refuse(Rejection::BadBody);
        return Err(Rejection::BadBody);
    };
    let issued = state.flow.book().login(user.clone());
    let cookie = format!("{COOKIE_NAME}={}; Path=/flow; HttpOnly", hex(issued.sid));
    Ok(HttpResponse::Ok()
        .insert_header((SET_COOKIE, cookie))
        .json(LoginReply {
            token: hex(issued.token),
            user: &user,
            next: "/flow/page/1",
            csrf: hex(issued.csrf),
        }))
}

/// Marks an admitted page finished when dropped: after its reply is made, or when its
/// client goes away first.
struct InFlight<'a> {
    flow: &'a Flow,
    seq: u64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.flow.book().finish(self.seq);
    }
}

async fn page(
    arrival: Arrival,
    state: State,
    request: HttpRequest,
    n: web::Path<NonZeroU32>,
) -> Result<HttpResponse, Rejection> {
    let n = n.into_inner();
    let flow = &state.flow;
    let admitted = flow.book().admit(
        Step::Page(n),
        credentials(&request),
        Proof::Credentials,
        arrival.0,
    )?;
    let in_flight = InFlight {
        flow,
        seq: admitted.seq,
    };
    flow.pages.serve().await;
    drop(in_flight);
    let next = n.saturating_add(1);
    let csrf = hex(admitted.csrf);
    let html = format!(
        "<!doctype html>\n\
         <html><head><title>flow page {n}</title></head><body>\n\
         <h1>Page {n}</h1>\n\
         <a rel=\"next\" href=\"/flow/page/{next}\">next</a>\n\
         <form method=\"post\" action=\"/flow/logout\">\n\
         <input name=\"csrf\" value=\"{csrf}\" type=\"hidden\">\n\
         <button>log out</button>\n\
         </form>\n\
         </body></html>\n"
    );
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(html))
}

#[derive(Debug, serde::Deserialize)]
struct LogoutBody {
    #[serde(default)]
    csrf: String,
}

#[derive(Debug, serde::Serialize)]
struct LogoutReply {
    user: String,
    next: &'static str,
}

async fn logout(
    arrival: Arrival,
    state: State,
    request: HttpRequest,
    body: Body<LogoutBody>,
) -> Result<HttpResponse, Rejection> {
    let body = read(body);
    let proof = match &body {
        Some(body) => Proof::Csrf(&body.csrf),
        None => Proof::BadBody,
    };
    let admitted =
        state
            .flow
            .book()
            .admit(Step::Logout, credentials(&request), proof, arrival.0)?;
    Ok(HttpResponse::Ok()
        .insert_header((SET_COOKIE, format!("{COOKIE_NAME}=; Path=/flow; Max-Age=0")))
        .json(LogoutReply {
            user: admitted.user,
            next: "/flow/login",
        }))
}

#[derive(Debug, serde::Deserialize)]
struct StatsQuery {
    user: Option<String>,
}

async fn stats(state: State, query: web::Query<StatsQuery>) -> web::Json<FlowStats> {
    web::Json(state.flow.stats(query.user.as_deref()))
}

async fn reset(state: State) -> &'static str {
    state.flow.book().reset();
    "reset"
}
