//! The console's HTTP server: loopback only, every request through [`Guard`], a narrow named
//! API, and one page.
//!
//! Routes, all behind the guard:
//!
//! | method | path                           | what                                        |
//! |--------|--------------------------------|---------------------------------------------|
//! | GET    | `/login?code=…`                | a login link: sets the session cookie once, redirects to `/` |
//! | GET    | `/`, `/console.js`, `/console.css`, `/favicon.svg` | the page                |
//! | POST   | `/api/login-links`             | a fresh login link, for another browser     |
//! | GET    | `/api/pending`                 | requests waiting for a person, with their tools' descriptor flags |
//! | POST   | `/api/pending/{id}/decision`   | `allow_once`, `allow_workspace` or `reject` |
//! | GET    | `/api/grants`                  | standing workspace grants                   |
//! | POST   | `/api/grants/{id}/revoke`      | revokes one                                 |
//! | GET    | `/api/outcomes`                | recent outcomes, without argument values    |
//! | GET    | `/api/project`                 | the workspace's `.toolgate/` as it stands now |
//! | POST   | `/api/project/trust`           | trusts it, if its digest is still the one shown |
//!
//! Anything else is 404. Nothing here runs code; a decision only wakes the call that waits for
//! it. The project routes read and trust through the [`ProjectTrust`] the console was started
//! with (404 without one). The session token is only ever sent in the `Set-Cookie` of a login
//! link's answer: no address, page or message carries it (see [`crate::login`]).

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::oneshot;

use crate::broker::{ConsoleBroker, Decision};
use crate::guard::{Guard, RequestFacts, Secret};
use crate::login::{DEFAULT_LOGIN_TTL, LoginLinks, LoginRefusal, query_code};
use crate::outcomes::RecentOutcomes;
use crate::project::{ProjectTrust, TrustRefusal, TrustRequest};

const PAGE: &str = include_str!("page/console.html");
const SCRIPT: &str = include_str!("page/console.js");
const STYLE: &str = include_str!("page/console.css");
/// The page's icon, served so that the browser's request for one does not fail.
const ICON: &str = include_str!("page/favicon.svg");

/// Where the page keeps the CSRF value; the script reads it from there.
const CSRF_PLACEHOLDER: &str = "{{csrf}}";

/// The path of a login link; its code is the query's `code`.
const LOGIN_PATH: &str = "/login";

/// The header that carries the CSRF value on requests that change state.
pub const CSRF_HEADER: &str = "x-toolgate-csrf";

/// A decision body is a few hundred bytes; the reason is bounded by the broker.
const MAX_BODY_BYTES: usize = 16 * 1024;

/// Scripts and styles only from this console, no inline code, no frames, no forms, no
/// connections elsewhere.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// Why the console could not start.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("cannot listen on 127.0.0.1: {0}")]
    Bind(std::io::Error),
    #[error("cannot generate the console's secrets: {0}")]
    Random(toolgate_edge::RandomError),
    #[error("cannot start the console's runtime: {0}")]
    Runtime(std::io::Error),
}

/// How a console is started.
#[derive(Debug, Clone)]
pub struct ConsoleOptions {
    /// How long a login link works after it is issued (default five minutes).
    pub login_ttl: Duration,
    /// The workspace's project configuration, for the page to show and a person to trust;
    /// `None` serves no project routes.
    pub project: Option<Arc<dyn ProjectTrust>>,
}

impl Default for ConsoleOptions {
    fn default() -> ConsoleOptions {
        ConsoleOptions {
            login_ttl: DEFAULT_LOGIN_TTL,
            project: None,
        }
    }
}

#[derive(Debug)]
struct Shared {
    guard: Guard,
    logins: Arc<LoginLinks>,
    broker: Arc<ConsoleBroker>,
    outcomes: Arc<RecentOutcomes>,
    project: Option<Arc<dyn ProjectTrust>>,
    page: String,
}

/// A fresh login link to the console on `port`.
fn issue_link(logins: &LoginLinks, port: u16) -> Result<String, ConsoleError> {
    let code = logins.issue(Instant::now()).map_err(ConsoleError::Random)?;
    Ok(format!(
        "http://127.0.0.1:{port}{LOGIN_PATH}?code={}",
        code.expose()
    ))
}

