//! The RTCP compound parser (`rtcp::parse_compound`) on arbitrary bytes.
//!
//! Checks: no panic; every item the relay's writers can express re-writes and parses
//! back to the same item (a NACK to the same set of lost packets; a TMMB rate that
//! saturated on parsing is skipped, since the wire cannot say "more than u64"; a CCFB
//! when it reports one run of one stream's packets without ECN marks).
#![no_main]

use gsrelay_core::rtp::ccfb::{self, Ccfb};
use gsrelay_core::rtp::rtcp::{self, RtcpItem, SdesChunk};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(items) = rtcp::parse_compound(data) else {
        return;
    };
    assert!(
        !items.is_empty(),
        "a parsed compound has at least one packet"
    );
    for item in items {
        let Some(written) = rewrite(&item) else {
            continue;
        };
        let back = rtcp::parse_compound(&written).expect("the writers' output parses");
        let [back] = back.as_slice() else {
            panic!("one item written, {} read back", back.len());
        };
        assert_eq!(normalized(back), normalized(&item));
    }
});

/// The item written with the relay's writers, when they can express it.
fn rewrite(item: &RtcpItem) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let written = match item {
        RtcpItem::SenderReport {
            ssrc,
            info,
            reports,
        } => rtcp::write_sr(&mut out, *ssrc, *info, reports),
        RtcpItem::ReceiverReport { ssrc, reports } => rtcp::write_rr(&mut out, *ssrc, reports),
        RtcpItem::Sdes { chunks } => match chunks.as_slice() {
            [
                SdesChunk {
                    ssrc,
                    cname: Some(cname),
                },
            ] => rtcp::write_sdes_cname(&mut out, *ssrc, cname),
            _ => return None,
        },
        RtcpItem::Bye { ssrcs } => rtcp::write_bye(&mut out, ssrcs),
        RtcpItem::Pli {
            sender_ssrc,
            media_ssrc,
        } => rtcp::write_pli(&mut out, *sender_ssrc, *media_ssrc),
        RtcpItem::Fir {
            sender_ssrc,
            entries,
        } => rtcp::write_fir(&mut out, *sender_ssrc, entries),
        RtcpItem::Nack {
            sender_ssrc,
            media_ssrc,
            lost,
        } => rtcp::write_nack(&mut out, *sender_ssrc, *media_ssrc, lost),
        RtcpItem::Tmmbr {
            sender_ssrc,
            entries,
        } if entries.iter().all(|e| e.bitrate_bps != u64::MAX) => {
            rtcp::write_tmmbr(&mut out, *sender_ssrc, entries)
        }
        RtcpItem::Tmmbn {
            sender_ssrc,
            entries,
        } if entries.iter().all(|e| e.bitrate_bps != u64::MAX) => {
            rtcp::write_tmmbn(&mut out, *sender_ssrc, entries)
        }
        RtcpItem::Ccfb(ccfb) => return rewrite_ccfb(ccfb),
        RtcpItem::App {
            subtype,
            ssrc,
            name,
            data,
        } => rtcp::write_app(&mut out, *subtype, *ssrc, *name, data),
        RtcpItem::Tmmbr { .. } | RtcpItem::Tmmbn { .. } | RtcpItem::Other { .. } => {
            return None;
        }
    };
    // Parsed items can lack what a writer requires (a FIR without entries).
    written.ok().map(|_| out)
}

/// A CCFB written with `ccfb::write`, which expresses one stream's consecutive packets
/// without ECN marks: so only a report of that shape (its blocks may split the run).
fn rewrite_ccfb(ccfb: &Ccfb) -> Option<Vec<u8>> {
    let first = ccfb.reports.first()?;
    let one_run = ccfb.reports.iter().enumerate().all(|(i, r)| {
        r.ssrc == first.ssrc && r.seq == first.seq.wrapping_add(i as u16) && r.ecn == 0
    });
    if !one_run {
        return None;
    }
    let metrics: Vec<(bool, u16)> = ccfb.reports.iter().map(|r| (r.received, r.ato)).collect();
    let mut out = Vec::new();
    ccfb::write(
        &mut out,
        ccfb.sender_ssrc,
        first.ssrc,
        first.seq,
        &metrics,
        ccfb.report_timestamp,
    )
    .ok()
    .map(|_| out)
}

/// The item with a NACK's losses as a sorted set: the writer packs them into PID+BLP
/// pairs, which need not keep the order or the repeats of the original.
fn normalized(item: &RtcpItem) -> RtcpItem {
    let mut item = item.clone();
    if let RtcpItem::Nack { lost, .. } = &mut item {
        lost.sort_unstable();
        lost.dedup();
    }
    item
}
