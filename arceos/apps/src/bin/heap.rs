//! The Rust heap on ArceOS: growth by doubling past 16 MiB (a vector of 20 MiB, whose
//! buffer moves 16 MiB -> 32 MiB), the collections, and many small objects freed out of
//! order.
#![no_std]
#![no_main]

#[macro_use]
extern crate axstd as std;

use alloc_apps::{Checks, Rng};
use std::boxed::Box;
use std::collections::{BTreeMap, VecDeque};
use std::string::String;
use std::vec::Vec;

fn grows_past_16_mib() -> Result<(), String> {
    let n = 20 << 20 >> 3;
    let mut v: Vec<u64> = Vec::new();
    for i in 0..n as u64 {
        v.push(i * 3);
    }
    if v.capacity() * 8 < 20 << 20 {
        return Err(format!("capacity {} after {n} pushes", v.capacity()));
    }
    match v.iter().enumerate().find(|&(i, &x)| x != i as u64 * 3) {
        Some((i, x)) => Err(format!("element {i} reads {x}")),
        None => Ok(()),
    }
}

fn collections() -> Result<(), String> {
    let mut rng = Rng::new(7);
    let mut map = BTreeMap::new();
    for i in 0..50_000u64 {
        map.insert(rng.below(1 << 20) as u64, i);
    }
    let mut removed = 0;
    for k in 0..(1u64 << 20) {
        if k % 3 == 0 && map.remove(&k).is_some() {
            removed += 1;
        }
    }
    if map.keys().any(|k| k % 3 == 0) {
        return Err(format!(
            "a removed key is still in the map ({removed} removed)"
        ));
    }
    let mut q: VecDeque<String> = VecDeque::new();
    for i in 0..10_000 {
        q.push_back(format!("item {i}"));
        if i % 3 == 0 {
            q.pop_front();
        }
    }
    let first = q.front().cloned().unwrap_or_default();
    if q.len() != 6_666 || first != "item 3334" {
        return Err(format!("queue of {} starting at {first:?}", q.len()));
    }
    Ok(())
}

fn small_objects_out_of_order() -> Result<(), String> {
    let mut rng = Rng::new(11);
    let mut live: Vec<Option<Box<[u8]>>> = (0..4096).map(|_| None).collect();
    for round in 0..40_000usize {
        let slot = rng.below(live.len());
        match live[slot].take() {
            Some(b) => {
                let tag = b[0];
                if b.iter().any(|&x| x != tag) {
                    return Err(format!("object in slot {slot} overwritten (round {round})"));
                }
            }
            None => {
                let len = 1 + rng.below(2000);
                live[slot] = Some(std::vec![(slot % 251) as u8; len].into_boxed_slice());
            }
        }
    }
    Ok(())
}

#[unsafe(no_mangle)]
fn main() {
    let mut checks = Checks::new("heap");
    checks.check("grows past 16 MiB", grows_past_16_mib());
    checks.check("collections", collections());
    checks.check("small objects out of order", small_objects_out_of_order());
    checks.verdict();
}
