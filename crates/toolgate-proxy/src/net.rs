//! How the proxy resolves names and opens connections, as traits so tests decide both.
//!
//! The proxy never hands a name to anything that connects: it resolves the name through a
//! [`Resolver`], judges every address returned, and gives the [`Connector`] one checked socket
//! address. There is no second resolution between the check and the connection, so a name that
//! answers differently the second time (DNS rebinding) gains nothing.

use std::collections::BTreeMap;
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

/// The system's resolver behind the names an operator pinned to addresses of their choosing
/// (a mirror on a known address, a name a test controls). A pinned address is still judged
/// like any other: a name pinned to a local address is refused all the same.
#[derive(Debug, Clone, Default)]
pub struct PinnedResolver {
    pins: BTreeMap<String, Vec<IpAddr>>,
}

impl PinnedResolver {
    /// Makes `host` (any case, no trailing dot) resolve to `addresses`.
    pub fn pin(&mut self, host: &str, addresses: Vec<IpAddr>) {
        self.pins.insert(host.to_ascii_lowercase(), addresses);
    }
}

impl Resolver for PinnedResolver {
    fn resolve(&self, name: &str) -> io::Result<Vec<IpAddr>> {
        match self.pins.get(name) {
            Some(addresses) => Ok(addresses.clone()),
            None => SystemResolver.resolve(name),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_answers_in_any_case_and_other_names_go_to_the_system() {
        let mut resolver = PinnedResolver::default();
        let mirror: IpAddr = "203.0.113.7".parse().unwrap();
        resolver.pin("Mirror.Test", vec![mirror]);
        assert_eq!(resolver.resolve("mirror.test").unwrap(), [mirror]);
        let local = resolver.resolve("localhost").unwrap();
        assert!(
            !local.is_empty() && local.iter().all(IpAddr::is_loopback),
            "{local:?}"
        );
    }
}