/// A running console. Dropping it stops the server.
#[derive(Debug)]
pub struct Console {
    port: u16,
    token: Secret,
    logins: Arc<LoginLinks>,
    stop: Option<oneshot::Sender<()>>,
}

impl Console {
    /// Binds a free port on 127.0.0.1 and serves the console on its own thread.
    pub fn start(
        broker: Arc<ConsoleBroker>,
        outcomes: Arc<RecentOutcomes>,
        options: ConsoleOptions,
    ) -> Result<Console, ConsoleError> {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .map_err(ConsoleError::Bind)?;
        listener.set_nonblocking(true).map_err(ConsoleError::Bind)?;
        let port = listener.local_addr().map_err(ConsoleError::Bind)?.port();
        let token = Secret::generate().map_err(ConsoleError::Random)?;
        let csrf = Secret::generate().map_err(ConsoleError::Random)?;
        let logins = Arc::new(LoginLinks::new(options.login_ttl));
        let shared = Arc::new(Shared {
            page: PAGE.replace(CSRF_PLACEHOLDER, csrf.expose()),
            guard: Guard::new(port, token.clone(), csrf),
            logins: Arc::clone(&logins),
            broker,
            outcomes,
            project: options.project,
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(ConsoleError::Runtime)?;
        // Registered with the runtime here, not on the console's thread, so a failure stops
        // `start` instead of leaving a console that never answers.
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(ConsoleError::Runtime)?
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let app = router(shared);
        std::thread::Builder::new()
            .name("toolgate-console".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    // The console ends with the process or when `Console` is dropped; an
                    // error serving it leaves approvals unanswered, which time out as denials.
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(async move {
                            let _ = stopped.await;
                        })
                        .await;
                });
            })
            .map_err(ConsoleError::Runtime)?;
        Ok(Console {
            port,
            token,
            logins,
            stop: Some(stop),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The session token, for the user-only token file. Never to be printed: it opens the
    /// console for the whole run.
    pub fn token(&self) -> &str {
        self.token.expose()
    }

    /// The console's address, without any secret.
    pub fn address(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// A fresh single-use login link, good for [`Console::login_ttl`]: what to print for a
    /// person to open. Each call issues a new one.
    pub fn login_link(&self) -> Result<String, ConsoleError> {
        issue_link(&self.logins, self.port)
    }

    /// How long a login link works.
    pub fn login_ttl(&self) -> Duration {
        self.logins.ttl()
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(page))
        .route(LOGIN_PATH, get(login))
        .route("/api/login-links", post(login_link))
        .route("/console.js", get(script))
        .route("/console.css", get(style))
        .route("/favicon.svg", get(icon))
        .route("/api/pending", get(pending))
        .route("/api/pending/{id}/decision", post(decide))
        .route("/api/grants", get(grants))
        .route("/api/grants/{id}/revoke", post(revoke))
        .route("/api/outcomes", get(outcomes))
        .route("/api/project", get(project))
        .route("/api/project/trust", post(trust_project))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&shared),
            guard,
        ))
        .with_state(shared)
}

/// Runs the [`Guard`] before any handler, and adds the security headers to every answer.
async fn guard(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let facts = RequestFacts {
        host: text(header::HOST),
        origin: text(header::ORIGIN),
        cookie: text(header::COOKIE),
        login: request.method() == Method::GET && request.uri().path() == LOGIN_PATH,
        csrf: headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()),
        changes_state: !matches!(*request.method(), Method::GET | Method::HEAD),
    };
    let mut response = match shared.guard.check(&facts) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::FORBIDDEN);
            (status, format!("toolgate console: {refusal}\n")).into_response()
        }
    };
    secure(response.headers_mut());
    response
}

