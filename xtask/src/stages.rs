//! The stages of `cargo xtask test`, in order. Each prints its name, duration and result; the
//! first failure stops the run. The last line is `stages: N passed, M failed`.

use crate::cmd::{self, MSRV, cargo, msrv_cargo};
use crate::x86_kernel::{Accel, Kvm, boot_x86, build_x86_kernel, kvm};
use crate::{disk, setup};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

/// The library crates: published (in this order: each depends only on crates before it, which
/// the package stage checks), built for bare metal, tested under QEMU.
pub const LIBS: [&str; 7] = [
    "mm-types",
    "arch-x86",
    "arch-arm64",
    "zero-core",
    "buddy-sim",
    "pte-batch",
    "axalloc-buddy",
];
/// Crates with loom models (tests named `loom_*` under `cfg(loom)`).
const LOOM_CRATES: [&str; 4] = ["zero-core", "buddy-sim", "pte-batch", "axalloc-buddy"];
const AARCH64_LINUX: &str = "aarch64-unknown-linux-gnu";
const BARE_METAL: [&str; 2] = ["x86_64-unknown-none", "aarch64-unknown-none"];
/// The CPUs the aarch64 tests run on under `qemu-aarch64`, and the crates tested on each:
/// `-cpu max` (FEAT_MOPS, hardware access flag and dirty management) runs every library's
/// tests; the Cortex-A72 (neither) runs those of the crates whose paths depend on the CPU's
/// features (the arm64 instructions, the clear policy, the descriptor formats).
const QEMU_CPUS: [(&str, &[&str]); 2] = [
    ("max", &LIBS),
    ("cortex-a72", &["arch-arm64", "zero-core", "pte-batch"]),
];
/// proptest's cases under QEMU (`PROPTEST_CASES`): an emulated instruction costs tens of
/// native ones, and the native `test` stage runs the default cases already; what QEMU adds
/// is the other architecture's code generation, memory model and instructions.
const QEMU_PROPTEST_CASES: &str = "32";

/// Adds `-p LIB` for every library crate to `c`.
fn with_libs(c: &mut std::process::Command) {
    for lib in LIBS {
        c.args(["-p", lib]);
    }
}

/// What a passing stage has to say beyond "passed".
type StageResult = Result<String, String>;

/// Starts a stage's work in the background ([`Stage::beside`]).
type StartBeside = fn(&Path) -> Result<(), String>;

struct Stage {
    name: &'static str,
    run: fn(&Path, &Options) -> StageResult,
    /// Build directories (relative to the workspace root) that only this stage uses: removed
    /// once it passes if the disk is nearly full ([`disk::reclaim`]).
    scratch: &'static [&'static str],
    /// Run only when named (`--only NAME`), not in the full run CI makes.
    on_request: bool,
    /// Starts the stage's work in the background, at the lowest CPU priority, once `setup`
    /// has passed, while the stages before it run; `run` then finishes it.
    beside: Option<StartBeside>,
}

