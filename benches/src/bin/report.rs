//! `cargo xtask report`: runs every registered section, prints its tables, and writes
//! `report.md`, `report.json` and one SVG per plotted table under `target/report/`.

use benches::measure::{measuring_cpu, pin_current_thread};
use benches::report::alternate::Alternate;
use benches::report::{Header, Headline, REPEAT_TOLERANCE_PCT, Report, compare, repeats};
use benches::{SectionContext, machine, sections};
use indicatif::{ProgressBar, ProgressStyle};
use std::cell::RefCell;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: report [--quick] [--repeat N] [--only SECTION]... [--out DIR]
              [--compare OLD.json | --alternate-with EARLIER_CHECKOUT [--alternate-program P]]
       report compare OLD.json NEW.json   (two reports already written, compared)
       report compare --pairs PAIRS.json... [--out DIR]
                                          (the pairs of alternated reports runs wrote, compared)
       report layouts REPORT.json... --out DIR
                                          (reports of one program linked in several layouts,
                                          as the runs of one report)
       report count WORKLOAD N   (one counted workload, run under callgrind by the report)";

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match argv.first().map(String::as_str) {
        Some("count") => return benches::count::main(&argv[1..], &benches::counted_workloads()),
        Some("compare") => return compare_files(&argv[1..]),
        Some("layouts") => return merge_layouts(&argv[1..]),
        _ => {}
    }
    let mut quick = false;
    let mut repeat = 1usize;
    let mut only = Vec::new();
    let mut out = PathBuf::from("target/report");
    let mut compare_with = None;
    let mut alternate_with = None;
    let mut alternate_program = None;
    let mut args = argv.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            // `cargo xtask report -- --quick` passes the separator on.
            "--" => {}
            "--quick" => quick = true,
            "--repeat" => match args.next().and_then(|v| v.parse().ok()) {
                Some(n) if n >= 1 => repeat = n,
                _ => return usage(a),
            },
            "--only" => match args.next() {
                Some(v) => only.push(v.clone()),
                None => return usage(a),
            },
            "--out" => match args.next() {
                Some(v) => out = PathBuf::from(v),
                None => return usage(a),
            },
            "--compare" => match args.next() {
                Some(v) => compare_with = Some(PathBuf::from(v)),
                None => return usage(a),
            },
            "--alternate-with" => match args.next() {
                Some(v) => alternate_with = Some(PathBuf::from(v)),
                None => return usage(a),
            },
            "--alternate-program" => match args.next() {
                Some(v) => alternate_program = Some(PathBuf::from(v)),
                None => return usage(a),
            },
            _ => return usage(a),
        }
    }
    if compare_with.is_some() && alternate_with.is_some() {
        return usage("--alternate-with (one earlier report: --compare's or its own)");
    }
    if alternate_program.is_some() && alternate_with.is_none() {
        return usage("--alternate-program (the program of an --alternate-with checkout)");
    }
    let all = sections();
    let names: Vec<&str> = all.iter().map(|s| s.name()).collect();
    if let Some(bad) = only.iter().find(|o| !names.contains(&o.as_str())) {
        eprintln!("no section named {bad}; sections: {}", names.join(", "));
        return ExitCode::from(2);
    }
    // The earlier report, read before measuring: a bad file fails at once.
    let earlier = match compare_with.as_deref().map(read_report).transpose() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("report: {e}");
            return ExitCode::from(2);
        }
    };
    // The earlier checkout whose program makes the earlier report section by section.
    let program = alternate_program.as_deref();
    let mut alternate = match alternate_with
        .as_deref()
        .map(|d| Alternate::new(d, program, quick))
    {
        Some(Err(e)) => {
            eprintln!("report: {e}");
            return ExitCode::from(2);
        }
        Some(Ok(a)) => Some(a),
        None => None,
    };
    let chosen: Vec<_> = all
        .into_iter()
        .filter(|s| only.is_empty() || only.iter().any(|o| o == s.name()))
        .collect();
    // Pin the measuring thread; threads a section starts pin themselves.
    let cpu = measuring_cpu();
    let pinned_cpu = pin_current_thread(cpu).then_some(cpu);
    let steps = chosen.iter().map(|s| s.planned_steps(quick)).sum::<u64>() * repeat as u64;
    let progress = ProgressBar::new(steps);
    progress.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let ctx = SectionContext {
        progress,
        quick,
        headlines: RefCell::new(Vec::new()),
    };
    let mut report = Report {
        header: Header {
            date: String::new(),
            commit: commit(),
            toolchain: env!("BENCHES_RUSTC_VERSION").to_string(),
            cpu: machine::cpu_brand(),
            pinned_cpu,
            arguments: argv.join(" "),
        },
        quick,
        runs: Vec::new(),
        layouts: false,
        sections: Vec::new(),
    };
    // Every run's sections but the last, whose verdicts the last run's are held against.
    let mut earlier_runs = Vec::new();
    for run in 1..=repeat {
        if !report.sections.is_empty() {
            earlier_runs.push(std::mem::take(&mut report.sections));
        }
        for (index, section) in chosen.iter().enumerate() {
            let earlier_first = Alternate::earlier_first(index, run);
            let mut run_earlier = |first: bool| {
                if let Some(a) = alternate.as_mut().filter(|_| first == earlier_first) {
                    ctx.progress
                        .set_message(format!("{}: the earlier program", section.name()));
                    a.run_section(section.name(), run, earlier_first);
                }
            };
            run_earlier(true);
            // Each section starts on the measuring CPU: one may pin the measuring thread
            // elsewhere for its own figures (a core of its choice, a background thread on
            // another), and the sections after it would run there, CPU 0's interrupts
            // included.
            if let Some(cpu) = pinned_cpu {
                pin_current_thread(cpu);
            }
            let tables = section.run(&ctx);
            ctx.progress.suspend(|| {
                if repeat > 1 {
                    println!("\n## {} (run {run} of {repeat})\n", section.name());
                } else {
                    println!("\n## {}\n", section.name());
                }
                for t in &tables {
                    println!("{}", t.markdown(false));
                }
            });
            report.sections.push((section.name().to_string(), tables));
            run_earlier(false);
        }
        report.runs.push(ctx.headlines.take());
    }
    ctx.progress.finish_and_clear();
    let varied = report.mark_varying_verdicts(&earlier_runs);
    report.header.date = machine::utc_now();
    println!("{}", report.headline_table().markdown(false));
    // Each pair of runs compared: (the earlier report, this one), one pair but with
    // `--alternate-with` and `--repeat`.
    let pairs = match (earlier, &alternate) {
        (Some(earlier), _) => Some(
            serde_json::to_value(&report)
                .map(|now| vec![(earlier, now)])
                .map_err(|e| e.to_string()),
        ),
        (None, Some(a)) => Some(alternated_pairs(&report, &earlier_runs, a)),
        (None, None) => None,
    };
    // The alternated pairs, kept for a comparison over several reports' pairs (`report
    // compare --pairs`: each report's earlier and current programs linked another way).
    let mut alternated = None;
    if let Some(pairs) = pairs {
        match pairs {
            Ok(pairs) => {
                let mut tables = compare::tables_over_runs(&pairs);
                if let (Some(a), Some(summary)) = (&alternate, tables.first_mut()) {
                    summary.note(a.note());
                }
                for t in &tables {
                    println!("{}", t.markdown(false));
                }
                report.sections.push((compare::COMPARISON.into(), tables));
                alternated = alternate.is_some().then_some(pairs);
            }
            Err(e) => eprintln!("report: comparison: {e}"),
        }
    }
    let result = write(&report, &out).and_then(|mut files| {
        if let Some(pairs) = &alternated {
            let json = serde_json::to_string(pairs).map_err(|e| e.to_string())?;
            let path = out.join(PAIRS_FILE);
            std::fs::write(&path, json).map_err(|e| format!("{}: {e}", path.display()))?;
            files.push(PAIRS_FILE.into());
        }
        Ok(files)
    });
    if repeat > 1 {
        let unstable: Vec<String> = report
            .unstable_headlines()
            .into_iter()
            .map(|(name, d)| {
                // A headline whose name names its worst row can be missing from a run.
                if d.is_nan() {
                    format!("{name} (not in every run)")
                } else {
                    format!("{name} ({d:.1}%)")
                }
            })
            .collect();
        println!(
            "goal verdicts the {repeat} runs did not agree on: {varied} (\"{}\" in the tables)",
            repeats::VARIES
        );
        if unstable.is_empty() {
            println!(
                "every headline ratio reproduced within {REPEAT_TOLERANCE_PCT:.0}% over {repeat} runs"
            );
        } else {
            println!(
                "headline ratios differing by {REPEAT_TOLERANCE_PCT:.0}% or more between runs: {}",
                unstable.join("; ")
            );
        }
    }
    written(result, &out)
}