fn secure(headers: &mut HeaderMap) {
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (
            header::HeaderName::from_static("cross-origin-resource-policy"),
            "same-origin",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

/// A login link: the guard has checked `Host` and `Origin`; the code is exchanged, once, for
/// the session cookie, and the browser sent to the bare address, so nothing secret stays in
/// the address bar or the history. A refused code sets nothing.
async fn login(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let code = request.uri().query().and_then(query_code).unwrap_or("");
    if let Err(refusal) = shared.logins.redeem(code, Instant::now()) {
        return refused_login(refusal);
    }
    let cookie = format!(
        "{}={}; HttpOnly; SameSite=Strict; Path=/",
        shared.guard.cookie_name(),
        shared.guard.token().expose()
    );
    Response::builder()
        .status(StatusCode::SEE_OTHER)
        .header(header::LOCATION, "/")
        .header(header::SET_COOKIE, cookie)
        .body(Body::empty())
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The page a refused login link shows: what happened and how to get a working link. Its
/// words are fixed; nothing of the request is echoed.
fn refused_login(refusal: LoginRefusal) -> Response {
    let status = match refusal {
        LoginRefusal::Used | LoginRefusal::Expired => StatusCode::GONE,
        LoginRefusal::Unknown => StatusCode::UNAUTHORIZED,
    };
    // A link used by someone else first is the one case the person must act on: whoever used
    // it holds a session and can decide calls.
    let warning = match refusal {
        LoginRefusal::Used => {
            "<p><strong>If you did not open this link before, someone else did and is logged \
             in to this console: stop <code>toolgate serve</code>.</strong></p>"
        }
        LoginRefusal::Expired | LoginRefusal::Unknown => "",
    };
    let body = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>toolgate console: login refused</title></head><body>\
         <h1>Login refused</h1><p>toolgate console: {refusal}.</p>{warning}\
         <p>Nothing was changed. Each login link works once, for a few minutes. \
         For a new one, run <code>toolgate console --workspace DIR</code> for the \
         workspace this server serves.</p></body></html>\n"
    );
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

/// A fresh login link, for a person already logged in who wants the console in another
/// browser. It carries a login code, not the session token.
async fn login_link(State(shared): State<Arc<Shared>>) -> Response {
    match issue_link(&shared.logins, shared.guard.port()) {
        Ok(url) => axum::Json(serde_json::json!({
            "url": url,
            "expires_in_secs": shared.logins.ttl().as_secs(),
        }))
        .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("toolgate console: {e}\n"),
        )
            .into_response(),
    }
}

async fn page(State(shared): State<Arc<Shared>>) -> Response {
    typed("text/html; charset=utf-8", shared.page.clone())
}

async fn script() -> Response {
    typed("text/javascript; charset=utf-8", SCRIPT.to_owned())
}

async fn style() -> Response {
    typed("text/css; charset=utf-8", STYLE.to_owned())
}

async fn icon() -> Response {
    typed("image/svg+xml", ICON.to_owned())
}

fn typed(content_type: &'static str, body: String) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

async fn pending(State(shared): State<Arc<Shared>>) -> Response {
    axum::Json(shared.broker.pending()).into_response()
}

async fn decide(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    decision: Result<axum::Json<Decision>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let axum::Json(decision) = match decision {
        Ok(decision) => decision,
        Err(rejection) => {
            return (
                json_rejection_status(&rejection),
                format!(
                    "toolgate console: a decision is {{\"decision\": \"allow_once\" | \"allow_workspace\" | \"reject\", \"reason\"?: text}}: {}\n",
                    rejection.body_text()
                ),
            )
                .into_response();
        }
    };
    match shared.broker.decide(&id, decision) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e @ crate::broker::DecideError::NotPending(_)) => {
            (StatusCode::NOT_FOUND, format!("toolgate console: {e}\n")).into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("toolgate console: {e}\n")).into_response(),
    }
}

async fn grants(State(shared): State<Arc<Shared>>) -> Response {
    axum::Json(shared.broker.grants()).into_response()
}

async fn revoke(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    match shared.broker.revoke(&id) {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => (
            StatusCode::NOT_FOUND,
            format!("toolgate console: no standing grant `{id}`\n"),
        )
            .into_response(),
        // Revoked in memory, but the file still holds it: say so, so the person knows it
        // would come back after a restart.
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("toolgate console: revoked for this run only: {e}\n"),
        )
            .into_response(),
    }
}

async fn outcomes(State(shared): State<Arc<Shared>>) -> Response {
    axum::Json(shared.outcomes.list()).into_response()
}

/// The project's configuration, read afresh: it reads files, so off the console's thread.
async fn project(State(shared): State<Arc<Shared>>) -> Response {
    let Some(project) = shared.project.clone() else {
        return not_found().await;
    };
    match tokio::task::spawn_blocking(move || project.view()).await {
        Ok(view) => axum::Json(view).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("toolgate console: cannot read the project's configuration: {e}\n"),
        )
            .into_response(),
    }
}

