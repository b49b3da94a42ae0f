// SPDX-License-Identifier: GPL-2.0

//! The memory-registration policy: how a connection's RDMA Read sinks are
//! registered, decided per connection from the device and the admin's
//! parameters.
//!
//! The server reads a client's data (NFS WRITE payloads, long calls) with
//! RDMA Read into its own pages, the *sink*. How the sink is registered
//! decides what a forged packet can reach (see `Documentation/security.rst`):
//!
//! - **FRMR** (fast registration, one-shot): a fresh key per RPC, covering
//!   only that RPC's pages, invalidated when the RPC is done.
//! - **global DMA MR, local only**: one key for all memory, used only in
//!   local work requests. On InfiniBand and RoCE the sink of an RDMA Read is
//!   never named on the wire, so this key is never exposed.
//! - **global DMA MR with remote write**: on iWARP the sink's key goes on
//!   the wire in the RDMA Read request and must allow remote write; a global
//!   one lets any host that sees it write anywhere in server memory.
//!
//! The table below is the one from the 2008 review of the C svcrdma's fast
//! registration work, per transport and device capabilities, for
//! `memreg=auto`:
//!
//! ```text
//!           fast reg   global lkey   DMA MR needed   remote write
//! iWARP        N           N              Y               Y
//!              N           Y              Y               Y
//!              Y           N              Y (local)       N
//!              Y           Y              N               -
//! IB/RoCE      N           N              Y (local)       N
//!              N           Y              N               -
//!              Y           N              Y (local)       N
//!              Y           Y              N               -
//! ```
//!
//! "DMA MR needed" without remote write is the local-only DMA MR that
//! `ib_alloc_pd()` makes for a device without a global lkey: send and
//! receive buffers need a local key, and it is never on the wire. The
//! `dma_mr` parameter governs the *registration strategy* (a global DMA MR
//! used for RDMA), not that local key.
//!
//! `auto` follows the table where a registration protects something: on
//! iWARP, and on IB/RoCE when `dma_mr=never` forbids the alternative. On
//! IB and RoCE otherwise it registers nothing: the Read sink is addressed
//! by the local DMA key, which never leaves the server (the response is
//! matched to its request by the transport), so a per-RPC registration
//! there costs a registration and a fenced invalidation per Read piece,
//! and their completions, for no protection. The C svcrdma does the same (its rw API registers only for
//! iWARP Reads).

use core::fmt;

/// The RDMA transport of a device port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// InfiniBand.
    Ib,
    /// RDMA over Converged Ethernet (IB transport over Ethernet/UDP).
    Roce,
    /// iWARP (RDMA over TCP).
    Iwarp,
    /// Anything else (e.g. USNIC): not usable for RPC-over-RDMA.
    Other,
}

impl Transport {
    /// The name in sysfs and logs.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Ib => "ib",
            Transport::Roce => "roce",
            Transport::Iwarp => "iwarp",
            Transport::Other => "other",
        }
    }

    /// Whether the sink of an RDMA Read is named on the wire (and so must
    /// carry remote-write access).
    pub fn read_sink_on_wire(self) -> bool {
        self == Transport::Iwarp
    }
}

/// What the device can do, as far as registration is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceCaps {
    /// `IB_DEVICE_MEM_MGT_EXTENSIONS`: fast registration work requests.
    pub fast_reg: bool,
    /// `max_fast_reg_page_list_len`; fast registration with 0 is unusable.
    pub max_fast_reg_page_list_len: u32,
    /// `IBK_LOCAL_DMA_LKEY`: a global lkey for local access.
    pub local_dma_lkey: bool,
    /// The device can RDMA Read with invalidate (iWARP).
    pub read_with_inv: bool,
}

impl DeviceCaps {
    /// Fast registration that can register at least one page.
    pub fn usable_fast_reg(&self) -> bool {
        self.fast_reg && self.max_fast_reg_page_list_len > 0
    }
}

/// The `memreg` parameter: which model to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memreg {
    /// No registration where no key goes on the wire (the local DMA MR on
    /// IB and RoCE, where `dma_mr` allows it); otherwise FRMR where the
    /// device supports it, else a global DMA MR.
    Auto,
    /// FRMR only; refuse devices without it.
    Frmr,
    /// A global DMA MR even where FRMR is supported.
    DmaMr,
}

/// The `dma_mr` parameter: where a global DMA MR may be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmaMrAllowed {
    /// Nowhere.
    Never,
    /// Only where its key never goes on the wire: IB and RoCE.
    IbOnly,
    /// Everywhere, including iWARP, where it exposes all server memory.
    Always,
}

impl DmaMrAllowed {
    /// Whether a DMA MR on `transport` is allowed.
    pub fn allows(self, transport: Transport) -> bool {
        match self {
            DmaMrAllowed::Never => false,
            DmaMrAllowed::IbOnly => !transport.read_sink_on_wire(),
            DmaMrAllowed::Always => true,
        }
    }
}

