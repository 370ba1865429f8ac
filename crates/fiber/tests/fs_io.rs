//! Files and raw descriptors through the runtime.

mod util;

use std::os::fd::AsFd;

use fiber::fs::{File, OpenOptions};
use util::{join, runtime};

#[test]
fn write_read_append_fsync_close() {
    require_io_uring!();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let rt = runtime(2);
    let p = path.clone();
    let got = rt
        .block_on(move || -> std::io::Result<Vec<u8>> {
            let f = File::create(&p)?;
            f.write_all_at(b"hello world", 0)?;
            f.write_all_at(b"HELLO", 0)?;
            f.fsync()?;
            f.close()?;
            let a = OpenOptions::new().append(true).open(&p)?;
            a.append(b", again")?;
            a.fdatasync()?;
            drop(a);
            let r = File::open(&p)?;
            let mut buf = vec![0u8; 64];
            let n = r.read_at(&mut buf, 0)?;
            buf.truncate(n);
            let mut tail = [0u8; 5];
            r.read_exact_at(&mut tail, 6)?;
            assert_eq!(&tail, b"world");
            assert_eq!(r.read_at(&mut tail, 1000)?, 0);
            Ok(buf)
        })
        .unwrap()
        .unwrap();
    assert_eq!(got, b"HELLO world, again");
    assert_eq!(std::fs::read(&path).unwrap(), b"HELLO world, again");
}

#[test]
fn opening_a_missing_file_fails_with_not_found() {
    require_io_uring!();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing");
    let rt = runtime(1);
    let r = rt.block_on(move || File::open(&path).map(drop)).unwrap();
    assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn a_fiber_reads_a_pipe_without_blocking_its_worker() {
    require_io_uring!();
    let rt = runtime(1);
    let (r, w) = std::io::pipe().unwrap();
    let reader = rt.spawn(move || {
        let mut buf = [0u8; 16];
        let n = fiber::io::read(r.as_fd(), &mut buf).unwrap();
        buf[..n].to_vec()
    });
    // The single worker is free while the reader waits: this fiber runs.
    let other = rt.spawn(|| 7);
    assert_eq!(join(other), 7);
    let writer = rt.spawn(move || fiber::io::write(w.as_fd(), b"ping").unwrap());
    assert_eq!(join(writer), 4);
    assert_eq!(join(reader), b"ping");
}
