//! The generated corpus: a deterministic tree shaped like a source tree, whose counts are
//! known by construction.
//!
//! The same [`Spec`] writes the same bytes on every run (a seeded generator, no clock, no
//! hashing of addresses; file sizes go through `f64::powf`, so another libm could round a
//! size differently, which changes bytes but never the known counts). Its shape follows what a kernel tree is like: directories a few
//! levels deep with one chain much deeper, mostly small text files with a long tail of
//! large ones (Pareto sizes), a few empty and a few binary files, hidden files and
//! directories, a name that is not UTF-8, and symbolic links (to a file and to a directory,
//! which a search must not follow).
//!
//! The counts are known without searching: text is whole lines from a pool that was
//! checked to hold no occurrence of [`NEEDLE`], planted lines hold exactly one, and the
//! needle has no newline, so no occurrence can span two lines; binary files are filler
//! bytes that share none of the needle's bytes, with the needle planted between them.
//! [`Manifest`] records the totals beside the tree (not in it, so it is not searched).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::matcher::Matcher;

/// The needle the corpus plants (the paper's).
pub const NEEDLE: &str = "io_uring";

/// Bump when the generator's output changes, so that a tree of an older generator is
/// written again.
const VERSION: u32 = 1;

/// The size and seed of a corpus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    /// Regular files (symbolic links are extra).
    pub files: usize,
    /// Total bytes aimed at (text files end on a whole line and planted lines are extra,
    /// so the result is some percent above).
    pub bytes: u64,
    /// Directories besides the root.
    pub dirs: usize,
    /// The generator's seed.
    pub seed: u64,
}

impl Spec {
    /// The benchmark's default: about 40,000 files and 300 MB, like a kernel tree's
    /// source files (Linux 5.13 has about 70,000 files and 1 GB).
    pub const FULL: Spec = Spec {
        files: 40_000,
        bytes: 300 << 20,
        dirs: 2_500,
        seed: 16,
    };

    /// A small tree for a quick run of the suite: 2,000 files, 16 MB.
    pub const SMALL: Spec = Spec {
        files: 2_000,
        bytes: 16 << 20,
        dirs: 150,
        seed: 16,
    };

    /// A tiny tree for tests: 200 files, 1 MB.
    pub const TINY: Spec = Spec {
        files: 200,
        bytes: 1 << 20,
        dirs: 20,
        seed: 16,
    };
}

/// What a generated tree holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The generator's version.
    pub version: u32,
    /// What was asked for.
    pub spec: Spec,
    /// The needle planted.
    pub needle: String,
    /// Regular files.
    pub files: u64,
    /// Bytes in them.
    pub bytes: u64,
    /// Files with at least one occurrence.
    pub files_matched: u64,
    /// Occurrences over all files.
    pub matches: u64,
    /// Directories, the root included.
    pub dirs: u64,
    /// Depth of the deepest directory below the root.
    pub max_depth: u64,
}

/// The manifest's path for a tree at `tree`.
pub fn manifest_path(tree: &Path) -> PathBuf {
    let mut name = tree.file_name().unwrap_or_default().to_os_string();
    name.push(".json");
    tree.with_file_name(name)
}

/// The tree at `tree` as `spec` makes it: reused when its manifest says it was written
/// whole by this generator for this spec, else written again.
pub fn ensure(tree: &Path, spec: Spec) -> io::Result<Manifest> {
    let mpath = manifest_path(tree);
    if let Ok(text) = fs::read_to_string(&mpath)
        && let Ok(m) = serde_json::from_str::<Manifest>(&text)
        && m.version == VERSION
        && m.spec == spec
        && m.needle == NEEDLE
        && tree.is_dir()
    {
        return Ok(m);
    }
    // The manifest goes first so that an interrupted generation is never taken for whole.
    match fs::remove_file(&mpath) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    if tree.exists() {
        fs::remove_dir_all(tree)?;
    }
    let m = generate(tree, spec)?;
    let text = serde_json::to_string_pretty(&m).map_err(io::Error::other)?;
    fs::write(&mpath, text)?;
    Ok(m)
}

/// splitmix64: small, seeded, and the same on every machine.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

const WORDS: &[&str] = &[
    "struct", "static", "int", "void", "return", "if", "else", "for", "while", "unsigned", "long",
    "const", "ring", "sqe", "cqe", "queue", "submit", "entry", "flags", "buf", "len", "ctx", "req",
    "file", "inode", "page", "lock", "spin", "mutex", "wait", "wake", "task", "sched", "poll",
    "event", "fd", "ret", "err", "dev", "net", "sock", "skb", "io", "uring", "iov", "size_t",
    "u64", "u32", "NULL", "EINVAL", "EAGAIN", "kfree", "kmalloc", "=", "->", "&&", "||", "(", ")",
    "{", "}", ";", "*", "+", "0", "1", "#define", "#include",
];

