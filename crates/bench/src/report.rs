//! Bench results: the JSON report, the human table and the latency-versus-load SVG.

use super::scenario::Scenario;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::fmt::Write as _;

/// Which relay a run measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    /// A relay started inside the bench process.
    Inprocess,
    /// A relay reached over the network.
    Remote,
    /// The plain UDP reflector.
    Baseline,
}

/// Latency percentiles, microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

impl Latency {
    /// Percentiles of a histogram of nanoseconds, in microseconds.
    pub fn from_ns(h: &Histogram<u64>) -> Self {
        let us = |q: f64| h.value_at_quantile(q) as f64 / 1e3;
        Self {
            p50: us(0.5),
            p90: us(0.9),
            p99: us(0.99),
            p999: us(0.999),
            max: h.max() as f64 / 1e3,
        }
    }
}

/// Late-join snapshot completion times, milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SnapshotTimes {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Late joiners that completed.
    pub completed: u64,
    /// Late joiners that had not received every expected object after 5 s.
    pub incomplete: u64,
    /// Objects each late joiner expected.
    pub expected_objects: u64,
}

/// One run's results; the keys are the JSON report's.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The scenario as run.
    pub scenario: Scenario,
    /// What was measured.
    pub target: TargetKind,
    /// The impairment applied, as given (`None`: direct).
    pub impairment: Option<String>,
    /// Measurement window, seconds.
    pub duration_s: f64,
    /// Rooms.
    pub rooms: usize,
    /// Publishers, all rooms.
    pub publishers: usize,
    /// Subscribers joined from the start, all rooms (late joiners not included).
    pub subscribers: usize,
    /// Packets published per second in the window.
    pub sent_pps: f64,
    /// `sent_pps` over the rate the scenario calls for (every publisher's live objects at
    /// every period): below 1 when the bench's publishers could not keep up.
    #[serde(default)]
    pub offered_share: f64,
    /// Packets received per second by all subscribers (late joiners included) with a
    /// send time in the window.
    pub received_pps: f64,
    /// Objects published per second (the bench object not counted).
    pub sent_objects_per_s: f64,
    /// Objects received per second.
    pub received_objects_per_s: f64,
    /// Share of the packets the subscribers present from the start should have received
    /// and did not, 0..=1.
    pub loss_ratio: f64,
    /// Share of the RTP packets missing from the sequence numbers the subscribers present
    /// from the start saw, per stream received, over the whole run (a gap is a packet the
    /// target dropped or the kernel did for a full receive buffer); `None` when none came.
    #[serde(default)]
    pub seq_loss_ratio: Option<f64>,
    /// End-to-end latency, publisher send to subscriber receive, microseconds, from the
    /// observers only (`scenario.observers`).
    pub latency_us: Latency,
    /// Late-join snapshot completion, milliseconds (when late joiners ran and the target
    /// keeps state).
    pub snapshot_ms: Option<SnapshotTimes>,
    /// CPU seconds of the relay's (or reflector's) own threads during the window;
    /// `None` for a remote relay.
    pub relay_cpu_s: Option<f64>,
    /// CPU seconds of each of the in-process relay's shard threads during the window,
    /// by shard index (empty for other targets).
    #[serde(default)]
    pub relay_shard_cpu_s: Vec<f64>,
    /// Bytes per second the in-process relay's shards sent each other over links (a room
    /// on several shards); `None` for other targets.
    #[serde(default)]
    pub link_bytes_per_s: Option<f64>,
    /// Link bytes per publisher packet sent in the window: with a room on two shards each
    /// update crosses one link once, so this over an update's own bytes is what a link
    /// costs.
    #[serde(default)]
    pub link_bytes_per_update: Option<f64>,
    /// Relay (or reflector) CPU per object update delivered to a subscriber in the
    /// window, microseconds: the per-core cost that extrapolates to bigger machines.
    pub relay_cpu_us_per_update: Option<f64>,
    /// Relay (or reflector) CPU per packet handled in the window (published packets in
    /// plus delivered packets out), microseconds: compared with the reflector's, the most
    /// stable figure on a shared machine.
    #[serde(default)]
    pub relay_cpu_us_per_packet: Option<f64>,
    /// CPU of the bench's clients per object update the subscribers received in the
    /// window, microseconds: the process's CPU less the relay's (or reflector's) threads
    /// (all of it against a remote relay), over the updates received. Next to
    /// `relay_cpu_us_per_update` it tells who sets the loss and latency: with clients
    /// cheaper than the relay (at most half its figure), the relay does.
    #[serde(default)]
    pub client_cpu_us_per_update: Option<f64>,
    /// CPU seconds of the whole bench process during the window (clients included).
    pub process_cpu_s: f64,
    /// Peak RSS (VmHWM) of the bench process, which holds the clients too; `None` for a
    /// remote relay.
    pub relay_peak_rss_bytes: Option<u64>,
    /// Datagrams the impairment proxy dropped.
    pub impair_dropped: Option<u64>,
    /// Mean round trip the in-process relay measured to its sessions (RTCP reception
    /// reports on its SRs), milliseconds; `None` without samples or for other targets.
    #[serde(default)]
    pub relay_rtt_ms: Option<f64>,
    /// Slow (capped) subscribers, all rooms; left out of every figure above.
    pub slow_subscribers: usize,
    /// Objects per second each slow subscriber received, on average (from live packets and
    /// the store alike).
    pub slow_received_objects_per_s: Option<f64>,
    /// The same scenario against the baseline reflector (`--compare-baseline`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Box<Report>>,
    /// `received_pps` over the baseline's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_received_pps: Option<f64>,
    /// `relay_cpu_us_per_packet` over the baseline's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_cpu_per_packet: Option<f64>,
}

