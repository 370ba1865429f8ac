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

/// Far more operations in one dispatch round than the SQ holds, each completing at once,
/// so that the CQ (16 entries) overflows while the worker submits: every one succeeds. A
/// full SQ or a busy CQ is the runtime's problem, never the caller's error.
#[test]
fn a_full_submission_queue_never_fails_an_operation() {
    require_io_uring!();
    const OPS: usize = 2000;
    let rt = fiber::Runtime::builder()
        .workers(1)
        .ring_entries(8)
        .cq_entries(16)
        .build()
        .unwrap();
    let results = rt
        .block_on(|| {
            let f = std::sync::Arc::new(OpenOptions::new().write(true).open("/dev/null")?);
            let writers: Vec<_> = (0..OPS)
                .map(|_| {
                    let f = std::sync::Arc::clone(&f);
                    fiber::spawn(move || f.write_at(b"x", 0))
                })
                .collect();
            Ok::<_, std::io::Error>(writers.into_iter().map(join).collect::<Vec<_>>())
        })
        .unwrap()
        .unwrap();
    let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {OPS} failed: {:?}",
        failed.len(),
        failed.first()
    );
    eprintln!("{}", rt.stats());
}
