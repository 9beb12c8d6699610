//! Passing one descriptor from the child to rootfence over a socket pair
//! (`SCM_RIGHTS` with one byte, on sequenced packets, so the descriptor
//! arrives with its byte or not at all).

use std::io;
use std::os::fd::{OwnedFd, RawFd};

/// Send `fd` on `sock`; the errno on failure.
///
/// # Safety
///
/// Async-signal-safe (a control buffer on the stack and `sendmsg`): for
/// the child between `clone` and `exec`.
pub unsafe fn send(sock: RawFd, fd: RawFd) -> Result<(), i32> {
    let mut cbuf = [0u64; 4];
    let mut byte = 0u8;
    let mut iov = libc::iovec {
        iov_base: (&raw mut byte).cast(),
        iov_len: 1,
    };
    // SAFETY (whole body): the message and its control data live on this
    // stack frame; CMSG_* compute offsets inside `cbuf`, which is large
    // enough for one descriptor.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), fd);
        if libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) != 1 {
            return Err(*libc::__errno_location());
        }
    }
    Ok(())
}

/// Why the descriptor the child was to send is not here.
#[derive(Debug, thiserror::Error)]
pub enum NotReceived {
    /// Receiving failed.
    #[error("receiving {what}: {source}")]
    Receive {
        /// What was to come.
        what: &'static str,
        /// The error.
        source: io::Error,
    },
    /// A message came without it.
    #[error("the child did not send {what}")]
    NotSent {
        /// What was to come.
        what: &'static str,
    },
}

/// The one descriptor waiting on `sock` (already sent: the child sends it
/// before `execve`), close-on-exec; `what` names it in the error.
pub fn receive(sock: &OwnedFd, what: &'static str) -> Result<OwnedFd, NotReceived> {
    let mut byte = [0u8; 1];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = rustix::net::RecvAncillaryBuffer::new(&mut space);
    let mut iov = [io::IoSliceMut::new(&mut byte)];
    rustix::net::recvmsg(
        sock,
        &mut iov,
        &mut control,
        rustix::net::RecvFlags::DONTWAIT | rustix::net::RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(|e| NotReceived::Receive {
        what,
        source: e.into(),
    })?;
    for m in control.drain() {
        if let rustix::net::RecvAncillaryMessage::ScmRights(mut fds) = m
            && let Some(fd) = fds.next()
        {
            return Ok(fd);
        }
    }
    Err(NotReceived::NotSent { what })
}
