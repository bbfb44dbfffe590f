//! The `Host` and `Origin` rules of a server on a loopback address, which a page in the user's
//! browser can make the browser send requests to: by DNS rebinding (a hostile name that
//! resolves to 127.0.0.1, whose requests still carry that name in `Host`) or by a cross-site
//! request (whose `Origin` names the other site). The approval console and the MCP server over
//! HTTP apply the same `Host` rule; the console's `Origin` rule is stricter than
//! [`is_loopback_origin`] (only its own page).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

/// The `Host` values that name a server listening on `local`: its address with the port (both
/// loopback addresses for an unspecified one), `localhost` with the port for a loopback or
/// unspecified one, and `extra` (a reverse proxy's name, as `host:port`). A hostile page whose
/// name resolves to 127.0.0.1 still sends its own name, which is none of these (DNS rebinding).
pub fn own_hosts(local: SocketAddr, extra: &[String]) -> Vec<String> {
    let port = local.port();
    let mut hosts = Vec::new();
    let mut add_ip = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => hosts.push(format!("{v4}:{port}")),
        IpAddr::V6(v6) => hosts.push(format!("[{v6}]:{port}")),
    };
    if local.ip().is_unspecified() {
        add_ip(IpAddr::from([127, 0, 0, 1]));
        add_ip(IpAddr::from(Ipv6Addr::LOCALHOST));
    } else {
        add_ip(local.ip());
    }
    if local.ip().is_loopback() || local.ip().is_unspecified() {
        hosts.push(format!("localhost:{port}"));
    }
    hosts.extend(extra.iter().cloned());
    hosts
}

/// Whether a request's `Host` value is one of `hosts` (from [`own_hosts`]), in any case, as
/// host names are compared. A request without one names no host.
pub fn is_own_host(host: Option<&str>, hosts: &[String]) -> bool {
    host.is_some_and(|host| hosts.iter().any(|own| own.eq_ignore_ascii_case(host)))
}

/// Whether a request's `Origin` is absent (not a browser, or a same-origin `GET`) or on a
/// loopback host, any port: `http://localhost:6274`, `https://[::1]`.
pub fn is_loopback_origin(origin: Option<&str>) -> bool {
    let Some(origin) = origin else {
        return true;
    };
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = match rest.strip_prefix('[') {
        Some(v6) => v6.split_once(']').map(|(h, _)| h),
        None => Some(rest.split_once(':').map_or(rest, |(h, _)| h)),
    };
    match host {
        Some(host) if host.eq_ignore_ascii_case("localhost") => true,
        Some(host) => host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_origins_pass() {
        assert!(is_loopback_origin(None));
        for ok in [
            "http://localhost:6274",
            "http://127.0.0.1:8080",
            "https://LOCALHOST",
            "http://[::1]:3000",
            "http://127.8.9.1",
        ] {
            assert!(is_loopback_origin(Some(ok)), "{ok}");
        }
        for bad in [
            "null",
            "http://evil.example.com",
            "http://localhost.evil.example.com:80",
            "http://127.0.0.1.nip.io",
            "file://",
            "http://[::2]:1",
            "ftp://localhost",
        ] {
            assert!(!is_loopback_origin(Some(bad)), "{bad}");
        }
    }

    #[test]
    fn hosts_are_the_bound_address_and_localhost() {
        let v4: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        assert_eq!(own_hosts(v4, &[]), ["127.0.0.1:4000", "localhost:4000"]);
        let v6: SocketAddr = "[::1]:4000".parse().unwrap();
        assert_eq!(own_hosts(v6, &[]), ["[::1]:4000", "localhost:4000"]);
        let any: SocketAddr = "0.0.0.0:4000".parse().unwrap();
        assert_eq!(
            own_hosts(any, &["gate.internal:443".into()]),
            [
                "127.0.0.1:4000",
                "[::1]:4000",
                "localhost:4000",
                "gate.internal:443"
            ]
        );
        let lan: SocketAddr = "192.0.2.7:4000".parse().unwrap();
        assert_eq!(own_hosts(lan, &[]), ["192.0.2.7:4000"]);
        let hosts = own_hosts(v4, &[]);
        assert!(is_own_host(Some("LOCALHOST:4000"), &hosts));
        assert!(!is_own_host(Some("localhost:4001"), &hosts));
        assert!(!is_own_host(None, &hosts));
    }
}
