//! Which addresses the proxy connects to: public unicast only.
//!
//! A confined command may name any host on the allowlist, but the name is only a name: whatever
//! it resolves to is judged here, so an allowed name pointed at `127.0.0.1`, the cloud metadata
//! service or a private network is refused. IPv6 forms that carry an IPv4 address (mapped,
//! compatible, translated, NAT64, 6to4) are judged by the address they carry, because that is
//! where the packets end up. The documentation ranges (`192.0.2.0/24`, `198.51.100.0/24`,
//! `203.0.113.0/24`, `2001:db8::/32`) count as public: nothing answers there, and tests use
//! them to stand for the internet.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of address an IP is, as far as the proxy cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressClass {
    /// Public unicast: the only class the proxy connects to.
    Public,
    /// A cloud metadata service (`169.254.169.254`, `fd00:ec2::254`, `100.100.100.200`, …).
    Metadata,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`, the deprecated IPv6 site-local
    /// `fec0::/10` and the local-use NAT64 prefix `64:ff9b:1::/48`.
    Private,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// Carrier-grade NAT, `100.64.0.0/10`.
    Shared,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// Unique local IPv6, `fc00::/7`.
    UniqueLocal,
    /// Everything else that is not public unicast: `240.0.0.0/4`, `192.0.0.0/24`,
    /// `198.18.0.0/15`, Teredo, discard-only and unallocated IPv6 outside `2000::/3`.
    Reserved,
}

impl AddressClass {
    /// Whether the proxy may connect to an address of this class.
    pub fn is_public(self) -> bool {
        self == Self::Public
    }

    /// The class as a short lowercase word, for reasons and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Metadata => "metadata",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::LinkLocal => "link-local",
            Self::Shared => "shared",
            Self::Unspecified => "unspecified",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::UniqueLocal => "unique-local",
            Self::Reserved => "reserved",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Metadata services of the clouds we know of; each also falls in a refused range, and is named
/// first so the reason says what it is.
const METADATA_V4: [Ipv4Addr; 4] = [
    Ipv4Addr::new(169, 254, 169, 254), // AWS, GCP, Azure, OpenStack, …
    Ipv4Addr::new(169, 254, 170, 2),   // AWS ECS task metadata
    Ipv4Addr::new(100, 100, 100, 200), // Alibaba Cloud
    Ipv4Addr::new(192, 0, 0, 192),     // Oracle Cloud (classic)
];
const METADATA_V6: [Ipv6Addr; 1] = [Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254)];

/// Classifies an address.
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    use AddressClass::*;
    if METADATA_V4.contains(&ip) {
        return Metadata;
    }
    let [a, b, c, d] = ip.octets();
    match (a, b, c, d) {
        (0, ..) => Unspecified,
        (127, ..) => Loopback,
        (10, ..) | (172, 16..=31, ..) | (192, 168, ..) => Private,
        (169, 254, ..) => LinkLocal,
        (100, 64..=127, ..) => Shared,
        (224..=239, ..) => Multicast,
        (255, 255, 255, 255) => Broadcast,
        (240..=255, ..) | (192, 0, 0, _) | (198, 18..=19, ..) => Reserved,
        _ => Public,
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    use AddressClass::*;
    if METADATA_V6.contains(&ip) {
        return Metadata;
    }
    if ip.is_unspecified() {
        return Unspecified;
    }
    if ip.is_loopback() {
        return Loopback;
    }
    let [s0, s1, s2, s3, s4, s5, s6, s7] = ip.segments();
    let embedded = Ipv4Addr::from((u32::from(s6) << 16) | u32::from(s7));
    match (s0, s1, s2, s3, s4, s5) {
        // IPv4-compatible (`::a.b.c.d`, deprecated), IPv4-mapped (`::ffff:a.b.c.d`) and
        // IPv4-translated (`::ffff:0:a.b.c.d`): the packets go to the IPv4 address.
        (0, 0, 0, 0, 0, 0) | (0, 0, 0, 0, 0, 0xffff) | (0, 0, 0, 0, 0xffff, 0) => {
            return classify_v4(embedded);
        }
        // NAT64's well-known prefix `64:ff9b::/96` reaches the IPv4 address it embeds.
        (0x64, 0xff9b, 0, 0, 0, 0) => return classify_v4(embedded),
        // The local-use NAT64 prefix leads into the site's own network.
        (0x64, 0xff9b, 1, ..) => return Private,
        // 6to4 (`2002::/16`) embeds the IPv4 relay address in bits 16 to 48.
        (0x2002, ..) => {
            return classify_v4(Ipv4Addr::from((u32::from(s1) << 16) | u32::from(s2)));
        }
        // Teredo tunnels to an obfuscated IPv4 address; nothing a command needs.
        (0x2001, 0, ..) => return Reserved,
        // Discard-only `100::/64`.
        (0x0100, 0, 0, 0, ..) => return Reserved,
        _ => {}
    }
    if s0 & 0xff00 == 0xff00 {
        Multicast
    } else if s0 & 0xffc0 == 0xfe80 {
        LinkLocal
    } else if s0 & 0xffc0 == 0xfec0 {
        Private
    } else if s0 & 0xfe00 == 0xfc00 {
        UniqueLocal
    } else if s0 & 0xe000 == 0x2000 {
        // Global unicast is `2000::/3`; everything outside it is unallocated or special.
        Public
    } else {
        Reserved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AddressClass::*;

    #[test]
    fn classifies_the_table() {
        let table: &[(&str, AddressClass)] = &[
            ("203.0.113.5", Public),
            ("8.8.8.8", Public),
            ("1.1.1.1", Public),
            ("172.15.255.255", Public),
            ("172.32.0.0", Public),
            ("100.63.255.255", Public),
            ("100.128.0.0", Public),
            ("127.0.0.1", Loopback),
            ("127.255.255.254", Loopback),
            ("10.0.0.1", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.1.1", Private),
            ("169.254.0.1", LinkLocal),
            ("169.254.169.254", Metadata),
            ("169.254.170.2", Metadata),
            ("100.100.100.200", Metadata),
            ("100.64.0.1", Shared),
            ("100.127.255.255", Shared),
            ("0.0.0.0", Unspecified),
            ("0.1.2.3", Unspecified),
            ("224.0.0.1", Multicast),
            ("239.255.255.255", Multicast),
            ("255.255.255.255", Broadcast),
            ("240.0.0.1", Reserved),
            ("192.0.0.8", Reserved),
            ("198.18.0.1", Reserved),
            ("::", Unspecified),
            ("::1", Loopback),
            ("::ffff:127.0.0.1", Loopback),
            ("::ffff:10.0.0.1", Private),
            ("::ffff:169.254.169.254", Metadata),
            ("::ffff:203.0.113.5", Public),
            ("::127.0.0.1", Loopback),
            ("::10.0.0.1", Private),
            ("::ffff:0:127.0.0.1", Loopback),
            ("64:ff9b::127.0.0.1", Loopback),
            ("64:ff9b::a9fe:a9fe", Metadata),
            ("64:ff9b::100.64.0.1", Shared),
            ("64:ff9b::203.0.113.5", Public),
            ("64:ff9b:1::1", Private),
            ("2002:7f00:1::", Loopback),
            ("2002:a00:1::1", Private),
            ("2002:cb00:7105::1", Public),
            ("2001:0:4136:e378::1", Reserved),
            ("100::1", Reserved),
            ("fd00:ec2::254", Metadata),
            ("fd00::1", UniqueLocal),
            ("fc00::1", UniqueLocal),
            ("fe80::1", LinkLocal),
            ("febf::1", LinkLocal),
            ("fec0::1", Private),
            ("ff02::1", Multicast),
            ("2001:db8::1", Public),
            ("2606:4700::1111", Public),
            ("4000::1", Reserved),
            ("1::1", Reserved),
        ];
        for (text, expected) in table {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(classify(ip), *expected, "{text}");
            assert_eq!(classify(ip).is_public(), *expected == Public, "{text}");
        }
    }
}
