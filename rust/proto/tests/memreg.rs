// SPDX-License-Identifier: GPL-2.0

//! The memory-registration policy: the 2008 table, every row times every
//! parameter value, written out as expectations (not recomputed).

use svcrdma_proto::memreg::{decide, DeviceCaps, DmaMrAllowed, Memreg, Model, Refusal, Transport};

/// The transports a table row applies to: IB rows hold for RoCE too.
fn transports(t: Transport) -> &'static [Transport] {
    match t {
        Transport::Ib => &[Transport::Ib, Transport::Roce],
        _ => &[Transport::Iwarp],
    }
}

fn caps(fast_reg: bool, lkey: bool) -> DeviceCaps {
    DeviceCaps {
        fast_reg,
        max_fast_reg_page_list_len: if fast_reg { 512 } else { 0 },
        local_dma_lkey: lkey,
        read_with_inv: false,
    }
}

/// One row of the 2008 table: what `memreg=auto` must give, in table terms.
struct Row {
    t: Transport,
    fast_reg: bool,
    lkey: bool,
    /// "DMA MR needed" (for the read sink or for local access).
    dma_mr_needed: bool,
    /// "Remote WR access needed" on that DMA MR.
    remote_write: bool,
}

const TABLE: [Row; 8] = [
    // iWARP
    Row {
        t: Transport::Iwarp,
        fast_reg: false,
        lkey: false,
        dma_mr_needed: true,
        remote_write: true,
    },
    Row {
        t: Transport::Iwarp,
        fast_reg: false,
        lkey: true,
        dma_mr_needed: true,
        remote_write: true,
    },
    Row {
        t: Transport::Iwarp,
        fast_reg: true,
        lkey: false,
        dma_mr_needed: true,
        remote_write: false,
    },
    Row {
        t: Transport::Iwarp,
        fast_reg: true,
        lkey: true,
        dma_mr_needed: false,
        remote_write: false,
    },
    // IB ("Y N Y N" is the row the first C code got wrong)
    Row {
        t: Transport::Ib,
        fast_reg: false,
        lkey: false,
        dma_mr_needed: true,
        remote_write: false,
    },
    Row {
        t: Transport::Ib,
        fast_reg: false,
        lkey: true,
        dma_mr_needed: false,
        remote_write: false,
    },
    Row {
        t: Transport::Ib,
        fast_reg: true,
        lkey: false,
        dma_mr_needed: true,
        remote_write: false,
    },
    Row {
        t: Transport::Ib,
        fast_reg: true,
        lkey: true,
        dma_mr_needed: false,
        remote_write: false,
    },
];

/// The table's "DMA MR needed / remote write" for a model.
fn table_terms(m: &Model) -> (bool, bool) {
    match *m {
        Model::Frmr { local_dma_mr, .. } => (local_dma_mr, false),
        Model::DmaMr { allocate } => (allocate, false),
        Model::DmaMrRemoteWrite => (true, true),
    }
}

/// The `dma_mr` value under which `auto` prefers FRMR, as the 2008 table
/// does: `never` where the device has fast registration (on IB/RoCE any
/// other value lets `auto` skip registration), `always` where it has not
/// (a DMA MR is then the only model).
fn frmr_preferred(row: &Row) -> DmaMrAllowed {
    if row.fast_reg {
        DmaMrAllowed::Never
    } else {
        DmaMrAllowed::Always
    }
}

#[test]
fn auto_follows_the_2008_table_where_frmr_is_preferred() {
    for row in &TABLE {
        for &t in transports(row.t) {
            let m = decide(
                t,
                &caps(row.fast_reg, row.lkey),
                Memreg::Auto,
                frmr_preferred(row),
            )
            .unwrap_or_else(|e| panic!("{t:?} {} {}: refused: {e}", row.fast_reg, row.lkey));
            assert_eq!(
                table_terms(&m),
                (row.dma_mr_needed, row.remote_write),
                "{t:?} fast_reg={} lkey={}: {m:?}",
                row.fast_reg,
                row.lkey
            );
            // FRMR exactly where the device has it.
            assert_eq!(matches!(m, Model::Frmr { .. }), row.fast_reg, "{t:?}");
        }
    }
}

