//! MCP over a byte stream of newline-delimited JSON-RPC: standard input and output.
//!
//! Two plain threads move bytes (reading and writing standard streams is blocking I/O), and
//! [`LineTransport`] hands messages to rmcp. The transport does three things rmcp's own does
//! not:
//!
//! - it answers input that is not a message (`-32700`, `-32600`, `-32602`) instead of dropping
//!   it, and never ends the session for it;
//! - it keeps the argument text of each `tools/call` (see [`crate::wire`]);
//! - it gives every request an id of its own and maps answers back to the client's id. A
//!   cancelled request's mapping is dropped at once, so its late answer, if the handler still
//!   produces one, goes nowhere — in particular never to a new request that reuses the id. A
//!   request whose id is still in use is refused. A `subscriptions/listen` request's id is also
//!   the tag of every notification on that subscription, so the tag is mapped back too, and a
//!   cancelled subscription's late notifications go nowhere either.
//!
//! When the client closes its input, open subscriptions are told to end and given a moment to
//! send their final result before the session ends.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::fd::AsFd as _;
use std::os::unix::fs::FileTypeExt as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, ErrorData, GetExtensions as _,
    GetMeta as _, NumberOrString, RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{RoleServer, ServerInitializeError};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;
use toolgate_edge::lines::{Line, LineSplitter};

use crate::auth::Principal;
use crate::server::Server;
use crate::session::Session;
use crate::subscriptions::ListenEnd;
use crate::wire::{Decoded, decode};

/// How many messages may wait to be written before responses wait for the writer.
const OUTBOUND_CAPACITY: usize = 256;
/// How many lines may wait to be read.
const INBOUND_CAPACITY: usize = 64;
/// How long open subscriptions have to send their final result once the input closed.
const LISTEN_FAREWELL: Duration = Duration::from_secs(1);

/// Why serving stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    #[error("cannot start the MCP session: {0}")]
    Start(Box<ServerInitializeError>),
    #[error("the MCP session ended abnormally: {0}")]
    Join(#[from] tokio::task::JoinError),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// [`serve_stdio`] on a single-threaded runtime of its own, for a synchronous `main`.
pub fn run_stdio(
    server: Arc<Server>,
    principal: Principal,
    max_message_bytes: usize,
) -> Result<(), StdioError> {
    let runtime = crate::runtime().map_err(StdioError::Runtime)?;
    let result = runtime.block_on(serve_stdio(server, principal, max_message_bytes));
    // Calls still running were cancelled when the session ended; give their executors a moment
    // to stop what they started, but do not hang on one that will not.
    runtime.shutdown_timeout(crate::SHUTDOWN_GRACE);
    result
}

/// Serves one MCP session on standard input and output until the client closes its end.
/// Messages longer than `max_message_bytes` are refused.
///
/// When both are pipes (as MCP clients start servers) they are read and written without
/// blocking, on the runtime itself; anything else (a terminal, a file) is served by two
/// threads doing blocking I/O.
pub async fn serve_stdio(
    server: Arc<Server>,
    principal: Principal,
    max_message_bytes: usize,
) -> Result<(), StdioError> {
    match stdio_pipes() {
        Ok((input, output)) => {
            let transport = LineTransport::spawn_async(input, output, max_message_bytes);
            serve_transport(server, principal, transport).await
        }
        Err(_) => {
            serve_streams(
                server,
                principal,
                std::io::stdin(),
                std::io::stdout(),
                max_message_bytes,
            )
            .await
        }
    }
}

/// Standard input and output as non-blocking pipes, if that is what they are.
///
/// Both are checked before either is made non-blocking: standard input left non-blocking for
/// the threads' blocking reads (when only standard output is not a pipe, a log file say)
/// would read as closed at once, and the server would end before the client spoke.
fn stdio_pipes() -> std::io::Result<(pipe::Receiver, pipe::Sender)> {
    let input = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
    let output = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    for file in [&input, &output] {
        if !file.metadata()?.file_type().is_fifo() {
            return Err(std::io::Error::other("not a pipe"));
        }
    }
    Ok((
        pipe::Receiver::from_file(input)?,
        pipe::Sender::from_file(output)?,
    ))
}

/// Serves one MCP session over `input` and `output` (pipes, sockets, standard streams).
pub async fn serve_streams<R, W>(
    server: Arc<Server>,
    principal: Principal,
    input: R,
    output: W,
    max_message_bytes: usize,
) -> Result<(), StdioError>
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
{
    let transport = LineTransport::spawn(input, output, max_message_bytes);
    serve_transport(server, principal, transport).await
}

async fn serve_transport(
    server: Arc<Server>,
    principal: Principal,
    transport: LineTransport,
) -> Result<(), StdioError> {
    loop {
        let session = Session::new(Arc::clone(&server), principal.clone());
        match session.serve(transport.clone()).await {
            Ok(running) => {
                running.waiting().await?;
                return Ok(());
            }
            Err(ServerInitializeError::ConnectionClosed(_) | ServerInitializeError::Cancelled) => {
                return Ok(());
            }
            // Before the session began the client sent something other than a request (a
            // notification, a response): nothing to answer, and no reason to hang up. Begin
            // again with the next message.
            Err(
                ServerInitializeError::ExpectedInitializeRequest(_)
                | ServerInitializeError::InitializeFailed(_)
                | ServerInitializeError::UnexpectedInitializeResponse(_),
            ) => {}
            Err(e) => return Err(StdioError::Start(Box::new(e))),
        }
    }
}

/// A line read, or why there is none.
#[derive(Debug)]
enum Inbound {
    Line(Vec<u8>),
    TooLong,
}

/// Newline-delimited JSON-RPC for rmcp, fed by a reader thread, feeding a writer thread.
#[derive(Clone)]
pub struct LineTransport {
    inbound: Arc<tokio::sync::Mutex<mpsc::Receiver<Inbound>>>,
    outbound: mpsc::Sender<Vec<u8>>,
    ids: Arc<Mutex<IdMap>>,
    max_message_bytes: usize,
    /// Cancelled when the input closed, to end open subscriptions with their result.
    ending: ListenEnd,
    /// When open subscriptions stop being waited for, once the input closed.
    farewell: Arc<Mutex<Option<tokio::time::Instant>>>,
}

impl std::fmt::Debug for LineTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineTransport")
            .field("max_message_bytes", &self.max_message_bytes)
            .finish_non_exhaustive()
    }
}

