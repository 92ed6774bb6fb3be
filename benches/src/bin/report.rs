//! `cargo xtask report`: runs every registered section, prints its tables, and writes
//! `report.md`, `report.json` and one SVG per plotted table under `target/report/`.

use benches::report::Report;
use benches::{SectionContext, sections};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

const USAGE: &str = "usage: report [--quick] [--only SECTION]... [--out DIR]";

fn main() -> ExitCode {
    let mut quick = false;
    let mut only = Vec::new();
    let mut out = PathBuf::from("target/report");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--only" => match args.next() {
                Some(v) => only.push(v),
                None => return usage(&a),
            },
            "--out" => match args.next() {
                Some(v) => out = PathBuf::from(v),
                None => return usage(&a),
            },
            _ => return usage(&a),
        }
    }
    let all = sections();
    let names: Vec<&str> = all.iter().map(|s| s.name()).collect();
    if let Some(bad) = only.iter().find(|o| !names.contains(&o.as_str())) {
        eprintln!("no section named {bad}; sections: {}", names.join(", "));
        return ExitCode::from(2);
    }
    let chosen: Vec<_> = all
        .into_iter()
        .filter(|s| only.is_empty() || only.iter().any(|o| o == s.name()))
        .collect();
    let steps = chosen.iter().map(|s| s.planned_steps(quick)).sum();
    let progress = ProgressBar::new(steps);
    progress.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let ctx = SectionContext { progress, quick };
    let mut report = Report {
        generated_unix: 0,
        quick,
        sections: Vec::new(),
    };
    for section in &chosen {
        let tables = section.run(&ctx);
        ctx.progress.suspend(|| {
            println!("\n## {}\n", section.name());
            for t in &tables {
                println!("{}", t.markdown());
            }
        });
        report.sections.push((section.name().to_string(), tables));
    }
    ctx.progress.finish_and_clear();
    report.generated_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match write(&report, &out) {
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
