//! CPU time and memory of this process and of its threads, from `/proc` (Linux).
//! Elsewhere the readings are zero or `None`.

use std::fs;

/// Clock ticks per second of `/proc` CPU times (`sysconf(_SC_CLK_TCK)`).
fn ticks_per_s() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|t| *t > 0)
        .map_or(100.0, |t| t as f64)
}

/// utime + stime, in seconds, from the text of a `stat` file.
fn stat_cpu_s(stat: &str) -> Option<f64> {
    // The command name (field 2) may hold spaces; the fields after it are numbers.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace();
    // Fields 3.. follow the name; utime and stime are fields 14 and 15.
    let utime: f64 = fields.nth(11)?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / ticks_per_s())
}

/// CPU seconds of the whole process so far.
pub fn process_cpu_s() -> f64 {
    fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| stat_cpu_s(&s))
        .unwrap_or(0.0)
}

/// CPU seconds so far of the process's threads whose name starts with `prefix`
/// (threads that have exited are not counted).
pub fn threads_cpu_s(prefix: &str) -> f64 {
    let Ok(tasks) = fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    tasks
        .flatten()
        .filter(|t| fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with(prefix)))
        .filter_map(|t| fs::read_to_string(t.path().join("stat")).ok())
        .filter_map(|s| stat_cpu_s(&s))
        .sum()
}

/// CPU seconds so far of each of the process's threads named `prefix` followed by a
/// number (`gsr-shard-0`, `gsr-shard-1`, ...), by that number; a missing one reads 0.
pub fn numbered_threads_cpu_s(prefix: &str) -> Vec<f64> {
    let Ok(tasks) = fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut by_index: Vec<f64> = Vec::new();
    for t in tasks.flatten() {
        let Ok(name) = fs::read_to_string(t.path().join("comm")) else {
            continue;
        };
        let Some(Ok(i)) = name
            .trim_end()
            .strip_prefix(prefix)
            .map(str::parse::<usize>)
        else {
            continue;
        };
        let Some(cpu) = fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|s| stat_cpu_s(&s))
        else {
            continue;
        };
        if by_index.len() <= i {
            by_index.resize(i + 1, 0.0);
        }
        if let Some(slot) = by_index.get_mut(i) {
            *slot += cpu;
        }
    }
    by_index
}

/// Peak resident set size of the process (VmHWM), bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("/proc/self/status", "VmHWM:").map(|k| k * 1024)
}

/// Resident set size (VmRSS) of process `pid`, bytes.
pub fn rss_bytes_of(pid: u32) -> Option<u64> {
    status_kib(&format!("/proc/{pid}/status"), "VmRSS:").map(|k| k * 1024)
}

fn status_kib(path: &str, key: &str) -> Option<u64> {
    let status = fs::read_to_string(path).ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line.get(key.len()..)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_spaces_in_the_name() {
        let stat = "42 (a b) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0";
        assert_eq!(stat_cpu_s(stat), Some(300.0 / ticks_per_s()));
    }

    #[test]
    fn reads_numbered_threads_by_their_number() {
        let spin = |name: &str| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(|| {
                    let t = std::time::Instant::now();
                    while t.elapsed() < std::time::Duration::from_millis(30) {}
                    std::thread::sleep(std::time::Duration::from_millis(200));
                })
                .unwrap()
        };
        let threads = [spin("gsr-test-n-1"), spin("gsr-test-n-0")];
        std::thread::sleep(std::time::Duration::from_millis(100));
        let cpu = numbered_threads_cpu_s("gsr-test-n-");
        assert_eq!(cpu.len(), 2, "{cpu:?}");
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn reads_this_process() {
        assert!(peak_rss_bytes().unwrap_or(0) > 0);
        assert!(rss_bytes_of(std::process::id()).unwrap_or(0) > 0);
        assert!(process_cpu_s() >= 0.0);
    }
}