impl LineTransport {
    /// Starts the reader and writer threads.
    fn spawn<R, W>(input: R, output: W, max_message_bytes: usize) -> Self
    where
        R: Read + Send + 'static,
        W: Write + Send + 'static,
    {
        let (in_tx, in_rx) = mpsc::channel(INBOUND_CAPACITY);
        let (out_tx, out_rx) = mpsc::channel(OUTBOUND_CAPACITY);
        std::thread::spawn(move || read_lines(BufReader::new(input), max_message_bytes, &in_tx));
        std::thread::spawn(move || write_lines(BufWriter::new(output), out_rx));
        LineTransport::new(in_rx, out_tx, max_message_bytes)
    }

    /// Starts reading and writing as tasks on the runtime.
    fn spawn_async<R, W>(input: R, output: W, max_message_bytes: usize) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (in_tx, in_rx) = mpsc::channel(INBOUND_CAPACITY);
        let (out_tx, out_rx) = mpsc::channel(OUTBOUND_CAPACITY);
        tokio::spawn(read_lines_async(
            tokio::io::BufReader::new(input),
            max_message_bytes,
            in_tx,
        ));
        tokio::spawn(write_lines_async(output, out_rx));
        LineTransport::new(in_rx, out_tx, max_message_bytes)
    }

    fn new(
        inbound: mpsc::Receiver<Inbound>,
        outbound: mpsc::Sender<Vec<u8>>,
        max_message_bytes: usize,
    ) -> Self {
        LineTransport {
            inbound: Arc::new(tokio::sync::Mutex::new(inbound)),
            outbound,
            ids: Arc::new(Mutex::new(IdMap::default())),
            max_message_bytes,
            ending: ListenEnd::default(),
            farewell: Arc::default(),
        }
    }

    /// Queues a reply of the transport's own. Dropped if the writer is that far behind: a
    /// client that does not read its answers loses some error replies, not the session.
    fn reply(&self, message: &ServerJsonRpcMessage) {
        if let Some(line) = encode(message) {
            let _ = self.outbound.try_send(line);
        }
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, IdMap> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A decoded message, with its request id replaced by the transport's own; `None` if it
    /// goes no further.
    fn renumber(&self, message: ClientJsonRpcMessage) -> Option<ClientJsonRpcMessage> {
        match message {
            ClientJsonRpcMessage::Request(mut request) => {
                let Some(internal) = self.ids().assign(&request.id) else {
                    self.reply(&ServerJsonRpcMessage::error(
                        ErrorData::invalid_request(
                            format!(
                                "request id `{}` is already in use by a request in progress",
                                request.id
                            ),
                            None,
                        ),
                        Some(request.id),
                    ));
                    return None;
                };
                if matches!(
                    request.request,
                    ClientRequest::SubscriptionsListenRequest(_)
                ) {
                    self.ids().listens.insert(internal.clone());
                    request.request.extensions_mut().insert(self.ending.clone());
                }
                request.id = internal;
                Some(ClientJsonRpcMessage::Request(request))
            }
            ClientJsonRpcMessage::Notification(mut notification) => {
                if let ClientNotification::CancelledNotification(cancel) =
                    &mut notification.notification
                {
                    // A cancellation of nothing in progress is ignored, as the spec asks.
                    let internal = cancel
                        .params
                        .request_id
                        .as_ref()
                        .and_then(|external| self.ids().cancel(external))?;
                    cancel.params.request_id = Some(internal);
                }
                Some(ClientJsonRpcMessage::Notification(notification))
            }
            other => Some(other),
        }
    }

    /// An outgoing message with the client's id put back, in its own place and in the tag of a
    /// subscription's messages; `None` for the answer to a request that was cancelled (or never
    /// came from the client) and for a cancelled subscription's notifications.
    fn restore(&self, mut message: ServerJsonRpcMessage) -> Option<ServerJsonRpcMessage> {
        let id = match &mut message {
            ServerJsonRpcMessage::Notification(notification) => {
                let notification = &mut notification.notification;
                if let Some(internal) = notification.get_meta().subscription_id() {
                    let client = self.ids().client_of(&internal)?;
                    notification.get_meta_mut().set_subscription_id(client);
                }
                return Some(message);
            }
            ServerJsonRpcMessage::Response(response) => {
                if let ServerResult::SubscriptionsListenResult(result) = &mut response.result
                    && let Some(client) = self.ids().client_of(&response.id)
                {
                    result.meta.set_subscription_id(client);
                }
                &mut response.id
            }
            ServerJsonRpcMessage::Error(error) => match &mut error.id {
                Some(id) => id,
                None => return Some(message),
            },
            ServerJsonRpcMessage::Request(_) => return Some(message),
        };
        *id = self.ids().finish(id)?;
        Some(message)
    }

    /// The input closed: tells open subscriptions to end, and waits (briefly) until they have
    /// sent their result. Called again if rmcp gives up on one wait, it keeps the first
    /// deadline.
    async fn farewell(&self) {
        self.ending.0.cancel();
        let deadline = *self
            .farewell
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| tokio::time::Instant::now() + LISTEN_FAREWELL);
        let ended = Arc::clone(&self.ids().listen_ended);
        loop {
            // Waiting before the look, so that an end in between is not missed.
            let woken = ended.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.ids().listens.is_empty() {
                return;
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                return;
            }
        }
    }
}

