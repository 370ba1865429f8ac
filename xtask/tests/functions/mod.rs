//! The functions of a Rust file and their lengths, for tidy's long-function check: the source
//! is first blanked of its comments and of the insides of its string and character literals
//! (newlines kept, so line numbers hold), then each `fn NAME` with a body is measured from
//! its `fn` line to the line of the brace that closes the body.
//!
//! A reading, not a parser: it knows comments (nested block comments too), strings (with
//! escapes), raw strings (`r#"…"#`), byte strings and character literals as against
//! lifetimes, which is all a brace count needs to stay true.

/// One function with a body: its name, the line of its `fn` (1-based) and its length in
/// lines, the `fn` line and the closing brace's included.
#[derive(Debug)]
pub(crate) struct Function {
    pub(crate) name: String,
    pub(crate) line: usize,
    pub(crate) lines: usize,
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `text` with comments and the insides of string and character literals turned to
/// spaces; newlines stay, so every character keeps its line.
fn blank(text: &str) -> Vec<char> {
    let src: Vec<char> = text.chars().collect();
    let mut out = src.clone();
    let wipe = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(src.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let mut i = 0;
    while i < src.len() {
        let c = src[i];
        let next = src.get(i + 1).copied();
        let prev_ident = i > 0 && is_ident(src[i - 1]);
        // `b'{'` and `b"…"` are literals too: a lone `b` before them is their prefix.
        let byte_prefix = i > 0 && src[i - 1] == 'b' && (i < 2 || !is_ident(src[i - 2]));
        if c == '/' && next == Some('/') {
            let end = src[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(src.len(), |p| i + p);
            wipe(&mut out, i, end);
            i = end;
        } else if c == '/' && next == Some('*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < src.len() && depth > 0 {
                if src[j] == '/' && src.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 1;
                } else if src[j] == '*' && src.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 1;
                }
                j += 1;
            }
            wipe(&mut out, i, j);
            i = j;
        } else if let Some(end) = raw_string_end(&src, i).filter(|_| !prev_ident) {
            wipe(&mut out, i, end);
            i = end;
        } else if c == '"' {
            let mut j = i + 1;
            while j < src.len() && src[j] != '"' {
                j += if src[j] == '\\' { 2 } else { 1 };
            }
            wipe(&mut out, i + 1, j);
            i = j + 1;
        } else if c == '\'' && (!prev_ident || byte_prefix) {
            // A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a, 'static).
            let end = if next == Some('\\') {
                // An escape is two characters at least: `'\''` closes after them.
                src.get(i + 3..)
                    .and_then(|rest| rest.iter().position(|&c| c == '\''))
                    .map(|p| i + 3 + p)
            } else {
                (src.get(i + 2) == Some(&'\'')).then_some(i + 2)
            };
            match end {
                Some(end) => {
                    wipe(&mut out, i + 1, end);
                    i = end + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Where the raw string (`r"…"`, `r#"…"#`, `br"…"`) that starts at `i` ends (one past its
/// last character), if one starts there.
fn raw_string_end(src: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if src[j] == 'b' {
        j += 1;
    }
    if src.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = src[j..].iter().take_while(|&&c| c == '#').count();
    j += hashes;
    if src.get(j) != Some(&'"') {
        return None;
    }
    let close: Vec<char> = std::iter::once('"')
        .chain(std::iter::repeat_n('#', hashes))
        .collect();
    (j + 1..=src.len().saturating_sub(close.len()))
        .find(|&k| src[k..k + close.len()] == close[..])
        .map(|k| k + close.len())
}

/// Every function with a body in `text`, nested ones too (an outer function's length
/// includes them).
pub(crate) fn functions(text: &str) -> Vec<Function> {
    let src = blank(text);
    let line_of = |at: usize| src[..at].iter().filter(|&&c| c == '\n').count() + 1;
    let mut found = Vec::new();
    let mut i = 0;
    while i + 2 < src.len() {
        let keyword = src[i] == 'f'
            && src[i + 1] == 'n'
            && src[i + 2].is_whitespace()
            && (i == 0 || !is_ident(src[i - 1]));
        if !keyword {
            i += 1;
            continue;
        }
        let mut j = i + 2;
        while j < src.len() && src[j].is_whitespace() {
            j += 1;
        }
        let name: String = src[j..].iter().take_while(|&&c| is_ident(c)).collect();
        if name.is_empty() {
            i += 2;
            continue;
        }
        if let Some(end) = body_end(&src, j + name.len()) {
            found.push(Function {
                name,
                line: line_of(i),
                lines: line_of(end) - line_of(i) + 1,
            });
        }
        i = j;
    }
    found
}

/// From just after a function's name: the index of the brace that closes its body, or
/// `None` for a declaration without one (`fn f();` in a trait).
fn body_end(src: &[char], from: usize) -> Option<usize> {
    let mut nest = 0i32;
    let mut j = from;
    // The signature: parentheses and brackets may hold a `;` (`[u8; 4]`), never the body.
    loop {
        match src.get(j)? {
            '(' | '[' => nest += 1,
            ')' | ']' => nest -= 1,
            ';' if nest == 0 => return None,
            '{' if nest == 0 => break,
            _ => {}
        }
        j += 1;
    }
    let mut depth = 0;
    for (k, &c) in src.iter().enumerate().skip(j) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::functions;

    fn lengths(text: &str) -> Vec<(String, usize)> {
        functions(text)
            .into_iter()
            .map(|f| (f.name, f.lines))
            .collect()
    }

    #[test]
    fn braces_in_strings_comments_and_chars_do_not_count() {
        let text = "fn a() {\n    let s = \"}}\"; // }\n    let c = '}';\n    /* } /* } */ */\n    let r = r#\"}\"#;\n}\nfn b<'x>(v: &'x [u8; 4]) -> u8 {\n    v[0]\n}\ntrait T {\n    fn c(&self);\n}\n";
        assert_eq!(
            lengths(text),
            vec![("a".to_string(), 6), ("b".to_string(), 3)]
        );
    }

    #[test]
    fn a_nested_function_is_measured_and_counted_in_its_outer_one() {
        let text = "fn outer() {\n    fn inner() {\n    }\n    let f: fn() = inner;\n}\n";
        assert_eq!(
            lengths(text),
            vec![("outer".to_string(), 5), ("inner".to_string(), 2)]
        );
    }
}