#[test]
fn auto_registers_nothing_on_ib_and_roce_where_dma_mr_is_allowed() {
    for row in TABLE.iter().filter(|r| r.t == Transport::Ib) {
        for &t in transports(row.t) {
            let dev = caps(row.fast_reg, row.lkey);
            for allowed in [DmaMrAllowed::IbOnly, DmaMrAllowed::Always] {
                let m = decide(t, &dev, Memreg::Auto, allowed);
                assert_eq!(
                    m,
                    Ok(Model::DmaMr {
                        allocate: !row.lkey
                    }),
                    "{t:?} fast_reg={} lkey={} {allowed:?}",
                    row.fast_reg,
                    row.lkey
                );
                // Nothing that reaches the wire: no remote key, R bit set.
                let m = m.unwrap();
                assert!(!m.exposes_all_memory() && m.r_bit());
            }
        }
    }
    // iWARP names the sink on the wire: auto keeps FRMR there, whatever
    // dma_mr allows.
    for allowed in [DmaMrAllowed::IbOnly, DmaMrAllowed::Always] {
        let m = decide(Transport::Iwarp, &caps(true, true), Memreg::Auto, allowed);
        assert!(matches!(m, Ok(Model::Frmr { .. })), "{allowed:?}: {m:?}");
    }
}

#[test]
fn every_row_times_every_parameter() {
    let memregs = [Memreg::Auto, Memreg::Frmr, Memreg::DmaMr];
    let alloweds = [
        DmaMrAllowed::Never,
        DmaMrAllowed::IbOnly,
        DmaMrAllowed::Always,
    ];
    let mut cases = 0;
    for row in &TABLE {
        for &t in transports(row.t) {
            let iwarp = t == Transport::Iwarp;
            let dev = caps(row.fast_reg, row.lkey);
            for memreg in memregs {
                for allowed in alloweds {
                    cases += 1;
                    let got = decide(t, &dev, memreg, allowed);
                    // What must happen, case by case.
                    let uses_frmr = match memreg {
                        Memreg::Frmr => row.fast_reg,
                        // On IB/RoCE only when dma_mr forbids the DMA MR.
                        Memreg::Auto => row.fast_reg && (iwarp || allowed == DmaMrAllowed::Never),
                        Memreg::DmaMr => false,
                    };
                    let ctx = format!(
                        "{t:?} fr={} lkey={} {memreg:?} {allowed:?}: {got:?}",
                        row.fast_reg, row.lkey
                    );
                    if memreg == Memreg::Frmr && !row.fast_reg {
                        assert_eq!(got, Err(Refusal::NoFastReg), "{ctx}");
                        continue;
                    }
                    if uses_frmr {
                        assert_eq!(
                            got,
                            Ok(Model::Frmr {
                                sink_remote_write: iwarp,
                                read_with_inv: false,
                                local_dma_mr: !row.lkey
                            }),
                            "{ctx}"
                        );
                        continue;
                    }
                    let want = if iwarp {
                        Model::DmaMrRemoteWrite
                    } else {
                        Model::DmaMr {
                            allocate: !row.lkey,
                        }
                    };
                    let permitted = match allowed {
                        DmaMrAllowed::Never => false,
                        DmaMrAllowed::IbOnly => !iwarp,
                        DmaMrAllowed::Always => true,
                    };
                    if permitted {
                        assert_eq!(got, Ok(want), "{ctx}");
                    } else {
                        assert_eq!(
                            got,
                            Err(Refusal::DmaMrForbidden {
                                wanted: want,
                                allowed
                            }),
                            "{ctx}"
                        );
                    }
                }
            }
        }
    }
    assert_eq!(
        cases,
        8 * 2 * 9 - 4 * 9,
        "IB rows run twice (IB and RoCE), iWARP once"
    );
}

#[test]
fn ib_row_y_n_needs_a_local_dma_mr() {
    // The row the review caught: fast reg without a global lkey still needs
    // a DMA MR (local write) for local buffers.
    let m = decide(
        Transport::Ib,
        &caps(true, false),
        Memreg::Auto,
        DmaMrAllowed::Never,
    )
    .unwrap();
    assert_eq!(
        m,
        Model::Frmr {
            sink_remote_write: false,
            read_with_inv: false,
            local_dma_mr: true
        }
    );
    assert!(m.r_bit());
    assert!(!m.exposes_all_memory());
}