impl Transport<RoleServer> for LineTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let line = self.restore(item).and_then(|m| encode(&m));
        let outbound = self.outbound.clone();
        async move {
            let Some(line) = line else { return Ok(()) };
            outbound.send(line).await.map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the output is closed")
            })
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        // Receiving from the channel is cancel-safe: rmcp polls this inside a `select!`.
        let mut inbound = self.inbound.lock().await;
        loop {
            let Some(inbound) = inbound.recv().await else {
                self.farewell().await;
                return None;
            };
            match inbound {
                Inbound::TooLong => self.reply(&ServerJsonRpcMessage::error(
                    ErrorData::invalid_request(
                        format!("message longer than {} bytes", self.max_message_bytes),
                        None,
                    ),
                    None,
                )),
                Inbound::Line(line) => match decode(&line) {
                    Decoded::Message(message) => {
                        if let Some(message) = self.renumber(*message) {
                            return Some(message);
                        }
                    }
                    Decoded::Reply(reply) => self.reply(&reply),
                    Decoded::Ignore => {}
                },
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

fn encode(message: &ServerJsonRpcMessage) -> Option<Vec<u8>> {
    let mut line = serde_json::to_vec(message).ok()?;
    line.push(b'\n');
    Some(line)
}

/// Client ids of requests in progress and the transport's ids for them.
#[derive(Debug, Default)]
struct IdMap {
    next: i64,
    by_client: HashMap<RequestId, RequestId>,
    by_transport: HashMap<RequestId, RequestId>,
    /// The transport's ids of `subscriptions/listen` requests in progress.
    listens: HashSet<RequestId>,
    /// Told each time one of `listens` ends, for the input's farewell, which waits for them.
    listen_ended: Arc<tokio::sync::Notify>,
}

impl IdMap {
    /// A fresh id for a request the client calls `client`, unless `client` is in use.
    fn assign(&mut self, client: &RequestId) -> Option<RequestId> {
        if self.by_client.contains_key(client) {
            return None;
        }
        self.next += 1;
        let internal = NumberOrString::Number(self.next);
        self.by_client.insert(client.clone(), internal.clone());
        self.by_transport.insert(internal.clone(), client.clone());
        Some(internal)
    }

    /// The client's id of a request in progress.
    fn client_of(&self, internal: &RequestId) -> Option<RequestId> {
        self.by_transport.get(internal).cloned()
    }

    /// The request is answered: its client id, which is free again.
    fn finish(&mut self, internal: &RequestId) -> Option<RequestId> {
        self.forget_listen(internal);
        let client = self.by_transport.remove(internal)?;
        self.by_client.remove(&client);
        Some(client)
    }

    /// The request is cancelled: forget it, so that no answer can reach the client.
    fn cancel(&mut self, client: &RequestId) -> Option<RequestId> {
        let internal = self.by_client.remove(client)?;
        self.by_transport.remove(&internal);
        self.forget_listen(&internal);
        Some(internal)
    }

    fn forget_listen(&mut self, internal: &RequestId) {
        if self.listens.remove(internal) {
            self.listen_ended.notify_waiters();
        }
    }
}

/// What a line the splitter completed is to the session. Lines are split as toolgate's
/// upstream client splits an upstream's output: over `max` bytes, a line is dropped as it
/// arrives and reported once its end is seen. A last line without a newline is no message.
fn inbound(line: Line) -> Option<Inbound> {
    match line {
        Line::Full(line) => Some(Inbound::Line(line)),
        Line::Oversized { .. } => Some(Inbound::TooLong),
        Line::End => None,
    }
}

/// The reader thread: lines until end of input.
fn read_lines<R: BufRead>(mut input: R, max: usize, lines: &mpsc::Sender<Inbound>) {
    let mut splitter = LineSplitter::new(max);
    loop {
        let (used, line) = match input.fill_buf() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok([]) | Err(_) => return,
            Ok(available) => splitter.take(available),
        };
        input.consume(used);
        if let Some(event) = line.and_then(inbound)
            && lines.blocking_send(event).is_err()
        {
            return;
        }
    }
}

/// The reading task: lines until end of input.
async fn read_lines_async<R: AsyncBufRead + Unpin>(
    mut input: R,
    max: usize,
    lines: mpsc::Sender<Inbound>,
) {
    let mut splitter = LineSplitter::new(max);
    loop {
        let (used, line) = match input.fill_buf().await {
            Ok([]) | Err(_) => return,
            Ok(available) => splitter.take(available),
        };
        input.consume(used);
        if let Some(event) = line.and_then(inbound)
            && lines.send(event).await.is_err()
        {
            return;
        }
    }
}

/// The writer thread: each message on its own line, flushed when nothing else is waiting.
fn write_lines<W: Write>(mut output: W, mut lines: mpsc::Receiver<Vec<u8>>) {
    while let Some(line) = lines.blocking_recv() {
        if output.write_all(&line).is_err() {
            return;
        }
        while let Ok(line) = lines.try_recv() {
            if output.write_all(&line).is_err() {
                return;
            }
        }
        if output.flush().is_err() {
            return;
        }
    }
}

/// The writing task: what is waiting, in one write.
async fn write_lines_async<W: AsyncWrite + Unpin>(
    mut output: W,
    mut lines: mpsc::Receiver<Vec<u8>>,
) {
    while let Some(mut batch) = lines.recv().await {
        while let Ok(line) = lines.try_recv() {
            batch.extend_from_slice(&line);
        }
        if output.write_all(&batch).await.is_err() || output.flush().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: i64) -> RequestId {
        NumberOrString::Number(n)
    }

    #[test]
    fn ids_in_use_are_refused_and_cancelled_ids_answer_nothing() {
        let mut ids = IdMap::default();
        let first = ids.assign(&id(1)).unwrap();
        assert_eq!(ids.assign(&id(1)), None, "in progress");
        assert_eq!(ids.cancel(&id(1)), Some(first.clone()));
        let second = ids.assign(&id(1)).unwrap();
        assert_ne!(first, second);
        assert_eq!(
            ids.finish(&first),
            None,
            "the cancelled call's late answer goes nowhere"
        );
        assert_eq!(ids.finish(&second), Some(id(1)));
        assert_eq!(ids.finish(&second), None);
        assert_eq!(ids.cancel(&id(9)), None);
    }

    #[test]
    fn long_lines_are_refused_and_reading_goes_on() {
        let (tx, mut rx) = mpsc::channel(8);
        let input = format!("{}\n{{}}\n{}", "x".repeat(100), "tail-without-newline");
        read_lines(std::io::Cursor::new(input.into_bytes()), 10, &tx);
        assert!(matches!(rx.try_recv(), Ok(Inbound::TooLong)));
        assert!(matches!(rx.try_recv(), Ok(Inbound::Line(l)) if l == b"{}"));
        assert!(
            rx.try_recv().is_err(),
            "an unterminated last line is not a message"
        );
    }
}
