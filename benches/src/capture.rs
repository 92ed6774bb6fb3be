//! The logs `cargo xtask report` captures from the kernels it boots (under QEMU or KVM) for
//! the sections that read them: the first line `UNAVAILABLE: why` when it could not, else
//! the kernels' lines. Runs are headed by a line of `key=value` fields, and timed workloads
//! print `<workload>: <ns> ns per call`.

/// Why the capture holds nothing, when its first line says so.
///
/// # Errors
/// The reason the capture recorded.
pub fn available(log: &str) -> Result<&str, String> {
    match log
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("UNAVAILABLE: "))
    {
        Some(why) => Err(why.to_string()),
        None => Ok(log),
    }
}

/// The capture the file named by the environment variable `env` holds, or why there is
/// none (`cargo xtask report` sets it).
///
/// # Errors
/// `env` unset, or the file unreadable.
pub fn read(env: &str) -> Result<String, String> {
    let path = std::env::var(env)
        .map_err(|_| format!("{env} is not set (run the report through cargo xtask report)"))?;
    std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))
}

/// The value of the field `key` (`key=value`) among a header line's fields.
#[must_use]
pub fn field<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    fields
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// A timed workload's line, its prefix taken off: the workload and its ns per call.
#[must_use]
pub fn per_call(line: &str) -> Option<(&str, f64)> {
    let (work, ns) = line.rsplit_once(": ")?;
    let ns = ns.strip_suffix(" ns per call")?.parse::<f64>().ok()?;
    Some((work, ns))
}

/// A clock calibration's line, its prefix taken off (`clock: <n> instructions in <t> ns`):
/// the instructions the guest's clock reads as one ns.
#[must_use]
pub fn instructions_per_ns(line: &str) -> Option<f64> {
    let (n, t) = line
        .strip_prefix("clock: ")?
        .split_once(" instructions in ")?;
    let (n, t) = (
        n.parse::<f64>().ok()?,
        t.strip_suffix(" ns")?.parse::<f64>().ok()?,
    );
    (n > 0.0 && t > 0.0).then_some(n / t)
}

/// The value kept for `key` in `runs` (in the order keys first came), made by `empty` the
/// first time.
pub fn entry<K: PartialEq, V>(runs: &mut Vec<(K, V)>, key: K, empty: impl FnOnce() -> V) -> &mut V {
    let i = match runs.iter().position(|(k, _)| *k == key) {
        Some(i) => i,
        None => {
            runs.push((key, empty()));
            runs.len() - 1
        }
    };
    &mut runs[i].1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_reads_its_reason_fields_and_timed_lines() {
        assert_eq!(
            available("UNAVAILABLE: no QEMU\nx\n").unwrap_err(),
            "no QEMU"
        );
        assert_eq!(available("RUN arch=x86_64\n").unwrap(), "RUN arch=x86_64\n");
        assert_eq!(field("arch=x86_64 cpus=2", "cpus"), Some("2"));
        assert_eq!(field("arch=x86_64 cpus=2", "arch"), Some("x86_64"));
        assert_eq!(field("arch=x86_64", "ar"), None);
        assert_eq!(
            per_call("one page: 143 ns per call"),
            Some(("one page", 143.0))
        );
        assert_eq!(per_call("one page: 143 ns"), None);
        assert_eq!(per_call("a: b: 7 ns per call"), Some(("a: b", 7.0)));
        assert_eq!(
            instructions_per_ns("clock: 2000000 instructions in 500000 ns"),
            Some(4.0)
        );
        assert_eq!(
            instructions_per_ns("clock: 2000000 instructions in 0 ns"),
            None
        );
        assert_eq!(per_call("clock: 2000000 instructions in 500000 ns"), None);
        let mut runs: Vec<(u8, Vec<u8>)> = Vec::new();
        entry(&mut runs, 2, Vec::new).push(1);
        entry(&mut runs, 1, Vec::new).push(2);
        entry(&mut runs, 2, Vec::new).push(3);
        assert_eq!(runs, vec![(2, vec![1, 3]), (1, vec![2])]);
    }
}