/// Lines of pseudo-C, none holding the needle, joined; `offsets[i]` is where line `i`
/// starts (and `offsets[len]` the end).
fn text_pool(rng: &mut Rng, m: &Matcher) -> (Vec<u8>, Vec<usize>) {
    let mut pool = Vec::new();
    let mut offsets = vec![0];
    let mut line = String::new();
    while offsets.len() < 4096 {
        line.clear();
        for _ in 0..rng.below(4) {
            line.push('\t');
        }
        for i in 0..1 + rng.below(10) {
            if i > 0 {
                line.push(' ');
            }
            line.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        }
        line.push('\n');
        if m.count(line.as_bytes()) == 0 {
            pool.extend_from_slice(line.as_bytes());
            offsets.push(pool.len());
        }
    }
    (pool, offsets)
}

/// Lines that hold the needle exactly once.
fn planted_lines(m: &Matcher) -> io::Result<Vec<Vec<u8>>> {
    let lines: Vec<Vec<u8>> = [
        format!("#include <linux/{NEEDLE}.h>\n"),
        format!("\tstruct {NEEDLE} *ring = ctx->ring;\n"),
        format!("static int {NEEDLE}_setup(unsigned entries)\n"),
        format!(" * {NEEDLE}: submission and completion queues\n"),
        format!("\treturn {NEEDLE}_enter(fd, n, 0, 0, NULL);\n"),
    ]
    .into_iter()
    .map(String::into_bytes)
    .collect();
    if lines.iter().any(|l| m.count(l) != 1) {
        return Err(io::Error::other(
            "a planted line holds the needle more or less than once",
        ));
    }
    Ok(lines)
}

/// What kind of file to write.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Content {
    Empty,
    Text,
    Binary,
}

