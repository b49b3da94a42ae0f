// SPDX-License-Identifier: GPL-2.0

//! Module-wide state: the sysfs tree `/sys/kernel/svcrdma_rs/`, the devices
//! that have carried a connection, and connection ids.
//!
//! ```text
//! /sys/kernel/svcrdma_rs/devices/<ibdev>/{transport,memreg,fast_reg,...}
//! /sys/kernel/svcrdma_rs/devices/<ibdev>/stats/{calls,bytes_read,...}
//! /sys/kernel/svcrdma_rs/connections/<id>/{peer,device,memreg,...}
//! /sys/kernel/svcrdma_rs/connections/<id>/stats/{calls,bytes_read,...}
//! /sys/kernel/svcrdma_rs/stats/{calls,bytes_read,...}
//! ```
//!
//! The files are documented in `Documentation/ABI/sysfs-kernel-svcrdma_rs`.

use kernel::{
    new_mutex,
    prelude::*,
    str::CString,
    sync::{
        atomic::{ordering::Relaxed, Atomic},
        Arc, Mutex,
    },
};

use super::stats::{stats_files, ConnStats, ConnStatsView, Counters, Summed};
use crate::{
    log::pr_warn_ratelimited,
    params,
    proto::{
        addr::SockAddr,
        cm_private::CmPrivate,
        memreg::{decide, send_with_invalidate, DeviceCaps, Model, Transport},
    },
    rdma::DevName,
    sysfs::{sysfs_ktype, Attrs, Dir, KType, Parent, ShowFn},
};

/// What `/sys/kernel/svcrdma_rs/devices/<ibdev>/` shows.
pub(crate) struct DeviceAttrs {
    name: DevName,
    transport: Transport,
    /// As the device reports them; test overrides apply when shown.
    caps: DeviceCaps,
}

impl DeviceAttrs {
    fn effective(&self) -> DeviceCaps {
        params::caps_override().apply(self.caps)
    }
}

impl Attrs for DeviceAttrs {
    const FILES: &'static [(&'static CStr, ShowFn<Self>)] = &[
        (c"transport", |d, w| w.write_str(d.transport.name())),
        (c"memreg", |d, w| {
            // The model the device's next connection gets, with the
            // parameters as they are now.
            match decide(
                d.transport,
                &d.effective(),
                params::memreg(),
                params::dma_mr(),
            ) {
                Ok(m) => w.write_str(m.name()),
                Err(_) => w.write_str("refused"),
            }
        }),
        (c"fast_reg", |d, w| {
            write!(w, "{}", u8::from(d.effective().fast_reg))
        }),
        (c"local_dma_lkey", |d, w| {
            write!(w, "{}", u8::from(d.effective().local_dma_lkey))
        }),
        (c"max_fast_reg_page_list_len", |d, w| {
            write!(w, "{}", d.caps.max_fast_reg_page_list_len)
        }),
        (c"read_with_invalidate", |d, w| {
            write!(w, "{}", u8::from(d.caps.read_with_inv))
        }),
    ];

    fn ktype() -> &'static KType<Self> {
        sysfs_ktype!(DeviceAttrs)
    }
}

/// What `/sys/kernel/svcrdma_rs/connections/<id>/` shows (fixed at accept).
#[derive(Clone, Copy)]
pub(crate) struct ConnAttrs {
    pub(crate) peer: Option<SockAddr>,
    pub(crate) device: DevName,
    pub(crate) transport: Transport,
    pub(crate) model: Model,
    /// What the client's RFC 8797 private data said (or the defaults).
    pub(crate) client: CmPrivate,
    /// Our R bit.
    pub(crate) server_r: bool,
    /// Credits granted.
    pub(crate) credits: u32,
    /// Entries in the connection's FRMR pool, the most MRs it may have (0
    /// unless the model is FRMR).
    pub(crate) frmr_pool: usize,
    /// The device's capabilities (test overrides applied) at accept.
    pub(crate) caps: DeviceCaps,
}

impl ConnAttrs {
    /// Send With Invalidate may be used: both peers set R (RFC 8797 §4)
    /// and the device has it.
    pub(crate) fn remote_invalidate(&self) -> bool {
        send_with_invalidate(self.client.remote_invalidate, self.server_r, &self.caps)
    }
}