/// The pairs of reports `(earlier, now)` of each run that the earlier program `a` made
/// sections in: this report's run `r` is `earlier_runs[r - 1]`, the last `report`.
///
/// # Errors
/// None made (why, from `a`), or the serializer's error.
fn alternated_pairs(
    report: &Report,
    earlier_runs: &[Vec<repeats::SectionTables>],
    a: &Alternate,
) -> Result<Vec<(serde_json::Value, serde_json::Value)>, String> {
    let last = serde_json::to_value(report).map_err(|e| e.to_string())?;
    let mut pairs = Vec::new();
    for (i, sections) in earlier_runs.iter().enumerate() {
        let now = serde_json::json!({ "header": last["header"], "sections": sections });
        pairs.extend(a.report(i + 1).map(|earlier| (earlier, now)));
    }
    pairs.extend(
        a.report(earlier_runs.len() + 1)
            .map(|earlier| (earlier, last)),
    );
    if pairs.is_empty() {
        return Err(format!("the earlier program made no section: {}", a.note()));
    }
    Ok(pairs)
}

/// `git rev-parse HEAD`, with "+ uncommitted changes" when tracked files differ from it.
fn commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "HEAD"]) {
        Some(head) => match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(changes) if !changes.is_empty() => format!("{head} + uncommitted changes"),
            _ => head,
        },
        None => "unknown (not a git checkout)".into(),
    }
}