impl Report {
    /// Attaches a baseline run and the throughput ratio.
    pub fn with_baseline(mut self, baseline: Report) -> Self {
        self.ratio_received_pps =
            (baseline.received_pps > 0.0).then(|| self.received_pps / baseline.received_pps);
        self.ratio_cpu_per_packet = cpu_ratio(&self, &baseline);
        self.baseline = Some(Box::new(baseline));
        self
    }

    /// The human table: one column per run.
    pub fn table(&self) -> String {
        let mut runs = vec![self];
        if let Some(b) = &self.baseline {
            runs.push(b);
        }
        let mut t = self.headline();
        for (name, cell) in rows() {
            let _ = write!(t, "{name:<22}");
            for r in &runs {
                let _ = write!(t, " {:>14}", cell(r));
            }
            t.push('\n');
        }
        if let Some(ratio) = self.ratio_received_pps {
            let _ = writeln!(t, "received pps relay / baseline: {ratio:.3}");
        }
        if let Some(ratio) = self.ratio_cpu_per_packet {
            let _ = writeln!(t, "CPU per packet relay / baseline: {ratio:.3}");
        }
        if let Some(ops) = self.slow_received_objects_per_s {
            let _ = writeln!(
                t,
                "slow subscribers (left out above): {}, each {ops:.0} objects/s",
                self.slow_subscribers
            );
        }
        t
    }

    /// The table's first line: the scenario as run.
    fn headline(&self) -> String {
        let s = &self.scenario;
        format!(
            "scenario {:?}: {} room(s) × {} pub × {} obj (+{} static) @ {} Hz ({:?} phases), {} sub ({}), {} late, {:?}, {} s (+{} s warm-up){}\n",
            s.name,
            s.rooms,
            s.publishers,
            s.objects,
            s.static_objects,
            s.rate_hz,
            s.send_phases,
            s.subscribers,
            delivery(s),
            s.late_joiners,
            s.security,
            s.duration_s,
            s.warmup_s,
            self.impairment
                .as_ref()
                .map(|i| format!(", impaired {i}"))
                .unwrap_or_default(),
        )
    }
}

/// The subscribers' delivery mode, as the table names it.
fn delivery(s: &Scenario) -> String {
    let d = s.interest.as_ref().map(|i| i.delivery).unwrap_or_default();
    if d.is_aggregated() {
        format!("aggregated, {} ms", d.max_delay().as_millis())
    } else {
        "per stream".into()
    }
}

/// A `-` for a figure a run does not have, else the figure with `digits` decimals.
fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

/// How one table row reads a run.
type Cell = fn(&Report) -> String;

