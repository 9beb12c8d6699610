//! This machine's own addresses: every address of every interface of the
//! network namespace rootfence's proxy connects from, read when asked
//! (so an interface that came up since counts).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Every address of this machine's interfaces now, from `getifaddrs(3)`;
/// `Err` when they cannot be listed (then nothing may be assumed
/// foreign).
pub fn own_addresses() -> std::io::Result<Vec<IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` is a valid out-pointer; on success the list is ours
    // until `freeifaddrs`.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list `getifaddrs` returned, alive
        // until `freeifaddrs` below.
        let ifa = unsafe { &*p };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: `ifa_addr` points to a sockaddr whose family says
            // which structure it is.
            let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
            if family == libc::AF_INET {
                // SAFETY: an AF_INET address is a `sockaddr_in`.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                    sin.sin_addr.s_addr,
                ))));
            } else if family == libc::AF_INET6 {
                // SAFETY: an AF_INET6 address is a `sockaddr_in6`.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                out.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
            }
        }
        p = ifa.ifa_next;
    }
    // SAFETY: `head` came from a successful `getifaddrs` and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// Whether `addr` is one of this machine's own addresses, as an IPv4
/// address or any IPv6 form of one ([`super::rule::embedded_v4`]).
/// When the interfaces cannot be listed, every address counts as one
/// (fail closed).
pub fn is_own(addr: IpAddr) -> bool {
    let Ok(own) = own_addresses() else {
        return true;
    };
    let v4 = match addr {
        IpAddr::V6(a) => super::rule::embedded_v4(a).map(|(v4, _)| IpAddr::V4(v4)),
        IpAddr::V4(_) => None,
    };
    own.iter().any(|o| *o == addr || Some(*o) == v4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_an_own_address_and_a_public_one_is_not() {
        let own = own_addresses().unwrap();
        assert!(own.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)), "{own:?}");
        assert!(is_own("127.0.0.1".parse().unwrap()));
        assert!(is_own("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_own("192.0.2.77".parse().unwrap()));
    }
}
