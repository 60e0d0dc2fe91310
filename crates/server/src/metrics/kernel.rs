//! The kernel's count of UDP datagrams dropped because a socket's receive buffer was full
//! (`RcvbufErrors` in `/proc/net/snmp` and `Udp6RcvbufErrors` in `/proc/net/snmp6`).
//!
//! These drops happen before the relay reads anything, so no counter of its own sees
//! them: they are the first sign that the relay task cannot keep up or that
//! `net.core.rmem_*` is too small. The counters cover the whole network namespace (the
//! pod, in Kubernetes; the host, outside a container).

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, Opts};
use std::path::{Path, PathBuf};

/// Metric name.
pub const NAME: &str = "gsrelay_udp_receive_buffer_errors_total";

/// Reads the kernel counters at each scrape.
#[derive(Clone)]
pub struct UdpRcvbufErrors {
    counter: IntCounterVec,
    proc_net: PathBuf,
}

impl UdpRcvbufErrors {
    /// A collector reading `/proc/net`.
    pub fn new() -> Self {
        Self::reading(Path::new("/proc/net"))
    }

    /// A collector reading `snmp` and `snmp6` under `proc_net` (tests point it elsewhere).
    pub fn reading(proc_net: &Path) -> Self {
        let counter = IntCounterVec::new(
            Opts::new(
                NAME,
                "UDP datagrams the kernel dropped because a socket receive buffer was full \
                 (whole network namespace), by IP family.",
            ),
            &["family"],
        )
        .unwrap_or_else(|e| panic!("{NAME}: {e}"));
        Self {
            counter,
            proc_net: proc_net.to_owned(),
        }
    }

    /// Brings each family's counter up to the kernel's value. A family whose file is
    /// missing (no IPv6, not Linux) exports no series rather than a made-up zero.
    fn refresh(&self) {
        let v4 = std::fs::read_to_string(self.proc_net.join("snmp"))
            .ok()
            .and_then(|t| snmp_rcvbuf_errors(&t));
        let v6 = std::fs::read_to_string(self.proc_net.join("snmp6"))
            .ok()
            .and_then(|t| snmp6_rcvbuf_errors(&t));
        for (family, value) in [("ipv4", v4), ("ipv6", v6)] {
            let Some(value) = value else { continue };
            let c = self.counter.with_label_values(&[family]);
            // The kernel's counter only grows; a smaller value means a new namespace, and
            // a counter that stands still is what Prometheus's rate() expects there.
            if let Some(delta) = value.checked_sub(c.get()) {
                c.inc_by(delta);
            }
        }
    }
}

impl Default for UdpRcvbufErrors {
    fn default() -> Self {
        Self::new()
    }
}

impl Collector for UdpRcvbufErrors {
    fn desc(&self) -> Vec<&Desc> {
        self.counter.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.refresh();
        self.counter.collect()
    }
}

/// `RcvbufErrors` of the `Udp:` table of `/proc/net/snmp`: a header line of field names
/// followed by a line of values.
fn snmp_rcvbuf_errors(text: &str) -> Option<u64> {
    let mut udp = text.lines().filter(|l| l.starts_with("Udp: "));
    let names = udp.next()?;
    let values = udp.next()?;
    let at = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// `Udp6RcvbufErrors` of `/proc/net/snmp6`: one `name value` pair per line.
fn snmp6_rcvbuf_errors(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut parts = l.split_whitespace();
        (parts.next()? == "Udp6RcvbufErrors").then(|| parts.next()?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
        Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
        Udp: 100 2 7 90 5 0 0 0 0\n\
        UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
        UdpLite: 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn parses_both_tables() {
        assert_eq!(snmp_rcvbuf_errors(SNMP), Some(5));
        assert_eq!(
            snmp6_rcvbuf_errors("Udp6InDatagrams 10\nUdp6RcvbufErrors   3\nUdp6SndbufErrors 0\n"),
            Some(3)
        );
        assert_eq!(snmp_rcvbuf_errors("Ip: 1\n"), None);
        assert_eq!(snmp6_rcvbuf_errors(""), None);
    }

    #[test]
    fn follows_the_kernel_counter() {
        let dir = std::env::temp_dir().join(format!("gsrelay-snmp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("snmp"), SNMP).unwrap();
        let c = UdpRcvbufErrors::reading(&dir);
        let value = |c: &UdpRcvbufErrors| {
            let fams = c.collect();
            fams[0].get_metric()[0].get_counter().get_value()
        };
        assert_eq!(value(&c), 5.0);
        std::fs::write(dir.join("snmp"), SNMP.replace("90 5 0", "90 9 0")).unwrap();
        assert_eq!(value(&c), 9.0);
        // No snmp6: no IPv6 series.
        assert_eq!(c.collect()[0].get_metric().len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