/// The table's rows.
fn rows() -> [(&'static str, Cell); 24] {
    [
        ("target", |r| format!("{:?}", r.target).to_lowercase()),
        ("sent pps", |r| format!("{:.0}", r.sent_pps)),
        ("offered % of nominal", |r| {
            format!("{:.1}%", r.offered_share * 100.0)
        }),
        ("received pps", |r| format!("{:.0}", r.received_pps)),
        ("received objects/s", |r| {
            format!("{:.0}", r.received_objects_per_s)
        }),
        ("loss", |r| format!("{:.3}%", r.loss_ratio * 100.0)),
        ("sequence gaps", |r| {
            opt(r.seq_loss_ratio.map(|l| l * 100.0), 3) + "%"
        }),
        ("latency p50 µs", |r| format!("{:.0}", r.latency_us.p50)),
        ("latency p90 µs", |r| format!("{:.0}", r.latency_us.p90)),
        ("latency p99 µs", |r| format!("{:.0}", r.latency_us.p99)),
        ("latency p99.9 µs", |r| format!("{:.0}", r.latency_us.p999)),
        ("latency max µs", |r| format!("{:.0}", r.latency_us.max)),
        ("relay RTT ms", |r| opt(r.relay_rtt_ms, 2)),
        ("link kB/s", |r| opt(r.link_bytes_per_s.map(|b| b / 1e3), 1)),
        ("link bytes per update", |r| opt(r.link_bytes_per_update, 1)),
        ("snapshot p50 ms", |r| opt(r.snapshot_ms.map(|s| s.p50), 2)),
        ("snapshot max ms", |r| opt(r.snapshot_ms.map(|s| s.max), 2)),
        ("relay CPU s", |r| opt(r.relay_cpu_s, 2)),
        ("relay CPU s per shard", |r| {
            let s: Vec<String> = r
                .relay_shard_cpu_s
                .iter()
                .map(|c| format!("{c:.2}"))
                .collect();
            if s.is_empty() {
                "-".into()
            } else {
                s.join("/")
            }
        }),
        ("relay CPU µs/update", |r| {
            opt(r.relay_cpu_us_per_update, 3)
        }),
        ("relay CPU µs/packet", |r| {
            opt(r.relay_cpu_us_per_packet, 3)
        }),
        ("client CPU µs/update", |r| {
            opt(r.client_cpu_us_per_update, 3)
        }),
        ("process CPU s", |r| format!("{:.2}", r.process_cpu_s)),
        ("peak RSS MiB", |r| {
            opt(r.relay_peak_rss_bytes.map(|b| b as f64 / 1048576.0), 1)
        }),
    ]
}

/// The relay's CPU per packet over the baseline's, when both were measured.
pub fn cpu_ratio(relay: &Report, baseline: &Report) -> Option<f64> {
    let (r, b) = (
        relay.relay_cpu_us_per_packet?,
        baseline.relay_cpu_us_per_packet?,
    );
    (b > 0.0).then(|| r / b)
}

/// One point of a latency-versus-load sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    /// Update rate per publisher, Hz.
    pub rate_hz: f64,
    /// The relay run.
    pub relay: Report,
    /// The baseline run at the same rate.
    pub baseline: Report,
}

/// Canvas size and margins of the sweep chart.
const W: f64 = 760.0;
const H: f64 = 460.0;
const L: f64 = 70.0;
const R: f64 = 170.0;
const T: f64 = 40.0;
const B: f64 = 50.0;

/// Picks one series' (x, y) from a sweep point.
type Pick = fn(&SweepPoint) -> (f64, f64);

/// The sweep chart's series: name, colour, dash pattern, and what they plot.
const SERIES: [(&str, &str, &str, Pick); 4] = [
    ("relay p50", "#1f77b4", "", |p| {
        (p.relay.received_pps, p.relay.latency_us.p50)
    }),
    ("relay p99", "#d62728", "", |p| {
        (p.relay.received_pps, p.relay.latency_us.p99)
    }),
    ("relay p99.9", "#9467bd", "", |p| {
        (p.relay.received_pps, p.relay.latency_us.p999)
    }),
    ("baseline p99", "#2ca02c", "6,4", |p| {
        (p.baseline.received_pps, p.baseline.latency_us.p99)
    }),
];

/// The chart's log-scale axes: whole decades around the data.
struct Axes {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Axes {
    /// Axes that hold every positive point of every series.
    fn around(points: &[SweepPoint]) -> Self {
        let all: Vec<(f64, f64)> = points
            .iter()
            .flat_map(|p| SERIES.iter().map(move |s| (s.3)(p)))
            .filter(|(x, y)| *x > 0.0 && *y > 0.0)
            .collect();
        let decade = |v: f64, up: bool| {
            let l = v.log10();
            10f64.powf(if up { l.ceil() } else { l.floor() })
        };
        let (x0, x1) = all
            .iter()
            .fold((f64::MAX, 0f64), |(a, b), (x, _)| (a.min(*x), b.max(*x)));
        let (y0, y1) = all
            .iter()
            .fold((f64::MAX, 0f64), |(a, b), (_, y)| (a.min(*y), b.max(*y)));
        let (x0, x1) = if all.is_empty() {
            (1.0, 10.0)
        } else {
            (decade(x0, false), decade(x1, true))
        };
        let (y0, y1) = if all.is_empty() {
            (1.0, 10.0)
        } else {
            (decade(y0, false), decade(y1, true))
        };
        let (x1, y1) = (x1.max(x0 * 10.0), y1.max(y0 * 10.0));
        Self { x0, x1, y0, y1 }
    }

