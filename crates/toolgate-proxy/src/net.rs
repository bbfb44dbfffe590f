//! How the proxy resolves names and opens connections, as traits so tests decide both.
//!
//! The proxy never hands a name to anything that connects: it resolves the name through a
//! [`Resolver`], judges every address returned, and gives the [`Connector`] one checked socket
//! address. There is no second resolution between the check and the connection, so a name that
//! answers differently the second time (DNS rebinding) gains nothing.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::pin::Pin;

use tokio::net::TcpStream;

/// A future a [`Connector`] returns.
pub type Connecting = Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send>>;

/// Resolves a host name to addresses. Called on a blocking thread, under the proxy's resolve
/// timeout.
pub trait Resolver: Send + Sync + 'static {
    /// Every address `name` (lowercase, without a trailing dot) resolves to.
    fn resolve(&self, name: &str) -> io::Result<Vec<IpAddr>>;
}

/// Opens a TCP connection to an address the proxy has already checked.
pub trait Connector: Send + Sync + 'static {
    /// Connects to `addr`.
    fn connect(&self, addr: SocketAddr) -> Connecting;
}

/// The system's resolver (`getaddrinfo` through [`ToSocketAddrs`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve(&self, name: &str) -> io::Result<Vec<IpAddr>> {
        Ok((name, 0).to_socket_addrs()?.map(|addr| addr.ip()).collect())
    }
}

/// Connects to the address it is given, directly.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirectConnector;

impl Connector for DirectConnector {
    fn connect(&self, addr: SocketAddr) -> Connecting {
        Box::pin(TcpStream::connect(addr))
    }
}