/// What `/sys/kernel/svcrdma_rs/connections/<id>/` shows: the set-up,
/// fixed at accept, and whether a backchannel has been bound since.
pub(crate) struct ConnView {
    pub(crate) info: ConnAttrs,
    /// nfsd bound an NFSv4.1 backchannel to the connection (set once).
    backchannel: Atomic<bool>,
    /// FRMR pool entries whose MR exists (allocated on first use).
    frmr_allocated: Atomic<u32>,
    /// FRMR pool entries retired after a failed Read.
    frmr_retired: Atomic<u32>,
}

impl ConnView {
    /// Records that a backchannel is bound.
    #[cfg_attr(not(svcrdma_rs_backchannel), allow(dead_code))]
    pub(crate) fn set_backchannel(&self) {
        self.backchannel.store(true, Relaxed);
    }

    /// Records the FRMR pool's counts.
    pub(crate) fn set_frmr(&self, allocated: u32, retired: u32) {
        self.frmr_allocated.store(allocated, Relaxed);
        self.frmr_retired.store(retired, Relaxed);
    }
}

impl Attrs for ConnView {
    const FILES: &'static [(&'static CStr, ShowFn<Self>)] = &[
        (c"peer", |c, w| match &c.info.peer {
            Some(a) => write!(w, "{a}"),
            None => w.write_str("unknown"),
        }),
        (c"device", |c, w| write!(w, "{}", c.info.device)),
        (c"transport", |c, w| w.write_str(c.info.transport.name())),
        (c"memreg", |c, w| w.write_str(c.info.model.name())),
        (c"client_send_size", |c, w| {
            write!(w, "{}", c.info.client.send_size)
        }),
        (c"client_recv_size", |c, w| {
            write!(w, "{}", c.info.client.recv_size)
        }),
        (c"client_remote_invalidate", |c, w| {
            write!(w, "{}", u8::from(c.info.client.remote_invalidate))
        }),
        (c"remote_invalidate", |c, w| {
            write!(w, "{}", u8::from(c.info.remote_invalidate()))
        }),
        (c"credits", |c, w| write!(w, "{}", c.info.credits)),
        (c"frmr_pool", |c, w| write!(w, "{}", c.info.frmr_pool)),
        (c"frmr_allocated", |c, w| {
            write!(w, "{}", c.frmr_allocated.load(Relaxed))
        }),
        (c"frmr_retired", |c, w| {
            write!(w, "{}", c.frmr_retired.load(Relaxed))
        }),
        (c"backchannel", |c, w| {
            write!(w, "{}", u8::from(c.backchannel.load(Relaxed)))
        }),
    ];

    fn ktype() -> &'static KType<Self> {
        sysfs_ktype!(ConnView)
    }
}

/// `stats/` of the module (`None`) or of one device: the sums over the
/// live connections and those that went.
pub(crate) struct TotalsView(Option<DevName>, Arc<StatsSet>);

impl Summed for TotalsView {
    fn each(&self, f: &mut dyn FnMut(&Counters)) {
        self.1.each(self.0, f);
    }
}

impl Attrs for TotalsView {
    const FILES: &'static [(&'static CStr, ShowFn<Self>)] = stats_files!(Self);

    fn ktype() -> &'static KType<Self> {
        sysfs_ktype!(TotalsView)
    }
}

/// Module-wide state: the class's data ([`super::class`]), which every
/// listener and connection holds.
#[pin_data]
pub(crate) struct Registry {
    /// `stats/`.
    _totals: Dir<TotalsView>,
    /// Devices that have carried a connection, each with its `stats/`
    /// (first in the pair: dropped before its parent).
    #[pin]
    devices: Mutex<KVec<(Dir<TotalsView>, Dir<DeviceAttrs>)>>,
    /// What the `stats/` directories sum (each holds a reference).
    stats: Arc<StatsSet>,
    next_conn_id: Atomic<u64>,
    devices_dir: Parent,
    conns_dir: Parent,
    /// `/sys/kernel/svcrdma_rs` (dropped last: it holds the others).
    _root: Parent,
}

/// The counters of the live connections, and, per device, the sums of
/// those that went.
#[pin_data]
pub(crate) struct StatsSet {
    #[pin]
    lists: Mutex<StatsLists>,
}

struct StatsLists {
    live: KVec<Arc<ConnStats>>,
    retired: KVec<KBox<ConnStats>>,
}