    fn px(&self, x: f64) -> f64 {
        L + (x.log10() - self.x0.log10()) / (self.x1.log10() - self.x0.log10()) * (W - L - R)
    }

    fn py(&self, y: f64) -> f64 {
        H - B - (y.log10() - self.y0.log10()) / (self.y1.log10() - self.y0.log10()) * (H - T - B)
    }

    /// The values of the grid lines from `lo` to `hi`: every decade and its 2× and 5×.
    fn ticks(lo: f64, hi: f64) -> Vec<f64> {
        let mut out = Vec::new();
        let mut v = lo;
        while v <= hi * 1.0001 {
            for m in [1.0, 2.0, 5.0] {
                if v * m > hi * 1.0001 {
                    break;
                }
                out.push(v * m);
            }
            v *= 10.0;
        }
        out
    }
}

/// Draws received packets/s (x, log scale) against latency percentiles (y, log scale),
/// as a self-contained SVG: no fonts or drawing crates needed.
pub fn sweep_svg(points: &[SweepPoint], title: &str) -> String {
    let axes = Axes::around(points);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        (W - R + L) / 2.0,
        xml(title)
    );
    svg_grid(&mut s, &axes);
    svg_frame(&mut s);
    for (i, series) in SERIES.iter().enumerate() {
        svg_series(&mut s, &axes, points, i, series);
    }
    s.push_str("</svg>\n");
    s
}

/// Grid lines and their labels.
fn svg_grid(s: &mut String, axes: &Axes) {
    for x in Axes::ticks(axes.x0, axes.x1) {
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" y1="{T}" x2="{0:.1}" y2="{1}" stroke="#ddd"/><text x="{0:.1}" y="{2}" text-anchor="middle">{3}</text>"##,
            axes.px(x),
            H - B,
            H - B + 16.0,
            short(x)
        );
    }
    for y in Axes::ticks(axes.y0, axes.y1) {
        let _ = writeln!(
            s,
            r##"<line x1="{L}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#ddd"/><text x="{2}" y="{3:.1}" text-anchor="end">{4}</text>"##,
            axes.py(y),
            W - R,
            L - 6.0,
            axes.py(y) + 4.0,
            short(y)
        );
    }
}

/// The plot's frame and the axis titles.
fn svg_frame(s: &mut String) {
    let _ = writeln!(
        s,
        r##"<rect x="{L}" y="{T}" width="{}" height="{}" fill="none" stroke="#333"/>"##,
        W - L - R,
        H - T - B
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">packets received per second (all subscribers)</text>"#,
        (W - R + L) / 2.0,
        H - 12.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(18 {}) rotate(-90)" text-anchor="middle">end-to-end latency, µs</text>"#,
        (H - B + T) / 2.0
    );
}

/// One series: its line, its points and its legend entry (the `i`th).
fn svg_series(
    s: &mut String,
    axes: &Axes,
    points: &[SweepPoint],
    i: usize,
    (name, colour, dash, pick): &(&str, &str, &str, Pick),
) {
    let pts: Vec<String> = points
        .iter()
        .map(pick)
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .map(|(x, y)| format!("{:.1},{:.1}", axes.px(x), axes.py(y)))
        .collect();
    let _ = writeln!(
        s,
        r#"<polyline fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}" points="{}"/>"#,
        pts.join(" ")
    );
    for p in &pts {
        if let Some((x, y)) = p.split_once(',') {
            let _ = writeln!(s, r#"<circle cx="{x}" cy="{y}" r="3" fill="{colour}"/>"#);
        }
    }
    let ly = T + 16.0 + i as f64 * 20.0;
    let _ = writeln!(
        s,
        r#"<line x1="{0}" y1="{ly}" x2="{1}" y2="{ly}" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{2}" y="{3}">{name}</text>"#,
        W - R + 12.0,
        W - R + 36.0,
        W - R + 42.0,
        ly + 4.0
    );
}

/// A compact axis label: 2000 → 2k.
fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{}k", v / 1e3)
    } else {
        format!("{v}")
    }
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