/// Where a report made with `--alternate-with` writes its pairs of reports (earlier, this
/// one), one per run, for `report compare --pairs`.
const PAIRS_FILE: &str = "alternated-pairs.json";

/// `report compare OLD.json NEW.json`: prints the comparison table of two reports already
/// written, as `--compare` adds it to a report it runs. `report compare --pairs FILE...
/// [--out DIR]`: the comparison over every pair of the files (each a report's
/// `alternated-pairs.json`), as `--repeat` makes it over its runs' pairs, written as
/// `comparison.md` and `comparison.json` under `DIR` if given.
fn compare_files(args: &[String]) -> ExitCode {
    if args.first().is_some_and(|a| a == "--pairs") {
        return compare_pair_files(&args[1..]);
    }
    let [old, new] = args else {
        return usage(args.first().map_or("compare", String::as_str));
    };
    match (
        read_report(std::path::Path::new(old)),
        read_report(std::path::Path::new(new)),
    ) {
        (Ok(old), Ok(new)) => {
            for t in compare::tables_between(&old, &new) {
                println!("{}", t.markdown(false));
            }
            ExitCode::SUCCESS
        }
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("report: {e}");
            ExitCode::from(2)
        }
    }
}

/// `report compare --pairs FILE... [--out DIR]` (see [`compare_files`]).
fn compare_pair_files(args: &[String]) -> ExitCode {
    let Some((files, out)) = files_then_out(args) else {
        return usage("--pairs (PAIRS.json... [--out DIR])");
    };
    let mut pairs = Vec::new();
    for file in files {
        match read_pairs(std::path::Path::new(file)) {
            Ok(p) => pairs.extend(p),
            Err(e) => {
                eprintln!("report: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let mut tables = compare::tables_over_runs(&pairs);
    if let Some(summary) = tables.first_mut() {
        summary.note(format!(
            "The pairs of runs: {} pairs of reports, from {}.",
            pairs.len(),
            files.join(", ")
        ));
    }
    let markdown: String = tables.iter().map(|t| t.markdown(false) + "\n").collect();
    println!("{markdown}");
    let Some(out) = out else {
        return ExitCode::SUCCESS;
    };
    let result = std::fs::create_dir_all(&out)
        .and_then(|()| std::fs::write(out.join("comparison.md"), &markdown))
        .map_err(|e| format!("{}: {e}", out.display()))
        .and_then(|()| serde_json::to_string_pretty(&tables).map_err(|e| e.to_string()))
        .and_then(|json| {
            let path = out.join("comparison.json");
            std::fs::write(&path, json).map_err(|e| format!("{}: {e}", path.display()))
        })
        .map(|()| vec!["comparison.md".into(), "comparison.json".into()]);
    written(result, &out)
}

/// Says which files were written under `out`, or why not: the exit code.
fn written(result: Result<Vec<String>, String>, out: &std::path::Path) -> ExitCode {
    match result {
        Ok(files) => {
            println!("wrote {} under {}", files.join(", "), out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("report: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `report layouts REPORT.json... --out DIR`: the reports of one report program linked in
/// several layouts (`cargo xtask report --layouts N`, one run each) as one report of their
/// runs, as `--repeat` makes one: the headline ratios of every layout side by side, the last
/// layout's tables, and each goal verdict the layouts did not agree on marked; written as
/// `report.md`, `report.json` and the plots under `DIR`.
fn merge_layouts(args: &[String]) -> ExitCode {
    let Some((files, Some(out))) = files_then_out(args) else {
        return usage("layouts (REPORT.json... --out DIR)");
    };
    let mut reports = Vec::with_capacity(files.len());
    for file in files {
        match read_json::<Report>(std::path::Path::new(file)) {
            Ok(r) => reports.push(r),
            Err(e) => {
                eprintln!("report: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let (Some(header), Some(mut merged)) = (merged_header(&reports), reports.pop()) else {
        return usage("layouts (at least one report)");
    };
    merged.header = header;
    let earlier: Vec<Vec<repeats::SectionTables>> = reports
        .iter_mut()
        .map(|r| std::mem::take(&mut r.sections))
        .collect();
    let mut runs: Vec<Vec<Headline>> = reports
        .into_iter()
        .map(|r| r.runs.into_iter().last().unwrap_or_default())
        .collect();
    runs.extend(merged.runs.pop());
    merged.runs = runs;
    merged.layouts = true;
    let varied = merged.mark_varying_verdicts(&earlier);
    println!("{}", merged.headline_table().markdown(false));
    println!(
        "goal verdicts the {} layouts did not agree on: {varied} (\"{}\" in the tables)",
        files.len(),
        repeats::VARIES
    );
    written(write(&merged, &out), &out)
}

/// The header of the layouts' runs merged as one report: the last run's date, CPU and
/// toolchain; each run's arguments (each names its layout's out directory), and each
/// commit where the runs' differ.
fn merged_header(reports: &[Report]) -> Option<Header> {
    let (first, last) = (reports.first()?, reports.last()?);
    let list = |field: fn(&Header) -> &str| -> String {
        let shared = field(&first.header);
        if reports.iter().all(|r| field(&r.header) == shared) {
            return shared.to_string();
        }
        let each: Vec<String> = reports
            .iter()
            .enumerate()
            .map(|(k, r)| format!("layout {}: {}", k + 1, field(&r.header)))
            .collect();
        each.join("; ")
    };
    Some(Header {
        date: if first.header.date == last.header.date {
            last.header.date.clone()
        } else {
            format!("{} to {}", first.header.date, last.header.date)
        },
        commit: list(|h| &h.commit),
        toolchain: list(|h| &h.toolchain),
        cpu: list(|h| &h.cpu),
        pinned_cpu: last.header.pinned_cpu,
        arguments: list(|h| &h.arguments),
    })
}

/// The files of `args` up to an `--out DIR` that ends them, and that directory if given;
/// `None` without a file, or with `--out` elsewhere or without its directory.
fn files_then_out(args: &[String]) -> Option<(&[String], Option<PathBuf>)> {
    let (files, out) = match args.iter().position(|a| a == "--out") {
        Some(at) if at + 2 == args.len() => (&args[..at], Some(PathBuf::from(&args[at + 1]))),
        Some(_) => return None,
        None => (args, None),
    };
    (!files.is_empty()).then_some((files, out))
}

/// The JSON file at `path`, read as a `T`; the error names the file.
fn read_json<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The pairs of reports a report made with `--alternate-with` wrote ([`PAIRS_FILE`]).
fn read_pairs(
    path: &std::path::Path,
) -> Result<Vec<(serde_json::Value, serde_json::Value)>, String> {
    let pairs: Vec<(serde_json::Value, serde_json::Value)> = read_json(path)?;
    if pairs.is_empty() {
        return Err(format!("{}: no pair of reports", path.display()));
    }
    for (earlier, now) in &pairs {
        if !earlier["sections"].is_array() || !now["sections"].is_array() {
            return Err(format!("{}: not pairs of reports", path.display()));
        }
    }
    Ok(pairs)
}

/// An earlier `report.json`.
fn read_report(path: &std::path::Path) -> Result<serde_json::Value, String> {
    let value: serde_json::Value = read_json(path)?;
    if value["sections"].is_array() {
        Ok(value)
    } else {
        Err(format!("{}: not a report (no sections)", path.display()))
    }
}

fn usage(bad: &str) -> ExitCode {
    eprintln!("unexpected or incomplete argument {bad}\n{USAGE}");
    ExitCode::from(2)
}

fn write(report: &Report, out: &std::path::Path) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let put = |name: &str, text: String| {
        std::fs::write(out.join(name), text).map_err(|e| format!("{name}: {e}"))
    };
    put("report.md", report.markdown())?;
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    put("report.json", json)?;
    let mut files = vec!["report.md".to_string(), "report.json".to_string()];
    for (_, tables) in &report.sections {
        for t in tables {
            files.extend(t.write_svg(out)?);
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::{compare_pair_files, read_pairs};
    use std::process::ExitCode;

    /// A report of one section whose one table has one row, `value` in its ratio column.
    fn report(value: f64) -> serde_json::Value {
        serde_json::json!({
            "header": {"commit": "c0ffee", "date": "d", "cpu": "c"},
            "sections": [["s", [{
                "id": "t", "title": "t", "notes": [], "columns": ["row", "over the peer"],
                "rows": [[
                    "a",
                    {"value": value, "text": format!("{value:.2}x"), "ci": [value, value]}
                ]],
                "plot": null
            }]]]
        })
    }

    #[test]
    fn pairs_of_several_files_compare_as_one_set_of_pairs() {
        let dir = std::env::temp_dir().join(format!("report-pairs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, json: serde_json::Value| {
            let path = dir.join(name);
            std::fs::write(&path, json.to_string()).unwrap();
            path.display().to_string()
        };
        // The ratio rose 20% in both pairs: moved; in a third pair it fell: not moved.
        let up1 = write("1.json", serde_json::json!([[report(1.0), report(1.2)]]));
        let up2 = write("2.json", serde_json::json!([[report(1.0), report(1.2)]]));
        let down = write("3.json", serde_json::json!([[report(1.0), report(0.8)]]));
        assert_eq!(read_pairs(std::path::Path::new(&up1)).unwrap().len(), 1);
        let out = dir.join("out");
        let args = |files: &[&String]| -> Vec<String> {
            let mut a = vec!["--out".to_string(), out.display().to_string()];
            a.splice(0..0, files.iter().map(|f| f.to_string()));
            a
        };
        assert_eq!(compare_pair_files(&args(&[&up1, &up2])), ExitCode::SUCCESS);
        let md = std::fs::read_to_string(out.join("comparison.md")).unwrap();
        assert!(md.contains("2 pairs of reports"), "{md}");
        assert!(md.contains("+20.0%, +20.0%"), "{md}");
        let json = std::fs::read_to_string(out.join("comparison.json")).unwrap();
        assert!(
            serde_json::from_str::<serde_json::Value>(&json)
                .unwrap()
                .is_array()
        );
        assert_eq!(
            compare_pair_files(&args(&[&up1, &up2, &down])),
            ExitCode::SUCCESS
        );
        let md = std::fs::read_to_string(out.join("comparison.md")).unwrap();
        assert!(md.contains("1 figures compared, 0 moved"), "{md}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A whole report whose headline is `ratio` and whose goal table's verdict is `verdict`.
    fn whole_report(ratio: f64, verdict: &str, arguments: &str) -> serde_json::Value {
        serde_json::json!({
            "header": {"date": "d", "commit": "c0ffee", "toolchain": "t", "cpu": "c",
                       "pinned_cpu": null, "arguments": arguments},
            "quick": false,
            "runs": [[{"name": "ours over the peer",
                       "ratio": {"median": ratio, "lo": ratio, "hi": null, "n": 1}}]],
            "sections": [["s", [{
                "id": "g", "title": "goals", "notes": [], "columns": ["goal", "verdict"],
                "rows": [["at least 1.25x", verdict]],
                "plot": null
            }]]]
        })
    }

    #[test]
    fn reports_of_several_layouts_merge_as_the_runs_of_one() {
        let dir = std::env::temp_dir().join(format!("report-layouts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut args = Vec::new();
        for (k, (ratio, verdict)) in [(1.3, "met"), (1.1, "not met"), (1.3, "met")]
            .into_iter()
            .enumerate()
        {
            let path = dir.join(format!("{k}.json"));
            let report = whole_report(ratio, verdict, &format!("--out {k}"));
            std::fs::write(&path, report.to_string()).unwrap();
            args.push(path.display().to_string());
        }
        let out = dir.join("merged");
        args.extend(["--out".to_string(), out.display().to_string()]);
        assert_eq!(super::merge_layouts(&args), ExitCode::SUCCESS);
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        // Each layout's headline, the largest difference, and the verdicts of each.
        assert!(md.contains("| ours over the peer | 1.30x"), "{md}");
        assert!(md.contains("15.4%"), "{md}");
        assert!(md.contains("layouts 3"), "{md}");
        assert!(
            md.contains("varies between runs: met, not met, met"),
            "{md}"
        );
        assert!(
            md.contains("runs of `cargo xtask report --layouts 3`"),
            "{md}"
        );
        // The header names each layout's arguments, and what they share once.
        assert!(
            md.contains("| arguments | layout 1: --out 0; layout 2: --out 1; layout 3: --out 2 |"),
            "{md}"
        );
        assert!(md.contains("| commit | c0ffee |"), "{md}");
        let json = std::fs::read_to_string(out.join("report.json")).unwrap();
        let merged: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(merged["layouts"], true);
        assert_eq!(merged["runs"].as_array().unwrap().len(), 3);
        // Not a report, or no output directory: refused.
        let bad = dir.join("bad.json");
        std::fs::write(&bad, "{}").unwrap();
        let bad = bad.display().to_string();
        assert_eq!(
            super::merge_layouts(&[bad, "--out".into(), out.display().to_string()]),
            ExitCode::from(2)
        );
        assert_eq!(super::merge_layouts(&args[..3]), ExitCode::from(2));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_pairs_file_without_pairs_of_reports_is_refused() {
        let dir = std::env::temp_dir().join(format!("report-bad-pairs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text, why) in [
            ("empty.json", "[]", "no pair of reports"),
            ("bare.json", "[[{}, {}]]", "not pairs of reports"),
            ("text.json", "pairs", "expected value"),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            let e = read_pairs(&path).unwrap_err();
            assert!(e.contains(why), "{name}: {e}");
            let args = [path.display().to_string()];
            assert_eq!(compare_pair_files(&args), ExitCode::from(2));
        }
        assert_eq!(compare_pair_files(&[]), ExitCode::from(2));
        let misplaced = ["--out".to_string(), "x".into(), "a.json".into()];
        assert_eq!(compare_pair_files(&misplaced), ExitCode::from(2));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