/// Creates the registry and its sysfs tree, which go when the last
/// reference does.
pub(crate) fn new() -> Result<Arc<Registry>> {
    let stats = Arc::pin_init(
        pin_init!(StatsSet {
            lists <- new_mutex!(StatsLists {
                live: KVec::new(),
                retired: KVec::new(),
            }),
        }),
        GFP_KERNEL,
    )?;
    let root = Parent::under_kernel(c"svcrdma_rs")?;
    let devices_dir = root.child(c"devices")?;
    let conns_dir = root.child(c"connections")?;
    let totals = Dir::new(&root, c"stats", TotalsView(None, stats.clone()))?;
    Arc::pin_init(
        try_pin_init!(Registry {
            _totals: totals,
            devices <- new_mutex!(KVec::new()),
            stats,
            next_conn_id: Atomic::new(1),
            devices_dir,
            conns_dir,
            _root: root,
        }),
        GFP_KERNEL,
    )
}

impl Registry {
    /// A new connection id (never reused while the module is loaded).
    pub(crate) fn next_conn_id(&self) -> u64 {
        self.next_conn_id.fetch_add(1, Relaxed)
    }

    /// Records that `name` carried a connection, with these properties:
    /// creates or refreshes its sysfs directory.
    pub(crate) fn note_device(&self, name: DevName, transport: Transport, caps: DeviceCaps) {
        let mut devs = self.devices.lock();
        if let Some(i) = devs.iter().position(|d| d.1.data().name == name) {
            let d = devs[i].1.data();
            if d.transport == transport && d.caps == caps {
                return;
            }
            // The same name now has other properties (re-created device).
            drop(devs.remove(i));
        }
        let dir = name.to_cstring().and_then(|n| {
            let dir = Dir::new(
                &self.devices_dir,
                &n,
                DeviceAttrs {
                    name,
                    transport,
                    caps,
                },
            )?;
            let stats = dir.child(c"stats", TotalsView(Some(name), self.stats.clone()))?;
            Ok((stats, dir))
        });
        let added = dir.and_then(|d| devs.push(d, GFP_KERNEL).map_err(|_| ENOMEM));
        if let Err(e) = added {
            pr_warn!(
                "sysfs entry for device {} not created: error {}\n",
                name,
                e.to_errno()
            );
        }
    }

    /// Creates `connections/<id>/` and its `stats/` (first in the pair:
    /// to be dropped first).
    pub(crate) fn add_connection(
        &self,
        id: u64,
        info: ConnAttrs,
        stats: &Arc<ConnStats>,
    ) -> Result<(Dir<ConnStatsView>, Dir<ConnView>)> {
        let name = CString::try_from_fmt(fmt!("{id}"))?;
        let view = ConnView {
            info,
            backchannel: Atomic::new(false),
            frmr_allocated: Atomic::new(0),
            frmr_retired: Atomic::new(0),
        };
        let dir = Dir::new(&self.conns_dir, &name, view)?;
        let sdir = dir.child(c"stats", ConnStatsView(stats.clone()))?;
        Ok((sdir, dir))
    }

    /// A connection's counters, counted in the totals from now on.
    pub(crate) fn stats_started(&self, stats: &Arc<ConnStats>) -> Result {
        self.stats
            .lists
            .lock()
            .live
            .push(stats.clone(), GFP_KERNEL)?;
        Ok(())
    }

    /// A connection went: its counts move to its device's retired sums.
    pub(crate) fn stats_ended(&self, stats: &Arc<ConnStats>) {
        let mut l = self.stats.lists.lock();
        let Some(i) = l.live.iter().position(|s| Arc::ptr_eq(s, stats)) else {
            return;
        };
        let gone = l.live.remove(i);
        let Ok(gone) = gone else {
            return;
        };
        if let Some(r) = l.retired.iter().find(|r| r.device == gone.device) {
            r.c.absorb(&gone.c);
            return;
        }
        let sum = KBox::new(ConnStats::new(gone.device), GFP_KERNEL);
        match sum {
            Ok(sum) => {
                sum.c.absorb(&gone.c);
                if l.retired.push(sum, GFP_KERNEL).is_err() {
                    pr_warn_ratelimited!(
                        "a connection's counters are lost from the totals (out of memory)\n"
                    );
                }
            }
            Err(_) => {
                pr_warn_ratelimited!(
                    "a connection's counters are lost from the totals (out of memory)\n"
                );
            }
        }
    }
}

impl StatsSet {
    /// Calls `f` on the counters of every connection on `device` (every
    /// connection if `None`), live or gone.
    fn each(&self, device: Option<DevName>, f: &mut dyn FnMut(&Counters)) {
        let l = self.lists.lock();
        let ours = |d: &DevName| device.is_none_or(|want| want == *d);
        for s in l.live.iter().filter(|s| ours(&s.device)) {
            f(&s.c);
        }
        for s in l.retired.iter().filter(|s| ours(&s.device)) {
            f(&s.c);
        }
    }
}