/// How a connection registers memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// Per-RPC fast registration of RDMA Read sinks.
    Frmr {
        /// Sinks need remote write (iWARP); always local write.
        sink_remote_write: bool,
        /// Invalidate with RDMA Read With Invalidate instead of LOCAL_INV.
        read_with_inv: bool,
        /// Local buffers use a local-only DMA MR (no global lkey).
        local_dma_mr: bool,
    },
    /// A global DMA MR for all memory, local access only.
    DmaMr {
        /// The device has no global lkey: a DMA MR must be allocated.
        allocate: bool,
    },
    /// A global DMA MR with remote write (iWARP): exposes all memory.
    DmaMrRemoteWrite,
}

impl Model {
    /// The value shown in sysfs (`memreg`).
    pub fn name(&self) -> &'static str {
        match self {
            Model::Frmr { .. } => "frmr",
            Model::DmaMr { .. } => "dma_mr",
            Model::DmaMrRemoteWrite => "dma_mr_remote_write",
        }
    }

    /// The strategy as admins grep for it in the kernel log.
    pub fn log_text(&self) -> &'static str {
        match self {
            Model::Frmr { .. } => "Using Fast Memory Registration",
            Model::DmaMr { .. } => "Using a Global DMA MR",
            Model::DmaMrRemoteWrite => {
                "Using a Global DMA MR (remote write: exposes all server memory)"
            }
        }
    }

    /// Whether the PD needs `IB_PD_UNSAFE_GLOBAL_RKEY` (a remote-accessible
    /// key for all memory).
    pub fn exposes_all_memory(&self) -> bool {
        matches!(self, Model::DmaMrRemoteWrite)
    }

    /// Our RFC 8797 R bit: set unless a remote-write DMA MR key is exposed
    /// (the one STag a remote invalidation would take from every RPC).
    pub fn r_bit(&self) -> bool {
        !self.exposes_all_memory()
    }
}

/// Whether a Reply may be a Send With Invalidate (of the one handle its
/// Call's chunks name): the client set the R bit of its RFC 8797 private
/// data (it expects remote invalidation), so did we, and the device has the
/// memory-management extensions (`IB_DEVICE_MEM_MGT_EXTENSIONS`, which
/// Send With Invalidate is part of; the C server checks the same flag).
pub fn send_with_invalidate(client_r: bool, server_r: bool, caps: &DeviceCaps) -> bool {
    client_r && server_r && caps.fast_reg
}

/// Why a connection is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The transport cannot carry RPC-over-RDMA.
    UnsupportedTransport,
    /// `memreg=frmr`, and the device has no (usable) fast registration.
    NoFastReg,
    /// The model would be a DMA MR that the `dma_mr` parameter forbids.
    DmaMrForbidden {
        /// The model that was forbidden.
        wanted: Model,
        /// The parameter value that forbade it.
        allowed: DmaMrAllowed,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::UnsupportedTransport => {
                f.write_str("the device's transport is not InfiniBand, RoCE or iWARP")
            }
            Refusal::NoFastReg => f.write_str(
                "memreg=frmr, but the device has no fast registration; set memreg=auto to allow a global DMA MR",
            ),
            Refusal::DmaMrForbidden { wanted, allowed } => {
                let (what, fix) = match wanted {
                    Model::DmaMrRemoteWrite => (
                        "a global DMA MR with remote write",
                        "dma_mr=always allows it (exposes all server memory to the fabric)",
                    ),
                    _ => ("a global DMA MR", "dma_mr=ib_only allows it"),
                };
                let param = match allowed {
                    DmaMrAllowed::Never => "dma_mr=never",
                    DmaMrAllowed::IbOnly => "dma_mr=ib_only",
                    DmaMrAllowed::Always => "dma_mr=always",
                };
                write!(f, "it would need {what}, which {param} forbids; {fix}")
            }
        }
    }
}

/// Decides the model for a new connection.
pub fn decide(
    transport: Transport,
    caps: &DeviceCaps,
    memreg: Memreg,
    allowed: DmaMrAllowed,
) -> Result<Model, Refusal> {
    if transport == Transport::Other {
        return Err(Refusal::UnsupportedTransport);
    }
    let frmr = Model::Frmr {
        sink_remote_write: transport.read_sink_on_wire(),
        read_with_inv: transport.read_sink_on_wire() && caps.read_with_inv,
        local_dma_mr: !caps.local_dma_lkey,
    };
    let dma_mr = if transport.read_sink_on_wire() {
        Model::DmaMrRemoteWrite
    } else {
        Model::DmaMr {
            allocate: !caps.local_dma_lkey,
        }
    };
    let wanted = match memreg {
        Memreg::Frmr if caps.usable_fast_reg() => return Ok(frmr),
        Memreg::Frmr => return Err(Refusal::NoFastReg),
        // IB and RoCE: the sink of an RDMA Read is never named on the wire,
        // so registering it protects nothing; where the admin allows the
        // local-only DMA MR, the sink needs no registration at all.
        Memreg::Auto if !transport.read_sink_on_wire() && allowed.allows(transport) => {
            return Ok(dma_mr)
        }
        Memreg::Auto if caps.usable_fast_reg() => return Ok(frmr),
        Memreg::Auto | Memreg::DmaMr => dma_mr,
    };
    if allowed.allows(transport) {
        Ok(wanted)
    } else {
        Err(Refusal::DmaMrForbidden { wanted, allowed })
    }
}