#[test]
fn iwarp_sinks_need_remote_write_and_may_read_with_invalidate() {
    let dev = DeviceCaps {
        read_with_inv: true,
        ..caps(true, false)
    };
    let m = decide(Transport::Iwarp, &dev, Memreg::Auto, DmaMrAllowed::Never).unwrap();
    assert_eq!(
        m,
        Model::Frmr {
            sink_remote_write: true,
            read_with_inv: true,
            local_dma_mr: true
        }
    );
    // IB never reads with invalidate, whatever the device says.
    let m = decide(Transport::Roce, &dev, Memreg::Auto, DmaMrAllowed::Never).unwrap();
    assert_eq!(
        m,
        Model::Frmr {
            sink_remote_write: false,
            read_with_inv: false,
            local_dma_mr: true
        }
    );
}

#[test]
fn fast_reg_with_empty_page_list_is_not_fast_reg() {
    let dev = DeviceCaps {
        max_fast_reg_page_list_len: 0,
        ..caps(true, true)
    };
    assert_eq!(
        decide(Transport::Ib, &dev, Memreg::Frmr, DmaMrAllowed::Always),
        Err(Refusal::NoFastReg)
    );
    assert_eq!(
        decide(Transport::Ib, &dev, Memreg::Auto, DmaMrAllowed::Always),
        Ok(Model::DmaMr { allocate: false })
    );
}

#[test]
fn other_transports_are_refused() {
    for memreg in [Memreg::Auto, Memreg::Frmr, Memreg::DmaMr] {
        assert_eq!(
            decide(
                Transport::Other,
                &caps(true, true),
                memreg,
                DmaMrAllowed::Always
            ),
            Err(Refusal::UnsupportedTransport)
        );
    }
}

#[test]
fn names_logs_pd_flag_and_r_bit() {
    let frmr = Model::Frmr {
        sink_remote_write: true,
        read_with_inv: true,
        local_dma_mr: false,
    };
    let dma = Model::DmaMr { allocate: true };
    let rw = Model::DmaMrRemoteWrite;
    assert_eq!(
        (frmr.name(), dma.name(), rw.name()),
        ("frmr", "dma_mr", "dma_mr_remote_write")
    );
    assert_eq!(frmr.log_text(), "Using Fast Memory Registration");
    assert_eq!(dma.log_text(), "Using a Global DMA MR");
    assert!(rw.log_text().starts_with("Using a Global DMA MR"));
    assert!(rw
        .log_text()
        .contains("(remote write: exposes all server memory)"));
    assert!(!frmr.exposes_all_memory() && !dma.exposes_all_memory() && rw.exposes_all_memory());
    assert!(frmr.r_bit() && dma.r_bit() && !rw.r_bit());
}

#[test]
fn refusal_messages_name_the_parameter_to_change() {
    let e = decide(
        Transport::Iwarp,
        &caps(false, false),
        Memreg::Auto,
        DmaMrAllowed::IbOnly,
    )
    .unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("dma_mr=ib_only") && s.contains("dma_mr=always"),
        "{s}"
    );
    let e = decide(
        Transport::Ib,
        &caps(false, false),
        Memreg::Auto,
        DmaMrAllowed::Never,
    )
    .unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("dma_mr=never") && s.contains("dma_mr=ib_only"),
        "{s}"
    );
    let s = Refusal::NoFastReg.to_string();
    assert!(
        s.contains("memreg=frmr") && s.contains("memreg=auto"),
        "{s}"
    );
}

#[test]
fn parameter_values_parse_exactly() {
    for m in Memreg::ALL {
        assert_eq!(Memreg::parse(m.name().as_bytes()), Some(m));
        assert_eq!(Memreg::parse(format!("{}\n", m.name()).as_bytes()), Some(m));
    }
    for a in DmaMrAllowed::ALL {
        assert_eq!(DmaMrAllowed::parse(a.name().as_bytes()), Some(a));
        assert_eq!(
            DmaMrAllowed::parse(format!("{}\n", a.name()).as_bytes()),
            Some(a)
        );
    }
    for bad in [
        &b""[..],
        b"\n",
        b"AUTO",
        b"frmr ",
        b" frmr",
        b"frmr\n\n",
        b"dma",
        b"ib",
        b"always\0",
        b"ib-only",
    ] {
        assert_eq!(Memreg::parse(bad), None, "{bad:?}");
        assert_eq!(DmaMrAllowed::parse(bad), None, "{bad:?}");
    }
    assert_eq!(
        (
            Memreg::Auto.name(),
            Memreg::Frmr.name(),
            Memreg::DmaMr.name()
        ),
        ("auto", "frmr", "dma_mr")
    );
    assert_eq!(
        (
            DmaMrAllowed::Never.name(),
            DmaMrAllowed::IbOnly.name(),
            DmaMrAllowed::Always.name()
        ),
        ("never", "ib_only", "always")
    );
}

