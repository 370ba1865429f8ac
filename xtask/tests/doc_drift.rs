//! The docs name what exists: every `cargo xtask <task> --flag` in a code span or block of
//! README.md, ARCHITECTURE.md and docs/*.md is a task of the built xtask with that flag (read
//! from its `--help`), and every repository path a code span names is in the tree. So the
//! next rename of a flag or a file that leaves a doc behind fails here, and the doc is fixed
//! with the code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the workspace")
        .to_path_buf()
}

/// `xtask ARGS --help`'s text.
fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .arg("--help")
        .output()
        .expect("xtask runs");
    assert!(out.status.success(), "xtask {args:?} --help failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Each task of xtask and the long flags its `--help` lists.
fn tasks() -> BTreeMap<String, Vec<String>> {
    let top = help(&[]);
    let names: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|n| n != "help")
        .collect();
    assert!(names.len() >= 5, "no tasks read from:\n{top}");
    names
        .into_iter()
        .map(|n| {
            let text = help(&[&n]);
            (n, flags_of(&text))
        })
        .collect()
}

/// The long flags of a `--help`'s option lines (`  -h, --help`, `      --suite <SUITE>`).
fn flags_of(help: &str) -> Vec<String> {
    help.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .split_once(", ")
                .filter(|(s, _)| s.len() == 2)
                .map_or(l, |x| x.1);
            let flag = l.strip_prefix("--")?;
            let name: String = flag
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// The code of `markdown`: each inline span, and each line of each block (a line ending in
/// `\` joined with the next).
fn code(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut block: Option<String> = None;
    for e in Parser::new(markdown) {
        match e {
            Event::Code(c) => out.push(c.replace('\n', " ")),
            Event::Start(Tag::CodeBlock(_)) => block = Some(String::new()),
            Event::Text(t) => {
                if let Some(b) = block.as_mut() {
                    b.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                let b = block.take().unwrap_or_default();
                out.extend(b.replace("\\\n", " ").lines().map(str::to_string));
            }
            _ => {}
        }
    }
    out
}

/// The words of a shell command line outside quotes, up to its end (`;`, `|`, `&&`, `#`).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => word.push('\u{1}'),
            (None, '\'' | '"') => quote = Some(c),
            (None, ';' | '|' | '&' | '#') => break,
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            (None, c) => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// What is wrong with `text`'s code: a task xtask does not have, a flag its task does not
/// take, a repository path that is not in the tree under `root`.
fn problems(text: &str, tasks: &BTreeMap<String, Vec<String>>, root: &Path) -> Vec<String> {
    checked(text, tasks, root).0
}

/// [`problems`], and how many commands and paths were checked.
fn checked(
    text: &str,
    tasks: &BTreeMap<String, Vec<String>>,
    root: &Path,
) -> (Vec<String>, usize, usize) {
    let (mut commands, mut paths) = (0, 0);
    let mut out = Vec::new();
    for span in code(text) {
        let w = words(&span);
        if let Some(at) = w
            .windows(2)
            .position(|p| p[0] == "cargo" && p[1] == "xtask")
        {
            let Some(task) = w.get(at + 2).filter(|t| !t.starts_with('-')) else {
                continue;
            };
            commands += 1;
            let Some(flags) = tasks.get(task) else {
                out.push(format!("`{span}`: xtask has no task `{task}`"));
                continue;
            };
            for word in &w[at + 3..] {
                let Some(flag) = word.strip_prefix("--") else {
                    continue;
                };
                let flag = flag.split('=').next().unwrap_or_default();
                if !flag.is_empty() && !flags.iter().any(|f| f == flag) {
                    out.push(format!("`{span}`: `cargo xtask {task}` has no --{flag}"));
                }
            }
        } else if let Some(path) = repo_path(&span, root) {
            paths += 1;
            if !root.join(path).exists() {
                out.push(format!("`{span}`: no such file or directory in the tree"));
            }
        }
    }
    (out, commands, paths)
}

/// The span as a path of the repository: words of letters, digits, `.`, `_`, `-` joined by
/// `/`, whose first part is at the repository's root (so `plots/x.svg`, a path inside a run
/// directory, and `/proc/stat` are not taken for one), and not under `target/`, which the
/// build and the runs fill (a fresh clone has no `target/search-corpus/` until a search run).
fn repo_path<'a>(span: &'a str, root: &Path) -> Option<&'a str> {
    let path = span.trim_end_matches('/');
    let ok = path.contains('/')
        && path.split('/').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        });
    let first = path.split('/').next()?;
    (ok && first != ".." && first != "target" && root.join(first).exists()).then_some(path)
}

/// The docs the test reads.
fn docs(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    let mut more: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is there")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    more.sort();
    out.extend(more);
    out
}

#[test]
fn every_command_flag_and_path_the_docs_name_exists() {
    let root = root();
    let tasks = tasks();
    let (mut all, mut commands, mut paths) = (Vec::new(), 0, 0);
    for doc in docs(&root) {
        let text = std::fs::read_to_string(&doc).unwrap();
        let (found, c, p) = checked(&text, &tasks, &root);
        (commands, paths) = (commands + c, paths + p);
        for p in found {
            all.push(format!(
                "{}: {p}",
                doc.strip_prefix(&root).unwrap().display()
            ));
        }
    }
    assert!(
        all.is_empty(),
        "the docs name what is not there:\n{}",
        all.join("\n")
    );
    // The docs hold dozens of each: a parser that found none would pass for nothing.
    assert!(
        commands >= 30 && paths >= 30,
        "{commands} commands, {paths} paths checked"
    );
    eprintln!("{commands} commands and {paths} paths checked");
}

#[test]
fn a_planted_wrong_flag_task_or_path_is_found() {
    let root = root();
    let tasks = tasks();
    let text = "Run `cargo xtask bench --suite quick --no-such-flag 3`, then\n\n\
                ```sh\ncargo xtask compare A B \\\n  --fail-abve 5%   # a typo\n\
                cargo xtask benhc\n```\n\nand read `docs/NO-SUCH.md` and `xtask/src/main.rs`; \
                an outside server's own flags are not xtask's: \
                `cargo xtask conform 'srv --addr {addr}' --proto echo`.";
    let found = problems(text, &tasks, &root);
    assert_eq!(found.len(), 4, "{found:#?}");
    assert!(found[0].contains("has no --no-such-flag"), "{found:#?}");
    assert!(
        found[1].contains("`cargo xtask compare` has no --fail-abve"),
        "{found:#?}"
    );
    assert!(found[2].contains("no task `benhc`"), "{found:#?}");
    assert!(
        found[3].contains("`docs/NO-SUCH.md`: no such file"),
        "{found:#?}"
    );
}