/// A person trusts the project's configuration they were shown, named by its digest. Files
/// changed since they were shown are 409, with the view as they stand now.
async fn trust_project(
    State(shared): State<Arc<Shared>>,
    request: Result<axum::Json<TrustRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Some(project) = shared.project.clone() else {
        return not_found().await;
    };
    let axum::Json(TrustRequest { digest }) = match request {
        Ok(request) => request,
        Err(rejection) => {
            return (
                json_rejection_status(&rejection),
                format!(
                    "toolgate console: a trust is {{\"digest\": the digest shown}}: {}\n",
                    rejection.body_text()
                ),
            )
                .into_response();
        }
    };
    match tokio::task::spawn_blocking(move || project.trust(&digest)).await {
        Ok(Ok(view)) => axum::Json(view).into_response(),
        Ok(Err(TrustRefusal::NotAsShown(view))) => {
            (StatusCode::CONFLICT, axum::Json(view)).into_response()
        }
        Ok(Err(e @ TrustRefusal::Failed(_))) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("toolgate console: {e}\n"),
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("toolgate console: nothing was trusted: {e}\n"),
        )
            .into_response(),
    }
}

/// A body that is not JSON is what a plain HTML form, which any page can send without a
/// preflight, would post: it has its own status.
fn json_rejection_status(rejection: &axum::extract::rejection::JsonRejection) -> StatusCode {
    match rejection {
        axum::extract::rejection::JsonRejection::MissingJsonContentType(_) => {
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        }
        _ => StatusCode::BAD_REQUEST,
    }
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "toolgate console: no such page\n").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw_http::{Reply, csrf_of, request};

    #[test]
    fn the_page_inserts_text_only() {
        // Every string on the page may come from a model; it must reach the DOM as text.
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "setAttribute('on",
            "srcdoc",
        ] {
            assert!(!SCRIPT.contains(sink), "console.js uses `{sink}`");
        }
        assert!(!PAGE.contains("<script>"), "no inline script");
        assert!(!PAGE.contains("style="), "no inline style");
        assert!(PAGE.contains(CSRF_PLACEHOLDER));
    }

    #[test]
    fn the_page_marks_the_same_characters_as_the_text_channels() {
        // The page keeps its own copy of the list, as `[0xSTART, 0xEND], // name` lines.
        let start = SCRIPT.find("const INVISIBLE = [").unwrap();
        let list = &SCRIPT[start..];
        let list = &list[..list.find("];").unwrap()];
        let ranges: Vec<(u32, u32)> = list
            .lines()
            .filter_map(|line| {
                let pair = line.trim().strip_prefix('[')?.split(']').next()?;
                let (a, b) = pair.split_once(", ")?;
                let hex = |t: &str| u32::from_str_radix(t.trim_start_matches("0x"), 16).unwrap();
                Some((hex(a), hex(b)))
            })
            .collect();
        assert_eq!(ranges, toolgate_core::visible::INVISIBLE);
    }

    /// One raw request without a body to a console on `port`.
    fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
        request(port, method, path, headers, "")
    }

    fn console(login_ttl: Duration) -> Console {
        let options = crate::BrokerOptions::default();
        let grants = Arc::new(crate::grants_ledger(&options));
        let broker = Arc::new(ConsoleBroker::new(options, grants));
        let outcomes = Arc::new(RecentOutcomes::new(10));
        Console::start(
            broker,
            outcomes,
            ConsoleOptions {
                login_ttl,
                ..ConsoleOptions::default()
            },
        )
        .unwrap()
    }

    fn path_of(link: &str, port: u16) -> String {
        link.strip_prefix(&format!("http://127.0.0.1:{port}"))
            .unwrap()
            .to_owned()
    }

    #[test]
    fn a_login_link_sets_the_cookie_once_and_never_shows_the_token() {
        let console = console(Duration::from_secs(300));
        let port = console.port();
        let link = console.login_link().unwrap();
        assert!(!link.contains(console.token()), "{link}");
        assert_ne!(console.login_link().unwrap(), link, "each link is new");
        let path = path_of(&link, port);

        let first = http(port, "GET", &path, &[]);
        assert_eq!(first.status, 303, "{}", first.body);
        assert_eq!(first.header("location"), Some("/"));
        let expected = format!(
            "toolgate_console_{port}={}; HttpOnly; SameSite=Strict; Path=/",
            console.token()
        );
        assert_eq!(first.header("set-cookie"), Some(expected.as_str()));
        let cookie = format!("toolgate_console_{port}={}", console.token());
        assert_eq!(http(port, "GET", "/", &[("cookie", &cookie)]).status, 200);

        let again = http(port, "GET", &path, &[]);
        assert_eq!(again.status, 410);
        assert!(again.body.contains("already used"), "{}", again.body);
        assert!(again.body.contains("someone else did"), "{}", again.body);
        assert_eq!(again.header("set-cookie"), None);
        assert!(!again.body.contains(console.token()));

        let unknown = http(port, "GET", &format!("/login?code={}", "0".repeat(64)), &[]);
        assert_eq!(unknown.status, 401);
        assert_eq!(unknown.header("set-cookie"), None);
        // The session token is no login code, and no longer opens the console in an address.
        let token_as_code = http(
            port,
            "GET",
            &format!("/login?code={}", console.token()),
            &[],
        );
        assert_eq!(token_as_code.status, 401);
        let old_address = http(port, "GET", &format!("/?token={}", console.token()), &[]);
        assert_eq!(old_address.status, 401);
        assert_eq!(old_address.header("set-cookie"), None);
    }

    #[test]
    fn a_login_link_from_another_host_or_origin_is_refused_and_stays_unused() {
        let console = console(Duration::from_secs(300));
        let port = console.port();
        let path = path_of(&console.login_link().unwrap(), port);
        let rebound = http(port, "GET", &path, &[("host", "evil.example")]);
        assert_eq!(rebound.status, 421);
        let foreign = http(port, "GET", &path, &[("origin", "http://evil.example")]);
        assert_eq!(foreign.status, 403);
        assert_eq!(http(port, "POST", &path, &[]).status, 401);
        assert_eq!(http(port, "GET", &path, &[]).status, 303, "still unused");
    }

    #[test]
    fn an_expired_login_link_is_refused_and_sets_nothing() {
        let console = console(Duration::from_millis(50));
        let port = console.port();
        let path = path_of(&console.login_link().unwrap(), port);
        std::thread::sleep(Duration::from_millis(80));
        let late = http(port, "GET", &path, &[]);
        assert_eq!(late.status, 410);
        assert!(late.body.contains("expired"), "{}", late.body);
        assert_eq!(late.header("set-cookie"), None);
    }

    /// A project whose files' digest is `digest`, trusted once a trust names it.
    #[derive(Debug)]
    struct FakeProject {
        digest: &'static str,
        trusted: std::sync::Mutex<Option<String>>,
    }

    impl crate::ProjectTrust for FakeProject {
        fn view(&self) -> crate::ProjectView {
            let trusted = self.trusted.lock().unwrap().is_some();
            let mut view = crate::ProjectView::bare(
                if trusted {
                    crate::ProjectStatus::Trusted
                } else {
                    crate::ProjectStatus::Untrusted
                },
                "/ws",
            );
            view.digest = Some(self.digest.to_owned());
            view
        }

        fn trust(&self, digest: &str) -> Result<crate::ProjectView, TrustRefusal> {
            if digest != self.digest {
                return Err(TrustRefusal::NotAsShown(Box::new(self.view())));
            }
            *self.trusted.lock().unwrap() = Some(digest.to_owned());
            Ok(self.view())
        }
    }

    #[test]
    fn a_project_is_trusted_only_as_shown_and_only_with_the_cookie_and_csrf() {
        let project = Arc::new(FakeProject {
            digest: "sha256:aa",
            trusted: std::sync::Mutex::new(None),
        });
        let options = crate::BrokerOptions::default();
        let grants = Arc::new(crate::grants_ledger(&options));
        let broker = Arc::new(ConsoleBroker::new(options, grants));
        let console = Console::start(
            broker,
            Arc::new(RecentOutcomes::new(10)),
            ConsoleOptions {
                project: Some(Arc::clone(&project) as _),
                ..ConsoleOptions::default()
            },
        )
        .unwrap();
        let port = console.port();
        let cookie = format!("toolgate_console_{port}={}", console.token());
        assert_eq!(http(port, "GET", "/api/project", &[]).status, 401);
        let shown = http(port, "GET", "/api/project", &[("cookie", &cookie)]);
        assert_eq!(shown.status, 200, "{}", shown.body);
        let shown: serde_json::Value = serde_json::from_str(&shown.body).unwrap();
        assert_eq!(shown["status"], "untrusted");
        assert_eq!(shown["digest"], "sha256:aa");

        let page = http(port, "GET", "/", &[("cookie", &cookie)]);
        let csrf = csrf_of(&page.body);
        let json = ("content-type", "application/json");
        let body = r#"{"digest": "sha256:aa"}"#;
        let refused = [
            (vec![("cookie", cookie.as_str()), json], body, 403),
            (vec![("x-toolgate-csrf", csrf.as_str()), json], body, 401),
            (
                vec![("cookie", cookie.as_str()), ("x-toolgate-csrf", "0"), json],
                body,
                403,
            ),
            (
                vec![("cookie", cookie.as_str()), ("x-toolgate-csrf", &csrf)],
                body,
                415,
            ),
            (
                vec![
                    ("cookie", cookie.as_str()),
                    ("x-toolgate-csrf", &csrf),
                    json,
                ],
                r#"{"digest": "sha256:aa", "by": "terminal"}"#,
                400,
            ),
        ];
        for (headers, body, status) in refused {
            let answer = request(port, "POST", "/api/project/trust", &headers, body);
            assert_eq!(answer.status, status, "{headers:?} {body}: {}", answer.body);
            assert_eq!(*project.trusted.lock().unwrap(), None, "{headers:?}");
        }
        let headers = [
            ("cookie", cookie.as_str()),
            ("x-toolgate-csrf", &csrf),
            json,
        ];
        let stale = request(
            port,
            "POST",
            "/api/project/trust",
            &headers,
            r#"{"digest": "sha256:bb"}"#,
        );
        assert_eq!(stale.status, 409, "{}", stale.body);
        let now: serde_json::Value = serde_json::from_str(&stale.body).unwrap();
        assert_eq!(now["digest"], "sha256:aa", "the view as it stands");
        assert_eq!(*project.trusted.lock().unwrap(), None);
        let trusted = request(port, "POST", "/api/project/trust", &headers, body);
        assert_eq!(trusted.status, 200, "{}", trusted.body);
        let trusted: serde_json::Value = serde_json::from_str(&trusted.body).unwrap();
        assert_eq!(trusted["status"], "trusted");
        assert_eq!(
            project.trusted.lock().unwrap().as_deref(),
            Some("sha256:aa")
        );
    }

    #[test]
    fn without_a_project_the_project_routes_are_not_found() {
        let console = console(Duration::from_secs(300));
        let port = console.port();
        let cookie = format!("toolgate_console_{port}={}", console.token());
        assert_eq!(
            http(port, "GET", "/api/project", &[("cookie", &cookie)]).status,
            404
        );
    }

    #[test]
    fn a_logged_in_browser_can_get_a_fresh_link_for_another() {
        let console = console(Duration::from_secs(300));
        let port = console.port();
        let cookie = format!("toolgate_console_{port}={}", console.token());
        let page = http(port, "GET", "/", &[("cookie", &cookie)]);
        let csrf = csrf_of(&page.body);
        assert_eq!(
            http(port, "POST", "/api/login-links", &[("cookie", &cookie)]).status,
            403,
            "no csrf"
        );
        assert_eq!(
            http(
                port,
                "POST",
                "/api/login-links",
                &[("x-toolgate-csrf", &csrf)]
            )
            .status,
            401,
            "no cookie"
        );
        let minted = http(
            port,
            "POST",
            "/api/login-links",
            &[("cookie", &cookie), ("x-toolgate-csrf", &csrf)],
        );
        assert_eq!(minted.status, 200, "{}", minted.body);
        let body: serde_json::Value = serde_json::from_str(&minted.body).unwrap();
        assert_eq!(body["expires_in_secs"], 300);
        let link = body["url"].as_str().unwrap();
        assert!(!link.contains(console.token()));
        assert_eq!(http(port, "GET", &path_of(link, port), &[]).status, 303);
    }
}
