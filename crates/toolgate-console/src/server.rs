//! The console's HTTP server: loopback only, every request through [`Guard`], a narrow named
//! API, and one page.
//!
//! Routes, all behind the guard:
//!
//! | method | path                           | what                                        |
//! |--------|--------------------------------|---------------------------------------------|
//! | GET    | `/?token=…`                    | sets the session cookie, redirects to `/`   |
//! | GET    | `/`, `/console.js`, `/console.css` | the page                                |
//! | GET    | `/api/pending`                 | requests waiting for a person               |
//! | POST   | `/api/pending/{id}/decision`   | `allow_once`, `allow_workspace` or `reject` |
//! | GET    | `/api/grants`                  | standing workspace grants                   |
//! | POST   | `/api/grants/{id}/revoke`      | revokes one                                 |
//! | GET    | `/api/outcomes`                | recent outcomes, without argument values    |
//!
//! Anything else is 404. Nothing here runs code or reads files; a decision only wakes the call
//! that waits for it.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::oneshot;

use crate::broker::{ConsoleBroker, Decision};
use crate::guard::{Guard, RequestFacts, Secret, query_token};
use crate::outcomes::RecentOutcomes;

const PAGE: &str = include_str!("page/console.html");
const SCRIPT: &str = include_str!("page/console.js");
const STYLE: &str = include_str!("page/console.css");

/// Where the page keeps the CSRF value; the script reads it from there.
const CSRF_PLACEHOLDER: &str = "{{csrf}}";

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
    Random(getrandom::Error),
    #[error("cannot start the console's runtime: {0}")]
    Runtime(std::io::Error),
}

#[derive(Debug)]
struct Shared {
    guard: Guard,
    broker: Arc<ConsoleBroker>,
    outcomes: Arc<RecentOutcomes>,
    page: String,
}

/// A running console. Dropping it stops the server.
#[derive(Debug)]
pub struct Console {
    port: u16,
    token: Secret,
    stop: Option<oneshot::Sender<()>>,
}

impl Console {
    /// Binds a free port on 127.0.0.1 and serves the console on its own thread.
    pub fn start(
        broker: Arc<ConsoleBroker>,
        outcomes: Arc<RecentOutcomes>,
    ) -> Result<Console, ConsoleError> {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .map_err(ConsoleError::Bind)?;
        listener.set_nonblocking(true).map_err(ConsoleError::Bind)?;
        let port = listener.local_addr().map_err(ConsoleError::Bind)?.port();
        let token = Secret::generate().map_err(ConsoleError::Random)?;
        let csrf = Secret::generate().map_err(ConsoleError::Random)?;
        let shared = Arc::new(Shared {
            page: PAGE.replace(CSRF_PLACEHOLDER, csrf.expose()),
            guard: Guard::new(port, token.clone(), csrf),
            broker,
            outcomes,
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
            stop: Some(stop),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The session token, for the user-only token file.
    pub fn token(&self) -> &str {
        self.token.expose()
    }

    /// The address to open, with the token that starts a session.
    pub fn url(&self) -> String {
        format!(
            "http://127.0.0.1:{}/?token={}",
            self.port,
            self.token.expose()
        )
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
        .route("/console.js", get(script))
        .route("/console.css", get(style))
        .route("/api/pending", get(pending))
        .route("/api/pending/{id}/decision", post(decide))
        .route("/api/grants", get(grants))
        .route("/api/grants/{id}/revoke", post(revoke))
        .route("/api/outcomes", get(outcomes))
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
    // Only the page's own address may carry the token, and only to start a session.
    let opens_session = request.method() == Method::GET && request.uri().path() == "/";
    let facts = RequestFacts {
        host: text(header::HOST),
        origin: text(header::ORIGIN),
        cookie: text(header::COOKIE),
        query_token: opens_session
            .then(|| request.uri().query().and_then(query_token))
            .flatten(),
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

async fn page(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    // The guard has checked the token; set it as the cookie and send the browser to the bare
    // address, so the token leaves the address bar and the history.
    if request.uri().query().and_then(query_token).is_some() {
        let cookie = format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/",
            shared.guard.cookie_name(),
            shared.guard.token().expose()
        );
        return Response::builder()
            .status(StatusCode::SEE_OTHER)
            .header(header::LOCATION, "/")
            .header(header::SET_COOKIE, cookie)
            .body(Body::empty())
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }
    typed("text/html; charset=utf-8", shared.page.clone())
}

async fn script() -> Response {
    typed("text/javascript; charset=utf-8", SCRIPT.to_owned())
}

async fn style() -> Response {
    typed("text/css; charset=utf-8", STYLE.to_owned())
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
            // A body that is not JSON is what a plain HTML form, which any page can send
            // without a preflight, would post: say so with its own status.
            let status = match rejection {
                axum::extract::rejection::JsonRejection::MissingJsonContentType(_) => {
                    StatusCode::UNSUPPORTED_MEDIA_TYPE
                }
                _ => StatusCode::BAD_REQUEST,
            };
            return (
                status,
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

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "toolgate console: no such page\n").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
