//! netbed-echo: the helper netbed's tests start inside the namespaces, so that they need
//! neither nc nor python. Not meant for anything else.
//!
//! ```text
//! netbed-echo listen ADDR         print `READY <addr>`, then echo one line per connection
//!                                 back, prefixed with `echo `, until killed
//! netbed-echo connect ADDR TEXT   send TEXT, print the line that comes back, exit 0;
//!                                 every step bounded by 5 s, exit 1 with the reason if not
//! ```

#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// The bound of every connect, read and write.
const TIMEOUT: Duration = Duration::from_secs(5);

fn main() {
    if let Err(e) = run() {
        eprintln!("netbed-echo: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["listen", addr] => listen(
            addr.parse()
                .with_context(|| format!("bad address {addr:?}"))?,
        ),
        ["connect", addr, text] => connect(
            addr.parse()
                .with_context(|| format!("bad address {addr:?}"))?,
            text,
        ),
        _ => bail!("usage: netbed-echo listen ADDR | netbed-echo connect ADDR TEXT"),
    }
}

fn listen(addr: SocketAddr) -> Result<()> {
    let listener = TcpListener::bind(addr).with_context(|| format!("binding {addr}"))?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "READY {}", listener.local_addr()?)?;
    stdout.flush()?;
    for conn in listener.incoming() {
        // One connection's failure is the connecting side's to report; keep serving.
        let _ = conn.map_err(anyhow::Error::from).and_then(echo_one);
    }
    Ok(())
}

fn echo_one(conn: TcpStream) -> Result<()> {
    conn.set_read_timeout(Some(TIMEOUT))?;
    conn.set_write_timeout(Some(TIMEOUT))?;
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line)?;
    (&conn).write_all(format!("echo {line}").as_bytes())?;
    Ok(())
}

fn connect(addr: SocketAddr, text: &str) -> Result<()> {
    let conn = TcpStream::connect_timeout(&addr, TIMEOUT)
        .with_context(|| format!("connecting to {addr}"))?;
    conn.set_read_timeout(Some(TIMEOUT))?;
    conn.set_write_timeout(Some(TIMEOUT))?;
    (&conn)
        .write_all(format!("{text}\n").as_bytes())
        .context("sending")?;
    let mut line = String::new();
    BufReader::new(&conn)
        .read_line(&mut line)
        .context("receiving")?;
    print!("{line}");
    Ok(())
}
