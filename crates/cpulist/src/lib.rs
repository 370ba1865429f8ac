//! The CPU lists of `--cpus` (servers, loadgen) and of xtask's `--server-cpus` and
//! `--client-cpus`: one type and one grammar, so that a list xtask writes on a
//! child's command line means there what it meant to xtask, and a bad list gets
//! the same error text from every program.
//!
//! The grammar is the kernel's CPU-list format (`taskset -c`,
//! `/sys/devices/system/cpu/online`) without its extensions: items separated by
//! commas, each a CPU number or an inclusive range `lo-hi`, no spaces. Order is
//! kept (worker `i` runs on the `i`-th CPU, round robin); a CPU may be named once.
//!
//! This crate only parses and prints: pinning is the caller's (`launch::cpus`,
//! loadgen, xtask), each with the errors its users need.
//!
//! ```
//! use cpulist::CpuList;
//!
//! let cpus: CpuList = "3,0-1".parse()?;
//! assert_eq!(cpus.as_slice(), [3, 0, 1]);
//! assert_eq!(cpus.for_worker(4), 0);
//! assert_eq!(cpus.to_string(), "3,0,1");
//! let e = "1,1".parse::<CpuList>().unwrap_err();
//! assert_eq!(e.to_string(), "`1,1` is not a CPU list like 1, 0,2 or 1-3: it names CPU 1 twice");
//! # Ok::<(), cpulist::ParseError>(())
//! ```

#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;

/// CPU numbers at or past this are refused: more than any CPU set names (glibc's
/// `cpu_set_t` holds 1024), and a bound on what a range may expand to.
pub const MAX_CPU: usize = 4096;

/// A non-empty list of distinct CPU numbers, in the order given.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CpuList(Vec<usize>);

/// Why a string is not a [`CpuList`]; its `Display` is the one error text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{list}` is not a CPU list like 1, 0,2 or 1-3: {reason}")]
pub struct ParseError {
    list: String,
    reason: Reason,
}

/// What is wrong with a CPU list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Reason {
    /// Nothing between two commas, at an end, or beside a `-`.
    #[error("a CPU number is missing")]
    Missing,
    /// An item is not a number or a range of numbers (spaces included).
    #[error("`{0}` is not a CPU number")]
    NotANumber(String),
    /// A range whose end is below its start.
    #[error("`{0}` is an empty range")]
    EmptyRange(String),
    /// A CPU named twice.
    #[error("it names CPU {0} twice")]
    Repeated(usize),
    /// A CPU number at or past [`MAX_CPU`].
    #[error("CPU {0} is past the last CPU a list may name ({last})", last = MAX_CPU - 1)]
    TooLarge(usize),
}

impl ParseError {
    /// What is wrong.
    pub fn reason(&self) -> &Reason {
        &self.reason
    }
}

impl CpuList {
    /// The list of one CPU.
    pub fn one(cpu: usize) -> Self {
        CpuList(vec![cpu])
    }

    /// The CPUs, in the order given.
    pub fn as_slice(&self) -> &[usize] {
        &self.0
    }

    /// How many CPUs the list names (at least one).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a list names at least one CPU.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The CPU for worker `i`: the list is used round robin.
    pub fn for_worker(&self, i: usize) -> usize {
        self.0[i % self.0.len()]
    }

    /// Whether any CPU is in both lists.
    pub fn overlaps(&self, other: &CpuList) -> bool {
        self.0.iter().any(|cpu| other.0.contains(cpu))
    }
}

impl FromStr for CpuList {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, ParseError> {
        parse(s).map_err(|reason| ParseError {
            list: s.to_owned(),
            reason,
        })
    }
}

fn parse(s: &str) -> Result<CpuList, Reason> {
    let number = |t: &str| {
        // `parse` alone would take a leading `+`.
        if t.is_empty() {
            return Err(Reason::Missing);
        }
        if !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Reason::NotANumber(t.to_owned()));
        }
        match t.parse::<usize>() {
            Ok(cpu) if cpu < MAX_CPU => Ok(cpu),
            Ok(cpu) => Err(Reason::TooLarge(cpu)),
            Err(_) => Err(Reason::TooLarge(usize::MAX)),
        }
    };
    let mut cpus = Vec::new();
    for item in s.split(',') {
        let (lo, hi) = match item.split_once('-') {
            Some((lo, hi)) => (number(lo)?, number(hi)?),
            None => {
                let cpu = number(item)?;
                (cpu, cpu)
            }
        };
        if lo > hi {
            return Err(Reason::EmptyRange(item.to_owned()));
        }
        for cpu in lo..=hi {
            if cpus.contains(&cpu) {
                return Err(Reason::Repeated(cpu));
            }
            cpus.push(cpu);
        }
    }
    Ok(CpuList(cpus))
}

impl fmt::Display for CpuList {
    /// The list as it parses back: every CPU, comma-separated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, cpu) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{cpu}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(s: &str) -> Vec<usize> {
        s.parse::<CpuList>().unwrap().as_slice().to_vec()
    }

    fn reason(s: &str) -> Reason {
        s.parse::<CpuList>().unwrap_err().reason().clone()
    }

    #[test]
    fn numbers_and_ranges_in_the_order_given() {
        assert_eq!(cpus("1"), [1]);
        assert_eq!(cpus("0,2"), [0, 2]);
        assert_eq!(cpus("0-2,5"), [0, 1, 2, 5]);
        assert_eq!(cpus("5,1-2"), [5, 1, 2]);
        assert_eq!(cpus("3-3"), [3]);
        assert_eq!(cpus("4095"), [4095]);
    }

    #[test]
    fn what_is_not_a_list_says_why() {
        for bad in ["", ",", "1,,2", "-1", "1-"] {
            assert_eq!(reason(bad), Reason::Missing, "{bad:?}");
        }
        for bad in ["a", "+1", " 1", "1 ", "0, 2", "1-2-3"] {
            assert!(
                matches!(reason(bad), Reason::NotANumber(_)),
                "{bad:?}: {:?}",
                reason(bad)
            );
        }
        assert_eq!(reason("3-1"), Reason::EmptyRange("3-1".into()));
        assert_eq!(reason("1,1"), Reason::Repeated(1));
        assert_eq!(reason("0-3,2"), Reason::Repeated(2));
        assert_eq!(reason("4096"), Reason::TooLarge(4096));
        assert_eq!(
            reason("0-99999999999999999999"),
            Reason::TooLarge(usize::MAX)
        );
    }

    #[test]
    fn the_error_text_names_the_list_and_the_grammar() {
        let e = "0-x".parse::<CpuList>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "`0-x` is not a CPU list like 1, 0,2 or 1-3: `x` is not a CPU number"
        );
    }

    #[test]
    fn display_parses_back() {
        for s in ["1", "0-3", "7,0,2-4"] {
            let list: CpuList = s.parse().unwrap();
            assert_eq!(list.to_string().parse::<CpuList>().unwrap(), list);
        }
    }

    #[test]
    fn workers_go_round_robin_and_overlap_is_any_shared_cpu() {
        let l: CpuList = "4,6".parse().unwrap();
        let workers: Vec<_> = (0..4).map(|i| l.for_worker(i)).collect();
        assert_eq!(workers, [4, 6, 4, 6]);
        assert!(l.overlaps(&CpuList::one(6)));
        assert!(!l.overlaps(&CpuList::one(5)));
    }
}