const STAGES: [Stage; 23] = [
    Stage {
        name: "setup",
        run: |root, _| setup::run(root),
        scratch: &[],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "fmt",
        run: fmt,
        scratch: &[],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "layers",
        run: |root, _| crate::layers::run(root),
        scratch: &[],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "clippy",
        run: clippy,
        scratch: &[],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "test",
        run: test,
        scratch: &[],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "no-std",
        run: no_std,
        scratch: &[],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "doc",
        run: doc,
        scratch: &[],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "package",
        run: |root, _| crate::package::run(root),
        scratch: &["target/package", "target/package-test"],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "msrv",
        run: msrv,
        scratch: &["target/msrv"],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "qemu",
        run: qemu,
        scratch: &["target/aarch64-unknown-linux-gnu"],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "bare-metal",
        run: bare_metal,
        scratch: &[],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "arceos",
        run: |root, _| crate::arceos::stage(root),
        scratch: &["target/arceos"],
        // ArceOS's 0.3.0-preview line (2.7 minutes on two cores): today's line
        // (`arceos-today`) replaces it in the full run.
        on_request: true,
        beside: None,
    },
    Stage {
        name: "arceos-today",
        run: |root, _| crate::arceos_today::stage(root, false),
        // Its build directory serves the starry stage next.
        scratch: &[],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "arceos-today-compare",
        run: |root, _| crate::arceos_today::stage(root, true),
        scratch: &[],
        // `arceos-today` with the app on ax-alloc's own backends too (buddy-slab-allocator
        // and TLSF, four builds and eight boots more): a measurement of those allocators,
        // not a check of this project's.
        on_request: true,
        beside: None,
    },
    Stage {
        name: "hypervisor-guest",
        run: |root, _| crate::hypervisor_guest::stage(root),
        // Builds the app in `arceos-today`'s directory (which starry removes) and the kernel
        // in its own.
        scratch: &["target/hypervisor-guest"],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "axvisor",
        run: |root, _| crate::axvisor::stage(root),
        // Uses the app's build in `arceos-today`'s directory (which starry removes).
        scratch: &["target/axvisor"],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "starry",
        run: |root, _| crate::starry::stage(root, false),
        scratch: &["target/starry", "target/arceos-today"],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "starry-compare",
        run: |root, _| crate::starry::stage(root, true),
        scratch: &["target/starry", "target/arceos-today"],
        // `starry` on aarch64 too, and with buddy-slab-allocator beside buddy-sim on both
        // architectures (three kernel builds and boots under `-icount` more, about four
        // minutes each on two cores): a measurement of both allocators, not a check of
        // this project's.
        on_request: true,
        beside: None,
    },
    Stage {
        name: "loom",
        run: loom,
        scratch: &["target/loom"],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "miri",
        run: |root, _| crate::miri::stage(root, false),
        scratch: &["target/miri"],
        on_request: false,
        beside: Some(|root| crate::miri::start_beside(root, false)),
    },
    Stage {
        name: "miri-full",
        run: |root, _| crate::miri::stage(root, true),
        scratch: &["target/miri"],
        // `miri` with the model tests it leaves out too (`miri::FULL_ONLY`: about
        // twenty more minutes of one core each on two cores).
        on_request: true,
        beside: Some(|root| crate::miri::start_beside(root, true)),
    },
    Stage {
        name: "fuzz",
        run: fuzz,
        scratch: &["fuzz/target"],
        on_request: false,
        beside: None,
    },
    Stage {
        name: "bench",
        run: bench,
        scratch: &[],
        on_request: false,
        beside: None,
    },
];

/// Command-line options of `cargo xtask test`.
pub struct Options {
    only: Vec<String>,
    skip: Vec<String>,
    fuzz_seconds: u32,
}

impl Options {
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut opts = Self {
            only: Vec::new(),
            skip: Vec::new(),
            fuzz_seconds: 20,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = || it.next().cloned().ok_or(format!("{a} needs a value"));
            match a.as_str() {
                "--only" => opts.only.push(value()?),
                "--skip" => opts.skip.push(value()?),
                "--fuzz-seconds" => {
                    let v = value()?;
                    opts.fuzz_seconds = v.parse().map_err(|_| format!("bad --fuzz-seconds {v}"))?;
                }
                other => return Err(format!("unknown argument {other}")),
            }
        }
        for name in opts.only.iter().chain(&opts.skip) {
            if !STAGES.iter().any(|s| s.name == name) {
                return Err(format!("no stage named {name}"));
            }
        }
        Ok(opts)
    }

    fn selected(&self, stage: &Stage) -> bool {
        let named = self.only.iter().any(|o| o == stage.name);
        (named || self.only.is_empty() && !stage.on_request)
            && !self.skip.iter().any(|s| s == stage.name)
    }
}

