//! The network interfaces as the kernel's interface ioctls report them,
//! the calls cf-agent itself makes: SIOCGIFCONF for the IPv4 addresses,
//! SIOCGIFFLAGS for an interface's flags, SIOCGIFHWADDR for its hardware
//! type and address. On one datagram socket these cost a few microseconds
//! where `getifaddrs` (two netlink dumps) costs some forty, and one ioctl
//! replaces reading two `/sys/class/net` files.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A socket to ask the interface ioctls on.
#[derive(Debug)]
pub struct Interfaces {
    socket: OwnedFd,
}

/// One IPv4 address of an interface, in SIOCGIFCONF's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Address {
    /// The interface name or address label (`eth0`, `eth0:1`).
    pub name: String,
    pub addr: Ipv4Addr,
    /// The interface flags (`IFF_UP`...), as SIOCGIFFLAGS gives them.
    pub flags: u32,
}

/// An interface's hardware type (`ARPHRD_ETHER`...) and the first bytes
/// of its hardware address (zeros past the address's length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hardware {
    pub kind: u16,
    pub addr: [u8; 14],
}

fn request(name: &str) -> Option<libc::ifreq> {
    // SAFETY: ifreq is plain data; all zeros is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= req.ifr_name.len() || bytes.contains(&0) {
        return None;
    }
    for (dst, &b) in req.ifr_name.iter_mut().zip(bytes) {
        *dst = b as libc::c_char;
    }
    Some(req)
}

impl Interfaces {
    pub fn open() -> io::Result<Interfaces> {
        // SAFETY: socket has no memory preconditions; a non-negative result
        // is a descriptor we own.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just returned by socket and is owned by nobody else.
        Ok(Interfaces {
            socket: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// The IPv4 addresses of all interfaces (SIOCGIFCONF), each with its
    /// interface's flags; an address whose flags cannot be read (its
    /// interface just went away) is left out.
    pub fn ipv4(&self) -> Vec<Ipv4Address> {
        let size = std::mem::size_of::<libc::ifreq>();
        let mut slots = 64usize;
        let reqs = loop {
            // SAFETY: ifreq is plain data; all zeros is a valid value.
            let mut buf: Vec<libc::ifreq> =
                (0..slots).map(|_| unsafe { std::mem::zeroed() }).collect();
            let Ok(len) = libc::c_int::try_from(slots * size) else {
                return Vec::new();
            };
            let mut conf = libc::ifconf {
                ifc_len: len,
                ifc_ifcu: libc::__c_anonymous_ifc_ifcu {
                    ifcu_req: buf.as_mut_ptr(),
                },
            };
            // SAFETY: `conf` points at `slots` ifreqs the kernel may fill;
            // it writes back how many bytes it used.
            if unsafe { libc::ioctl(self.socket.as_raw_fd(), libc::SIOCGIFCONF, &mut conf) } < 0 {
                return Vec::new();
            }
            let used = usize::try_from(conf.ifc_len).unwrap_or(0) / size;
            // A full buffer may have cut the list short: ask again, larger.
            if used < slots {
                buf.truncate(used);
                break buf;
            }
            slots *= 4;
        };
        reqs.into_iter()
            .filter_map(|mut req| {
                // SAFETY: SIOCGIFCONF fills ifru_addr; for AF_INET (the only
                // family it lists) it holds a sockaddr_in.
                let addr = unsafe {
                    let sa = &req.ifr_ifru.ifru_addr;
                    if i32::from(sa.sa_family) != libc::AF_INET {
                        return None;
                    }
                    let sin = &*(sa as *const libc::sockaddr as *const libc::sockaddr_in);
                    Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))
                };
                let name_bytes: Vec<u8> = req
                    .ifr_name
                    .iter()
                    .take_while(|&&c| c != 0)
                    .map(|&c| c as u8)
                    .collect();
                let name = String::from_utf8_lossy(&name_bytes).into_owned();
                // SAFETY: `req` names the interface; the kernel writes its
                // flags into ifru_flags.
                let flags = unsafe {
                    if libc::ioctl(self.socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) < 0 {
                        return None;
                    }
                    req.ifr_ifru.ifru_flags
                };
                Some(Ipv4Address {
                    name,
                    addr,
                    // The flags are the kernel's unsigned short.
                    flags: u32::from(flags as u16),
                })
            })
            .collect()
    }

    /// The hardware type and address of the device `name` (SIOCGIFHWADDR);
    /// `None` when there is no such device.
    pub fn hardware(&self, name: &str) -> Option<Hardware> {
        let mut req = request(name)?;
        // SAFETY: `req` names the device; the kernel writes the type and
        // address into ifru_hwaddr.
        let sa = unsafe {
            if libc::ioctl(self.socket.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) < 0 {
                return None;
            }
            req.ifr_ifru.ifru_hwaddr
        };
        Some(Hardware {
            kind: sa.sa_family,
            addr: sa.sa_data.map(|b| b as u8),
        })
    }
}
