//! What the integration tests share.

use proptest::test_runner::Config;

/// proptest's configuration: the default cases (more with `PROPTEST_CASES`); under Miri,
/// where a case takes seconds and isolation hides the environment and the working
/// directory, `miri_cases` cases and no failure file.
pub fn proptest_config(miri_cases: u32) -> Config {
    if cfg!(miri) {
        Config {
            cases: miri_cases,
            failure_persistence: None,
            ..Config::default()
        }
    } else {
        Config::default()
    }
}