pub fn run_all(root: &Path, opts: &Options) -> ExitCode {
    let selected: Vec<&Stage> = STAGES.iter().filter(|s| opts.selected(s)).collect();
    let total = selected.len();
    let whole = Instant::now();
    let mut passed = 0;
    let mut beside_started = false;
    for (i, stage) in selected.iter().enumerate() {
        if !beside_started && stage.name != "setup" {
            // What the stages after this one can start now, beside the others.
            beside_started = true;
            for later in &selected[i + 1..] {
                if let Some(start) = later.beside
                    && let Err(e) = start(root)
                {
                    println!("    {}: not started beside the others: {e}", later.name);
                }
            }
        }
        let free = disk::free_bytes(root).map_or_else(String::new, |b| {
            format!(" ({} free on the disk)", disk::gib(b))
        });
        println!("==> [{}/{total}] {}{free}", i + 1, stage.name);
        let start = Instant::now();
        let result = (stage.run)(root, opts).and_then(|note| {
            Ok(match disk::reclaim(root, stage.scratch)? {
                Some(r) => format!("{note}; {r}"),
                None => note,
            })
        });
        let secs = start.elapsed().as_secs_f64();
        match result {
            Ok(note) => {
                passed += 1;
                println!(
                    "==> [{}/{total}] {}: passed in {secs:.1} s ({note})",
                    i + 1,
                    stage.name
                );
            }
            Err(e) => {
                println!(
                    "==> [{}/{total}] {}: FAILED in {secs:.1} s\n{e}",
                    i + 1,
                    stage.name
                );
                if let Some(hint) = disk::failure_hint(root) {
                    println!("{hint}");
                }
                crate::miri::cancel_beside();
                println!("stage {} failed; the run stops here", stage.name);
                println!("stages: {passed} passed, 1 failed");
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "total time: {:.1} min",
        whole.elapsed().as_secs_f64() / 60.0
    );
    println!("stages: {passed} passed, 0 failed");
    ExitCode::SUCCESS
}

fn fmt(root: &Path, _: &Options) -> StageResult {
    cmd::status(cargo(root).args(["fmt", "--all", "--", "--check"]))?;
    for manifest in [
        "fuzz/Cargo.toml",
        "kernel/Cargo.toml",
        "arceos/apps/Cargo.toml",
        "arceos/axalloc/Cargo.toml",
        "arceos/axalloc-0.2/Cargo.toml",
        "arceos/ax-alloc/Cargo.toml",
        "arceos/today/Cargo.toml",
        "arceos/today-control/Cargo.toml",
        "arceos/starry/Cargo.toml",
    ] {
        cmd::status(cargo(root).args(["fmt", "--manifest-path", manifest, "--", "--check"]))?;
    }
    Ok("workspace, fuzz crate, bare-metal kernel and ArceOS packages formatted".into())
}

fn clippy(root: &Path, _: &Options) -> StageResult {
    let deny = ["--", "-D", "warnings"];
    cmd::status(
        cargo(root)
            .args(["clippy", "--workspace", "--all-targets", "--all-features"])
            .args(deny),
    )?;
    // The aarch64 code paths only exist when compiling for aarch64.
    let mut c = cargo(root);
    c.args(["clippy", "--all-targets", "--target", AARCH64_LINUX]);
    with_libs(&mut c);
    cmd::status(c.args(deny))?;
    cmd::status(
        cargo(root)
            .args([
                "clippy",
                "--manifest-path",
                "fuzz/Cargo.toml",
                "--all-targets",
            ])
            .args(deny),
    )?;
    for target in BARE_METAL {
        cmd::status(
            cargo(root)
                .args(["clippy", "--manifest-path", "kernel/Cargo.toml"])
                .args(["--target", target])
                .args(deny),
        )?;
    }
    Ok("x86_64 workspace, aarch64 libraries, fuzz targets, both bare-metal kernels".into())
}

/// Sums the `running N tests` lines of cargo test output.
pub fn tests_run(output: &str) -> usize {
    output
        .lines()
        .filter_map(|l| {
            l.strip_prefix("running ")?
                .split(' ')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .sum()
}

/// Each model crate's examples, (crate, example): `cargo run --example` runs them all.
const EXAMPLES: [(&str, &str); 4] = [
    ("zero-core", "detect"),
    ("zero-core", "calibrate"),
    ("buddy-sim", "smp_zone"),
    ("pte-batch", "aging"),
];

fn test(root: &Path, _: &Options) -> StageResult {
    // Every feature: the tests of the ecosystem adapters and of the harnesses behind
    // `testing` need theirs (the package stage runs the default features' tests too).
    let out = cmd::output_echoed(cargo(root).args(["test", "--workspace", "--all-features"]))?;
    for (krate, example) in EXAMPLES {
        cmd::status(cargo(root).args(["run", "--quiet", "-p", krate, "--example", example]))?;
    }
    Ok(format!(
        "{} tests, {} examples run",
        tests_run(&out),
        EXAMPLES.len()
    ))
}

fn no_std(root: &Path, _: &Options) -> StageResult {
    for target in BARE_METAL {
        let mut c = cargo(root);
        c.args(["build", "--target", target]);
        with_libs(&mut c);
        cmd::status(&mut c)?;
    }
    Ok(format!(
        "{} libraries for {}",
        LIBS.len(),
        BARE_METAL.join(" and ")
    ))
}

/// `cargo doc` with every rustdoc warning an error: the libraries for the host, aarch64 Linux
/// and both bare-metal targets (their arch modules differ), and the whole workspace with
/// every feature for the host.
fn doc(root: &Path, _: &Options) -> StageResult {
    let host = cmd::host_target(root)?;
    let targets: Vec<&str> = [host.as_str(), AARCH64_LINUX]
        .into_iter()
        .chain(BARE_METAL)
        .collect();
    for target in &targets {
        let mut c = cargo(root);
        c.env("RUSTDOCFLAGS", "-D warnings")
            .args(["doc", "--no-deps", "--target", target]);
        with_libs(&mut c);
        cmd::status(&mut c)?;
    }
    // With every feature, as docs.rs shows them (the ecosystem adapters).
    cmd::status(cargo(root).env("RUSTDOCFLAGS", "-D warnings").args([
        "doc",
        "--no-deps",
        "--workspace",
        "--all-features",
    ]))?;
    Ok(format!(
        "no rustdoc warnings: {} libraries for {}, and the workspace with every feature",
        LIBS.len(),
        targets.join(", ")
    ))
}

/// The libraries build with the oldest toolchain they declare (`rust-version`), for the host
/// and both bare-metal targets; and the declaration and the toolchain agree.
fn msrv(root: &Path, _: &Options) -> StageResult {
    let manifest =
        std::fs::read_to_string(root.join("Cargo.toml")).map_err(|e| format!("Cargo.toml: {e}"))?;
    let declared = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("rust-version = "))
        .map(|v| v.trim_matches('"').to_string())
        .ok_or("no rust-version in the workspace manifest")?;
    if !MSRV.starts_with(&format!("{declared}.")) && MSRV != declared {
        return Err(format!(
            "the workspace declares rust-version {declared} but xtask checks {MSRV}"
        ));
    }
    let host = cmd::host_target(root)?;
    let targets: Vec<&str> = std::iter::once(host.as_str()).chain(BARE_METAL).collect();
    for target in &targets {
        let mut c = msrv_cargo(root);
        // A target directory of its own: artifacts of another compiler are not reusable.
        c.args([
            "check",
            "--lib",
            "--target",
            target,
            "--target-dir",
            "target/msrv",
        ]);
        with_libs(&mut c);
        cmd::status(&mut c)?;
    }
    Ok(format!(
        "{} libraries build with Rust {MSRV} for {}",
        LIBS.len(),
        targets.join(", ")
    ))
}

fn qemu(root: &Path, _: &Options) -> StageResult {
    let mut counts = Vec::new();
    for (cpu, crates) in QEMU_CPUS {
        println!("--- qemu-aarch64 -cpu {cpu}");
        let runner = format!("qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu {cpu}");
        let env = "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER";
        let mut c = cargo(root);
        c.env(env, &runner)
            .env("PROPTEST_CASES", QEMU_PROPTEST_CASES)
            .args([
                "test",
                "--target",
                AARCH64_LINUX,
                "--lib",
                "--tests",
                "--all-features",
            ]);
        for krate in crates {
            c.args(["-p", krate]);
        }
        let out = cmd::output_echoed(&mut c)?;
        let mut detect = cargo(root);
        detect
            .env(env, &runner)
            .args(["run", "--quiet", "--target", AARCH64_LINUX]);
        cmd::status(detect.args(["-p", "zero-core", "--example", "detect"]))?;
        counts.push(format!("{} tests on -cpu {cpu}", tests_run(&out)));
    }
    Ok(counts.join(", "))
}

/// Two NUMA nodes of [`KERNEL_RAM`] each and two CPUs, CPU 0 on node 0 and CPU 1 on node 1,
/// 20 apart: QEMU describes them to the arm64 kernel in its device tree (`numa-node-id`,
/// `distance-map`) and to the x86_64 kernel in ACPI's SRAT and SLIT. One CPU per socket:
/// QEMU warns about two nodes in one socket.
const TWO_NODES: [&str; 14] = [
    "-smp",
    "2,sockets=2",
    "-m",
    "256M",
    "-object",
    "memory-backend-ram,id=m0,size=128M",
    "-object",
    "memory-backend-ram,id=m1,size=128M",
    "-numa",
    "node,nodeid=0,cpus=0,memdev=m0",
    "-numa",
    "node,nodeid=1,cpus=1,memdev=m1",
    "-numa",
    "dist,src=0,dst=1,val=20",
];

/// What the node step of a kernel booted with [`TWO_NODES`] prints: each CPU allocated from
/// its own node, a range of node 1 holding movable pages went offline (the pages moved and
/// read back), nothing handed out from it, and it came back.
const NUMA_LINES: [&str; 5] = [
    "numa: 2 nodes from",
    "numa: node-local allocation: cpu 0 took 64 of 64 pages from node 0, cpu 1 64 of 64 from node 1",
    "movable pages migrated within the node (every page read back its stamps)",
    "none from the offline range",
    "movable pages freed; node 1 whole",
];

/// The bare-metal kernel's boots: name, QEMU machine and CPU arguments, whether it has
/// [`TWO_NODES`] (else one node of [`KERNEL_RAM`]), and the lines its UART output must
/// contain to show the configuration did what it is there for (besides [`EL1_LINES`] for
/// the boots at EL1, and [`NUMA_LINES`] with two nodes).
const BOOTS: [(&str, &[&str], bool, &[&str]); 4] = [
    (
        "-cpu max",
        &["-M", "virt", "-cpu", "max"],
        false,
        &[
            "hardware management: access flag and dirty state",
            "numa: one node",
        ],
    ),
    (
        "-cpu max -smp 2, two NUMA nodes",
        &["-M", "virt", "-cpu", "max"],
        true,
        &[
            "smp: core 1 wrote all 512 pages",
            "smp: both cores allocated, zeroed and freed through one zone at once",
            "numa: 2 nodes from the device tree",
        ],
    ),
    (
        "-cpu cortex-a72",
        &["-M", "virt", "-cpu", "cortex-a72"],
        false,
        &["access flag and dirty state in software", "numa: one node"],
    ),
    (
        "virtualization=on -cpu max -smp 2 (hypervisor at EL2)",
        &["-M", "virt,virtualization=on", "-cpu", "max", "-smp", "2"],
        false,
        &[
            "unikernel: booted at EL2",
            "second CPU zeroing in the background",
            "VTCR_EL2.HA/HD set",
            "guest phase 0: 96 pages faulted in",
            "guest phase 3: 0 pages faulted in (zeroed frames), 174 mapped; aged: 4 young, idle set 170 pages = exactly",
            "negative control: aging without the stage-2 invalidation left 8 of 8 re-read pages idle (detected)",
            "guest frames and stage-2 tables given back; zone whole",
            "PASS",
        ],
    ),
];

/// What every boot at EL1 prints: the kernel map, the negative control, the mobility step,
/// the zone whole.
const EL1_LINES: [&str; 16] = [
    "aarch64-paging: kernel map",
    "negative control:",
    MOBILITY_LINES[0],
    MOBILITY_LINES[1],
    MOBILITY_LINES[2],
    MOBILITY_LINES[3],
    MOBILITY_LINES[4],
    MOBILITY_LINES[5],
    MOBILITY_LINES[6],
    MOBILITY_LINES[7],
    "pages migrated out of its way) and",
    "every page read back; given back with free_contig_range",
    "the page tables their 7 table pages; zone whole",
    "in the zeroed pool before the steps",
    "buddy-sim: core 0 took 64 zeroed blocks",
    "PASS",
];
/// What the mobility step of every kernel at EL1 prints: the fill left no free 2 MiB
/// block, compaction (in defrag mode) made one moving pages under their mappings, and the
/// movable-only zone gave a block of half its 16 MiB, aligned past MAX_ORDER, with its
/// movable pages migrated out of the way; the CMA reservation made at boot was taken back
/// whole, its mapped borrowers migrated out; then /proc/buddyinfo's and /proc/pagetypeinfo's
/// lines of the zone, in Linux's formats, and page_owner's top owners (the data region's
/// blocks, allocated by the data step, among them).
const MOBILITY_LINES: [&str; 8] = [
    "no free 2 MiB block left (tables and data region unmovable)",
    "for a free 2 MiB block; every page read back through its repointed mapping",
    "an unmovable page refused; the largest aligned block, 8 MiB (order 11, aligned past MAX_ORDER 10)",
    "cma_alloc: the whole 4 MiB reservation taken back after migrating",
    "buddyinfo after the mobility step:",
    "Number of blocks type     Unmovable      Movable  Reclaimable   HighAtomic          CMA      Isolate ",
    "page_owner: top owners after the mobility step:",
    " pages, tag \"data\"",
];

/// RAM given to the kernels (a node's, with [`TWO_NODES`]); `MAX_RAM` in
/// `kernel/src/steps/mod.rs` assumes the same.
pub const KERNEL_RAM: &str = "128M";

/// Builds `kernel/` for `aarch64-unknown-none` and boots it under `qemu-system-aarch64` in
/// each configuration of [`BOOTS`] (the last at EL2, where the kernel is a hypervisor running
/// a guest); each must print its lines, the negative control's detection and `PASS`, and
/// exit 0 through semihosting. Then the x86_64 kernel ([`x86_boots`]).
fn bare_metal(root: &Path, opts: &Options) -> StageResult {
    let arm64 = arm64_boots(root, opts)?;
    let x86 = x86_boots(root)?;
    Ok(format!("arm64: {arm64}; x86_64: {x86}"))
}

/// The x86_64 kernel with one CPU and one node, and with two CPUs on [`TWO_NODES`]: under hardware KVM where `/dev/kvm` opens and QEMU
/// starts with it, and always under TCG too, where the negative control (a skipped TLB flush)
/// is observable (KVM's MMU virtualization re-reads the guest's tables, so the kernel reports
/// it as not observable there). KVM on PVM ([`Kvm::Pvm`]) emulates the kernel's ring 0 at a
/// hundredth of TCG's speed: the boots then run under TCG, and the output says so. Each boot
/// says which accelerator ran it.
fn x86_boots(root: &Path) -> StageResult {
    build_x86_kernel(root)?;
    let mut accels = vec![Accel::Tcg];
    match kvm() {
        Kvm::Hardware => accels.insert(0, Accel::Kvm),
        Kvm::Missing => println!("    --- no usable /dev/kvm: the x86_64 boots run under TCG"),
        Kvm::Pvm => println!(
            "    --- /dev/kvm is kvm_pvm (no VMX/SVM): it emulates a guest's ring 0 (40 s a boot \
             against 0.3 s under TCG), so the x86_64 boots run under TCG"
        ),
    }
    let mut ran = Vec::new();
    for accel in accels {
        for cpus in [1, 2] {
            let nodes = if cpus == 2 {
                "two NUMA nodes"
            } else {
                "one node"
            };
            println!(
                "    --- boot: x86_64, {cpus} CPU(s), {nodes}, {}",
                accel.name()
            );
            let cmdline = if accel == Accel::Tcg { "xsave" } else { "" };
            let limit = std::time::Duration::from_secs(120);
            // Two CPUs come with two NUMA nodes (ACPI SRAT and SLIT), one with one node.
            let machine: &[&str] = if cpus == 2 {
                &TWO_NODES
            } else {
                &["-smp", "1", "-m", KERNEL_RAM]
            };
            let out = match boot_x86(root, accel, machine, cmdline, limit) {
                Ok(out) => out,
                Err(e) if accel == Accel::Kvm && !e.contains("step") => {
                    println!("    --- KVM refused ({e}); the x86_64 boots run under TCG only");
                    break;
                }
                Err(e) => return Err(format!("boot x86_64 {cpus} CPU(s) {}: {e}", accel.name())),
            };
            let want_kvm = accel == Accel::Kvm;
            if out.contains("under KVM") != want_kvm {
                return Err(format!(
                    "boot x86_64 under {}: the kernel saw the other accelerator",
                    accel.name()
                ));
            }
            let control: &[&str] = if accel == Accel::Tcg {
                &["(detected)"]
            } else {
                &["negative control:"]
            };
            let smp: &[&str] = if cpus == 2 {
                &[
                    "smp: core 1 wrote all 512 pages",
                    "smp: both cores allocated, zeroed and freed through one zone at once",
                    "numa: 2 nodes from ACPI SRAT and SLIT",
                    NUMA_LINES[0],
                    NUMA_LINES[1],
                    NUMA_LINES[2],
                    NUMA_LINES[3],
                    NUMA_LINES[4],
                ]
            } else {
                &["smp: no second core", "numa: one node"]
            };
            let expect: Vec<&str> = control.iter().chain(smp).copied().collect();
            let always = [
                "x86_64: kernel map at",
                MOBILITY_LINES[0],
                MOBILITY_LINES[1],
                MOBILITY_LINES[2],
                MOBILITY_LINES[3],
                MOBILITY_LINES[4],
                MOBILITY_LINES[5],
                MOBILITY_LINES[6],
                MOBILITY_LINES[7],
                "alloc_contig_pages: frozen 2 MiB blocks at",
                "given back with free_contig_frozen_range",
                "aging: 37 young of 111 folios, as touched",
                "re-touch: every touched page young again",
                "the page tables their",
                "in the zeroed pool before the steps",
                "buddy-sim: core 0 took 64 zeroed blocks",
                "PASS",
            ];
            let name = format!("x86_64 {cpus} CPU(s) {}", accel.name());
            expect_lines(&name, &out, expect.iter().chain(&always))?;
            let npt = npt_run(&name, &out)?;
            ran.push(format!(
                "{cpus} CPU(s), {nodes}, under {}, {npt}",
                accel.name()
            ));
        }
    }
    Ok(format!("{} boots passed ({})", ran.len(), ran.join(", ")))
}

/// What the x86_64 kernel did with AMD nested paging: ran its SVM guest through every phase
/// (the CPU has SVM with NPT, as TCG's `-cpu max` has), or said the CPU has none, leaving
/// EPT and NPT to the model and proptest.
fn npt_run(name: &str, out: &str) -> Result<&'static str, String> {
    if out.contains("npt: SVM with nested paging on this CPU") {
        let guest = [
            "guest phase 0: 96 pages faulted in",
            "guest phase 3: 0 pages faulted in (zeroed frames), 174 mapped; aged: 4 young, idle set 170 pages = exactly",
            "npt: 174 nested page faults served with zeroed frames",
        ];
        expect_lines(name, out, guest.iter())?;
        Ok("NPT: an SVM guest aged through nested paging (EPT: model and proptest only)")
    } else if out.contains("npt: this CPU has no SVM with nested paging") {
        Ok("NPT and EPT: model and proptest only (no SVM with nested paging)")
    } else {
        Err(format!(
            "boot {name}: it passed but said nothing of nested paging"
        ))
    }
}

fn arm64_boots(root: &Path, _: &Options) -> StageResult {
    let kernel = root.join("kernel");
    cmd::status(cargo(&kernel).args(["build", "--release", "--target", "aarch64-unknown-none"]))?;
    let elf = kernel.join("target/aarch64-unknown-none/release/unikernel");
    for (name, machine, two_nodes, expect) in BOOTS {
        println!("    --- boot: {name}");
        let mut qemu = std::process::Command::new("qemu-system-aarch64");
        qemu.args(machine);
        if two_nodes {
            qemu.args(TWO_NODES);
        } else {
            qemu.args(["-m", KERNEL_RAM]);
        }
        qemu.args(["-nographic", "-semihosting"])
            // No NIC: the default virtio one needs efi-virtio.rom, which a
            // --no-install-recommends QEMU does not bring, and the kernel has no use for it.
            .args(["-nic", "none", "-kernel"])
            .arg(&elf);
        let el2 = name.contains("EL2");
        if !el2 {
            // A virtio-balloon with free page reporting on the modern virtio-mmio transport:
            // the kernel reports its free memory, and QEMU's resident memory must drop.
            qemu.args(["-global", "virtio-mmio.force-legacy=false"])
                .args(["-device", "virtio-balloon-device,free-page-reporting=on"]);
        }
        let (code, out, rss) = cmd::output_answering(
            &mut qemu,
            std::time::Duration::from_secs(120),
            "balloon: sample",
            resident_kib,
        )?;
        if code != Some(0) {
            return Err(format!(
                "boot {name}: the kernel exited with {code:?} (see its output above; the code is the failed step)"
            ));
        }
        let el1: &[&str] = if el2 { &[] } else { &EL1_LINES };
        let numa: &[&str] = if two_nodes { &NUMA_LINES } else { &[] };
        expect_lines(name, &out, expect.iter().chain(el1).chain(numa))?;
        if !el2 {
            balloon_checked(name, &out, &rss)?;
        }
    }
    let numa = BOOTS.iter().filter(|b| b.2).count();
    Ok(format!(
        "{} boots passed ({numa} with two NUMA nodes)",
        BOOTS.len()
    ))
}

/// QEMU's resident memory in KiB (`VmRSS` of `/proc/<pid>/status`), when the kernel asks
/// for a sample; `None` where it cannot be read.
fn resident_kib(pid: u32, _line: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The free page reporting check of an arm64 boot with a virtio-balloon: the kernel
/// reported memory, QEMU's resident memory (sampled before and after the report) dropped by
/// at least 80% of it, and the reported blocks came back zeroed without a clear.
fn balloon_checked(name: &str, out: &str, rss: &[Option<u64>]) -> Result<(), String> {
    let reported_kib = out
        .lines()
        .find_map(|l| l.split("balloon: reported ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| format!("boot {name}: the kernel reported no free memory to the balloon"))?;
    let (Some(Some(before)), Some(Some(after))) = (rss.first(), rss.get(1)) else {
        return Err(format!(
            "boot {name}: QEMU's resident memory was not sampled before and after the report ({rss:?})"
        ));
    };
    let dropped = before.saturating_sub(*after);
    let share = dropped as f64 / reported_kib.max(1) as f64;
    println!(
        "    --- free page reporting: {reported_kib} KiB reported; QEMU's VmRSS {before} -> {after} KiB, a drop of {dropped} KiB ({:.0}% of what was reported; goal >= 80%)",
        share * 100.0
    );
    if share < 0.8 {
        return Err(format!(
            "boot {name}: QEMU's resident memory dropped by {dropped} KiB, under 80% of the {reported_kib} KiB reported"
        ));
    }
    expect_lines(name, out, [&"without a clear, every word zero"].into_iter())
}

/// Checks that a passing boot's output has each of `lines`.
fn expect_lines<'a>(
    name: &str,
    out: &str,
    mut lines: impl Iterator<Item = &'a &'a str>,
) -> Result<(), String> {
    match lines.find(|line| !out.contains(**line)) {
        Some(line) => Err(format!(
            "boot {name}: it passed but printed no line containing {line:?}"
        )),
        None => Ok(()),
    }
}

fn loom(root: &Path, _: &Options) -> StageResult {
    let mut c = cargo(root);
    c.env("RUSTFLAGS", "--cfg loom")
        .env("LOOM_MAX_PREEMPTIONS", "3")
        // The release profile's line tables are for the report's profiles; a failing model
        // names its place in its panic message without them.
        .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
        .args(["test", "--release", "--target-dir", "target/loom", "--lib"])
        .arg("--all-features");
    for krate in LOOM_CRATES {
        c.args(["-p", krate]);
    }
    let out = cmd::output_echoed(c.args(["--", "loom_"]))?;
    match tests_run(&out) {
        0 => Ok("nothing to run: no loom test exists yet".into()),
        n => Ok(format!("{n} loom models")),
    }
}

fn fuzz(root: &Path, opts: &Options) -> StageResult {
    let runs = crate::fuzz::run_all(
        root,
        crate::fuzz::Budget::Seconds(u64::from(opts.fuzz_seconds)),
        &[],
    )?;
    if runs.is_empty() {
        return Ok("nothing to run: no fuzz target exists yet".into());
    }
    if let Some(r) = runs.iter().find(|r| r.crash.is_some()) {
        return Err(format!(
            "{} crashed: {}",
            r.target,
            r.crash.as_deref().unwrap_or_default()
        ));
    }
    Ok(format!(
        "{} targets, {} s each: {}",
        runs.len(),
        opts.fuzz_seconds,
        crate::fuzz::summary(&runs)
    ))
}

/// The benchmarks build and link (in the test profile: the `test` stage built their
/// dependencies already; `cargo xtask report` builds them optimized).
fn bench(root: &Path, _: &Options) -> StageResult {
    cmd::status(cargo(root).args([
        "test",
        "--workspace",
        "--all-features",
        "--benches",
        "--no-run",
    ]))?;
    Ok("benchmarks compile".into())
}
