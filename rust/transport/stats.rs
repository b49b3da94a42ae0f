// SPDX-License-Identifier: GPL-2.0

//! What each connection has done: counters an admin reads in sysfs
//! (`connections/<id>/stats/`, `devices/<ibdev>/stats/`, `stats/`; one
//! value per file, see `Documentation/ABI/sysfs-kernel-svcrdma_rs`) and
//! with `svcrdma-stat`.
//!
//! Each connection counts into its own [`ConnStats`] with relaxed atomic
//! adds: no counter is shared between connections on the data path. A
//! connection that goes adds its counts into its device's retired totals,
//! so the device and module totals (sums made only when read) never go
//! backwards.

use kernel::sync::atomic::{ordering::Relaxed, Atomic};

use crate::rdma::{wr::Tally, DevName};
use crate::sysfs::{sysfs_ktype, Attrs, KType, ShowFn};

/// Declares [`Counters`] with one `Atomic<u64>` per name, a show function
/// per counter (`show::<name>`), and `stats_files!(T)`: the sysfs files of
/// a `stats/` directory showing `T`'s sums. (`$d` is `$`, for the inner
/// macro's own variables.)
macro_rules! counters {
    ($d:tt; $($(#[$doc:meta])* $name:ident,)*) => {
        /// A set of counters (see the module documentation).
        pub(crate) struct Counters {
            $($(#[$doc])* pub(crate) $name: Atomic<u64>,)*
        }

        impl Counters {
            /// All zero.
            pub(crate) const fn new() -> Self {
                Self { $($name: Atomic::new(0),)* }
            }

            /// Adds `other`'s values to these.
            pub(crate) fn absorb(&self, other: &Counters) {
                $(self.$name.fetch_add(other.$name.load(Relaxed), Relaxed);)*
            }
        }

        /// Each counter's sysfs show function.
        #[allow(non_snake_case)]
        pub(crate) mod show {
            use super::{Counters, Summed};
            $(
                pub(crate) fn $name<T: Summed>(t: &T, w: &mut dyn core::fmt::Write) -> core::fmt::Result {
                    let mut n = 0u64;
                    t.each(&mut |c: &Counters| {
                        n = n.wrapping_add(c.$name.load(kernel::sync::atomic::ordering::Relaxed))
                    });
                    write!(w, "{n}")
                }
            )*
        }

        macro_rules! stats_files {
            ($d t:ty) => {
                &[$((
                    kernel::c_str!(stringify!($name)),
                    $crate::transport::stats::show::$name::<$d t> as $crate::sysfs::ShowFn<$d t>,
                ),)*]
            };
        }
        pub(crate) use stats_files;
    };
}

counters! { $;
    /// RPC Calls handed to nfsd.
    calls,
    /// Replies sent inline (in the Send).
    replies_inline,
    /// Replies whose payload went in Write chunks.
    replies_write_chunk,
    /// Replies sent in a Reply chunk.
    replies_reply_chunk,
    /// RDMA_ERROR ERR_VERS sent.
    rdma_errors_vers,
    /// RDMA_ERROR ERR_CHUNK sent.
    rdma_errors_chunk,
    /// Bytes received in Sends (transport header and inline data).
    bytes_recv_inline,
    /// Bytes pulled by RDMA Read (Read chunks).
    bytes_read,
    /// Bytes sent inline (transport header and inline data).
    bytes_sent_inline,
    /// Bytes pushed by RDMA Write (Write and Reply chunks).
    bytes_written,
    /// RDMA Read work requests posted.
    wr_read,
    /// RDMA Write work requests posted.
    wr_write,
    /// Send work requests posted.
    wr_send,
    /// Fast registrations posted (FRMR).
    mr_reg,
    /// Local invalidations posted (FRMR).
    mr_inv_local,
    /// Remote invalidations asked of the client (Send With Invalidate).
    mr_inv_remote,
    /// Times an nfsd thread waited for send-queue slots.
    sq_waits,
    /// Times an nfsd thread waited for FRMR pool entries (MRs).
    mr_waits,
    /// Receives that completed with no other buffer posted: the client's
    /// next Send would have found none.
    recv_starved,
    /// Work requests that completed with an error (flushes not counted).
    completion_errors,
    /// Backward Calls (NFSv4.1 callbacks) sent.
    backward_calls,
}

/// Something whose `stats/` directory shows the sums of sets of counters.
pub(crate) trait Summed: Send + Sync + Sized + 'static {
    /// Calls `f` on each set of counters that makes up the sums.
    fn each(&self, f: &mut dyn FnMut(&Counters));
}

/// One connection's counters, and its device's name (for the totals).
pub(crate) struct ConnStats {
    pub(crate) device: DevName,
    pub(crate) c: Counters,
}

impl ConnStats {
    /// All zero, for a connection on `device`.
    pub(crate) const fn new(device: DevName) -> Self {
        Self {
            device,
            c: Counters::new(),
        }
    }

    /// Counts a chain about to be posted.
    pub(crate) fn count_posted(&self, t: &Tally) {
        let c = &self.c;
        count(&c.wr_read, t.reads);
        count(&c.bytes_read, t.read_bytes);
        count(&c.wr_write, t.writes);
        count(&c.bytes_written, t.write_bytes);
        count(&c.wr_send, t.sends);
        count(&c.bytes_sent_inline, t.send_bytes);
        count(&c.mr_reg, t.regs);
        count(&c.mr_inv_local, t.local_invs);
        count(&c.mr_inv_remote, t.remote_invs);
    }
}

/// Adds `n` to `counter` (relaxed: a count, not a synchronization). Adding
/// nothing touches nothing: most chains count in a few of the counters, and
/// an atomic add on a line other nfsd threads write is the cost to avoid.
///
/// A module built with `SVCRDMA_RS_STATS=n` (make bench's counters-off arm
/// only) counts nothing.
#[inline]
pub(crate) fn count(counter: &Atomic<u64>, n: u64) {
    if cfg!(svcrdma_rs_no_stats) {
        return;
    }
    if n != 0 {
        counter.fetch_add(n, Relaxed);
    }
}

/// `connections/<id>/stats/`: one connection's counters.
pub(crate) struct ConnStatsView(pub(crate) kernel::sync::Arc<ConnStats>);

impl Summed for ConnStatsView {
    fn each(&self, f: &mut dyn FnMut(&Counters)) {
        f(&self.0.c);
    }
}

impl Attrs for ConnStatsView {
    const FILES: &'static [(&'static kernel::str::CStr, ShowFn<Self>)] = stats_files!(Self);

    fn ktype() -> &'static KType<Self> {
        sysfs_ktype!(ConnStatsView)
    }
}