/// Strips the one trailing newline `echo` leaves in a sysfs write.
fn param_text(s: &[u8]) -> &[u8] {
    s.strip_suffix(b"\n").unwrap_or(s)
}

impl Memreg {
    /// Every value, in the order documented.
    pub const ALL: [Memreg; 3] = [Memreg::Auto, Memreg::Frmr, Memreg::DmaMr];

    /// The parameter's text.
    pub fn name(self) -> &'static str {
        match self {
            Memreg::Auto => "auto",
            Memreg::Frmr => "frmr",
            Memreg::DmaMr => "dma_mr",
        }
    }

    /// Parses a parameter value (exact name, optional trailing newline).
    pub fn parse(s: &[u8]) -> Option<Self> {
        let s = param_text(s);
        Self::ALL.into_iter().find(|m| m.name().as_bytes() == s)
    }
}

impl DmaMrAllowed {
    /// Every value, in the order documented.
    pub const ALL: [DmaMrAllowed; 3] = [
        DmaMrAllowed::Never,
        DmaMrAllowed::IbOnly,
        DmaMrAllowed::Always,
    ];

    /// The parameter's text.
    pub fn name(self) -> &'static str {
        match self {
            DmaMrAllowed::Never => "never",
            DmaMrAllowed::IbOnly => "ib_only",
            DmaMrAllowed::Always => "always",
        }
    }

    /// Parses a parameter value (exact name, optional trailing newline).
    pub fn parse(s: &[u8]) -> Option<Self> {
        let s = param_text(s);
        Self::ALL.into_iter().find(|m| m.name().as_bytes() == s)
    }
}

/// Test-only capability overrides (the `debug_caps` parameter of a debug
/// build): hide fast registration, or hide or pretend a global lkey, so that
/// every row of the table can be exercised on soft-RoCE and soft-iWARP; or
/// shrink the fast-registration page list to one page, so that a Call can
/// need more MRs than a connection has (`budget`).
///
/// Pretending a global lkey is safe: local access always uses the PD's local
/// lkey, which exists either way; only the decision changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CapsOverride {
    /// Treat the device as having no fast registration.
    pub no_fast_reg: bool,
    /// Force the global-lkey capability to this value.
    pub local_dma_lkey: Option<bool>,
    /// Let each MR map one page at most.
    pub short_page_list: bool,
}

impl CapsOverride {
    /// Parses `no_fast_reg`, `no_local_dma_lkey`, `local_dma_lkey`,
    /// `short_page_list`, comma-separated (empty: no override; one trailing newline allowed).
    /// Unknown, repeated or contradictory tokens are refused.
    pub fn parse(s: &[u8]) -> Option<Self> {
        let s = param_text(s);
        let mut o = Self::default();
        if s.is_empty() {
            return Some(o);
        }
        for tok in s.split(|&b| b == b',') {
            match tok {
                b"no_fast_reg" if !o.no_fast_reg => o.no_fast_reg = true,
                b"no_local_dma_lkey" if o.local_dma_lkey.is_none() => {
                    o.local_dma_lkey = Some(false)
                }
                b"local_dma_lkey" if o.local_dma_lkey.is_none() => o.local_dma_lkey = Some(true),
                b"short_page_list" if !o.short_page_list => o.short_page_list = true,
                _ => return None,
            }
        }
        Some(o)
    }

    /// The capabilities the policy sees.
    pub fn apply(&self, caps: DeviceCaps) -> DeviceCaps {
        DeviceCaps {
            fast_reg: caps.fast_reg && !self.no_fast_reg,
            local_dma_lkey: self.local_dma_lkey.unwrap_or(caps.local_dma_lkey),
            max_fast_reg_page_list_len: if self.short_page_list {
                caps.max_fast_reg_page_list_len.min(1)
            } else {
                caps.max_fast_reg_page_list_len
            },
            ..caps
        }
    }
}

impl fmt::Display for CapsOverride {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lkey = match self.local_dma_lkey {
            Some(false) => Some("no_local_dma_lkey"),
            Some(true) => Some("local_dma_lkey"),
            None => None,
        };
        let tokens = [
            self.no_fast_reg.then_some("no_fast_reg"),
            lkey,
            self.short_page_list.then_some("short_page_list"),
        ];
        let mut sep = "";
        for t in tokens.into_iter().flatten() {
            write!(f, "{sep}{t}")?;
            sep = ",";
        }
        Ok(())
    }
}