/// Writes the tree; the caller writes the manifest.
fn generate(root: &Path, spec: Spec) -> io::Result<Manifest> {
    let m = Matcher::new(NEEDLE.as_bytes()).map_err(io::Error::other)?;
    let mut rng = Rng(spec.seed);
    let (pool, offsets) = text_pool(&mut rng, &m);
    let lines = offsets.len() - 1;
    let planted = planted_lines(&m)?;
    // Filler for binary files: bytes the needle does not contain, so that only planted
    // needles count.
    let filler: Vec<u8> = (0u8..=255)
        .filter(|b| !NEEDLE.as_bytes().contains(b) && *b != b'\n')
        .collect();

    // Directories: each new one under a random earlier one (so most are shallow and a few
    // deep), every tenth hidden, plus one chain 40 deep.
    fs::create_dir_all(root)?;
    let mut dirs: Vec<(PathBuf, u64)> = vec![(root.to_path_buf(), 0)];
    for i in 0..spec.dirs {
        let parent = rng.below(dirs.len() as u64) as usize;
        let (ppath, depth) = dirs[parent].clone();
        let name = if i % 10 == 3 {
            format!(".hidden{i}")
        } else {
            format!(
                "{}{i}",
                ["drivers", "fs", "net", "kernel", "mm", "lib", "arch"][i % 7]
            )
        };
        let path = ppath.join(name);
        fs::create_dir(&path)?;
        dirs.push((path, depth + 1));
    }
    let mut deep = root.join("deep");
    for level in 0..40 {
        deep = deep.join(format!("d{level}"));
        dirs.push((deep.clone(), level + 1));
    }
    fs::create_dir_all(&deep)?;

    // Sizes: Pareto with shape 1.2 (a long tail), scaled to the total asked for, capped at
    // 16 MB a file.
    let raw: Vec<f64> = (0..spec.files)
        .map(|_| rng.unit().powf(-1.0 / 1.2).min(4096.0))
        .collect();
    let scale = spec.bytes as f64 / raw.iter().sum::<f64>();
    let mut man = Manifest {
        version: VERSION,
        spec,
        needle: NEEDLE.to_owned(),
        files: 0,
        bytes: 0,
        files_matched: 0,
        matches: 0,
        dirs: dirs.len() as u64,
        max_depth: dirs.iter().map(|d| d.1).max().unwrap_or(0),
    };
    let mut data = Vec::new();
    for (i, r) in raw.iter().enumerate() {
        let size = ((r * scale) as usize).min(16 << 20);
        let content = match rng.below(100) {
            0..=1 => Content::Empty,
            2..=4 => Content::Binary,
            _ => Content::Text,
        };
        // About one file in eight holds the needle, most once, a few many times.
        let plants = if content != Content::Empty && rng.below(8) == 0 {
            1 + rng.below(4) * rng.below(6) * (1 + u64::from(size > 65536) * rng.below(50))
        } else {
            0
        };
        data.clear();
        match content {
            Content::Empty => {}
            Content::Text => {
                let mut left = plants;
                while data.len() < size || left > 0 {
                    // A run of up to 64 pool lines, then perhaps a planted line.
                    let a = rng.below(lines as u64) as usize;
                    let b = (a + 1 + rng.below(64) as usize).min(lines);
                    data.extend_from_slice(&pool[offsets[a]..offsets[b]]);
                    if left > 0 && (data.len() >= size || rng.below(4) == 0) {
                        data.extend_from_slice(&planted[rng.below(planted.len() as u64) as usize]);
                        left -= 1;
                    }
                }
            }
            Content::Binary => {
                let size = size.min(1 << 20);
                let mut left = plants;
                data.extend_from_slice(&[0x7f, 0x02, 0x01, 0x00]);
                while data.len() < size || left > 0 {
                    data.push(filler[rng.below(filler.len() as u64) as usize]);
                    if left > 0 && (data.len() >= size || rng.below(4096) == 0) {
                        data.extend_from_slice(NEEDLE.as_bytes());
                        left -= 1;
                    }
                }
            }
        }
        let (dir, _) = &dirs[rng.below(dirs.len() as u64) as usize];
        let ext = ["c", "h", "rs", "txt", "md", "S", "json"][rng.below(7) as usize];
        let name = match (i % 97, content) {
            (_, Content::Binary) => format!("blob{i}.o"),
            (5, _) => format!(".dot{i}.{ext}"),
            _ => format!("file{i}.{ext}"),
        };
        fs::write(dir.join(name), &data)?;
        man.files += 1;
        man.bytes += data.len() as u64;
        if plants > 0 {
            man.files_matched += 1;
            man.matches += plants;
        }
    }

    // A name that is not UTF-8, holding the needle twice.
    let odd = {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::OsStr::from_bytes(b"caf\xe9.txt")
    };
    let text = format!("{NEEDLE} and {NEEDLE}\n");
    fs::write(root.join(odd), &text)?;
    man.files += 1;
    man.bytes += text.len() as u64;
    man.files_matched += 1;
    man.matches += 2;
    // Links the walk must not follow: to a file with matches, to a directory, and a loop.
    std::os::unix::fs::symlink("../caf\u{fffd}", root.join("deep/dangling"))?;
    std::os::unix::fs::symlink(root.join("deep"), root.join("link-to-deep"))?;
    std::os::unix::fs::symlink(".", root.join("deep/loop"))?;
    Ok(man)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file searched whole: the manifest's counts are the truth.
    fn count_tree(root: &Path, m: &Matcher, man: &mut Manifest) {
        for e in fs::read_dir(root).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                count_tree(&e.path(), m, man);
            } else if t.is_file() {
                let data = fs::read(e.path()).unwrap();
                let n = m.count(&data);
                man.files += 1;
                man.bytes += data.len() as u64;
                man.files_matched += u64::from(n > 0);
                man.matches += n;
            }
        }
    }

    #[test]
    fn the_manifest_matches_a_whole_search_and_the_tree_is_deterministic() {
        let dir = tempfile::tempdir().unwrap();
        let a = ensure(&dir.path().join("a"), Spec::TINY).unwrap();
        let b = ensure(&dir.path().join("b"), Spec::TINY).unwrap();
        assert_eq!(a, b);
        let mut found = Manifest {
            files: 0,
            bytes: 0,
            files_matched: 0,
            matches: 0,
            ..a.clone()
        };
        count_tree(
            &dir.path().join("a"),
            &Matcher::new(NEEDLE.as_bytes()).unwrap(),
            &mut found,
        );
        assert_eq!(found, a);
        assert!(a.files_matched > 5 && a.matches > a.files_matched, "{a:?}");
        assert!(a.max_depth >= 40);
        // Reused, not written again: a marker file survives.
        fs::write(dir.path().join("a/marker"), b"").unwrap();
        assert_eq!(ensure(&dir.path().join("a"), Spec::TINY).unwrap(), a);
        assert!(dir.path().join("a/marker").exists());
    }
}