#[test]
fn caps_override_parses_applies_and_prints() {
    use svcrdma_proto::memreg::CapsOverride;
    let rxe = caps(true, false);
    assert_eq!(CapsOverride::parse(b""), Some(CapsOverride::default()));
    assert_eq!(CapsOverride::parse(b"\n"), Some(CapsOverride::default()));
    let o = CapsOverride::parse(b"no_fast_reg").unwrap();
    assert!(!o.apply(rxe).fast_reg);
    assert!(!o.apply(rxe).local_dma_lkey);
    let o = CapsOverride::parse(b"no_fast_reg,local_dma_lkey\n").unwrap();
    assert_eq!(
        (o.apply(rxe).fast_reg, o.apply(rxe).local_dma_lkey),
        (false, true)
    );
    let o = CapsOverride::parse(b"no_local_dma_lkey").unwrap();
    assert!(!o.apply(caps(true, true)).local_dma_lkey);
    // Overrides never invent fast registration.
    let o = CapsOverride::parse(b"local_dma_lkey").unwrap();
    assert!(!o.apply(caps(false, false)).fast_reg);
    for bad in [
        &b"fast_reg"[..],
        b"no_fast_reg,no_fast_reg",
        b"local_dma_lkey,no_local_dma_lkey",
        b"no_fast_reg,",
        b",",
        b"no_fast_reg local_dma_lkey",
    ] {
        assert_eq!(CapsOverride::parse(bad), None, "{bad:?}");
    }
    for text in [
        "",
        "no_fast_reg",
        "local_dma_lkey",
        "no_local_dma_lkey",
        "no_fast_reg,local_dma_lkey",
        "short_page_list",
        "no_local_dma_lkey,short_page_list",
        "no_fast_reg,local_dma_lkey,short_page_list",
    ] {
        let o = CapsOverride::parse(text.as_bytes()).unwrap();
        assert_eq!(o.to_string(), text);
    }
    // One page per MR, never more than the device has.
    let o = CapsOverride::parse(b"short_page_list").unwrap();
    assert_eq!(o.apply(rxe).max_fast_reg_page_list_len, 1);
    assert_eq!(o.apply(rxe).fast_reg, rxe.fast_reg);
    let mut none = rxe;
    none.max_fast_reg_page_list_len = 0;
    assert_eq!(o.apply(none).max_fast_reg_page_list_len, 0);
    assert_eq!(
        CapsOverride::parse(b"short_page_list,short_page_list"),
        None
    );
}

#[test]
fn every_table_row_is_reachable_from_soft_devices_with_overrides() {
    use svcrdma_proto::memreg::CapsOverride;
    // rxe and siw: fast reg yes, global lkey no.
    let soft = caps(true, false);
    let mut rows = std::collections::HashSet::new();
    for text in [
        "",
        "no_fast_reg",
        "local_dma_lkey",
        "no_fast_reg,local_dma_lkey",
    ] {
        let c = CapsOverride::parse(text.as_bytes()).unwrap().apply(soft);
        rows.insert((c.fast_reg, c.local_dma_lkey));
    }
    assert_eq!(rows.len(), 4);
}

/// Send With Invalidate needs both R bits and a device with the
/// memory-management extensions (`IB_DEVICE_MEM_MGT_EXTENSIONS`, our
/// `fast_reg`), whatever else the device has.
#[test]
fn send_with_invalidate_needs_both_r_bits_and_mem_mgt_extensions() {
    use svcrdma_proto::memreg::send_with_invalidate;
    for fast_reg in [false, true] {
        for lkey in [false, true] {
            for read_with_inv in [false, true] {
                let c = DeviceCaps {
                    read_with_inv,
                    ..caps(fast_reg, lkey)
                };
                for client_r in [false, true] {
                    for server_r in [false, true] {
                        assert_eq!(
                            send_with_invalidate(client_r, server_r, &c),
                            client_r && server_r && fast_reg,
                            "client R {client_r}, server R {server_r}, {c:?}"
                        );
                    }
                }
            }
        }
    }
    // A device that reports a page-list length but not the flag.
    let c = DeviceCaps {
        fast_reg: false,
        max_fast_reg_page_list_len: 512,
        local_dma_lkey: true,
        read_with_inv: false,
    };
    assert!(!send_with_invalidate(true, true, &c));
}
