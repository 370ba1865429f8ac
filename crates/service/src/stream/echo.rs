//! The echo connection on a futures-io stream: a read into one buffer, then
//! `write_all` of the complete messages (the loop of smol's and glommio's own echo
//! examples), with the message cutting of `--compute-us` from [`Held`]. One buffer
//! per connection, allocated once.

use std::io;

use futures_io::{AsyncRead, AsyncWrite};

use super::{Counts, read, write_all};
use crate::echo::{EchoConfig, Held};

/// Echoes `stream` until the peer closes its side, then sends what is still
/// held (a trailing partial message) and returns.
///
/// Pending output is bounded by the buffer (16 KiB plus a held partial message):
/// a peer that does not read leaves this task in `write_all`, and it reads no
/// more until the peer does. With `--compute-us`, the handler's work runs in the
/// task, holding its executor thread.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    config: &EchoConfig,
    count: &mut impl Counts,
) -> io::Result<()> {
    let mut held = Held::new(config);
    let mut buf = held.buffer();
    loop {
        let n = read(stream, &mut buf[held.read_at()..]).await?;
        if n == 0 {
            break;
        }
        count.bytes_in(n);
        let ready = held.received(n);
        write_all(stream, &buf[..ready]).await?;
        count.bytes_out(ready);
        held.written(&mut buf);
    }
    // EOF: a trailing partial message is echoed as it is, without a spin.
    write_all(stream, &buf[..held.held()]).await?;
    count.bytes_out(held.held());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Duplex, Seen, ready};
    use super::*;

    #[test]
    fn echoes_everything_across_reads_and_counts_it() {
        let mut stream = Duplex {
            input: b"hello, world".to_vec(),
            chunk: 5,
            ..Duplex::default()
        };
        let mut seen = Seen::default();
        let config = EchoConfig {
            compute: None,
            msg_size: std::num::NonZeroUsize::MIN,
        };
        ready(serve(&mut stream, &config, &mut seen)).unwrap();
        assert_eq!(stream.output, b"hello, world");
        assert_eq!((seen.bytes_in, seen.bytes_out), (12, 12));
    }
}
