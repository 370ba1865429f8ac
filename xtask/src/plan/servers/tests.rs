//! Tests of the server variants: names, flags, labels, what each serves, the defaults.

use super::*;

fn inv() -> Inventory {
    let mut packages = BTreeMap::new();
    packages.insert("srv-threads".into(), "server-threads".into());
    packages.insert("srv-fiber".into(), "server-fiber".into());
    packages.insert("srv-odd".into(), "server-odd".into());
    packages.insert("loadgen".into(), "loadgen".into());
    Inventory {
        packages,
        target_dir: PathBuf::from("/t"),
        go_dir: None,
        go_version: None,
        peers: Vec::new(),
        io_uring: None,
    }
}

#[test]
fn variants_are_names_plus_flags() {
    let i = inv();
    let v = i.parse("threads-process").unwrap();
    assert_eq!(
        (v.binary.as_str(), v.flags.clone()),
        ("srv-threads", vec!["--mode".into(), "process".into()])
    );
    let v = i.parse("fiber+completer+ring-flags=sqpoll").unwrap();
    assert_eq!(v.binary, "srv-fiber");
    assert_eq!(v.flags, ["--completer", "--ring-flags", "sqpoll"]);
    assert_eq!(v.name, "fiber+completer+ring-flags=sqpoll");
    assert_eq!(i.parse("odd").unwrap().binary, "srv-odd");
    assert!(i.parse("fiber+").is_err());
    assert!(i.parse("fiber+--x").is_err());
}

#[test]
fn name_labels_a_variant_and_passes_nothing() {
    let i = inv();
    let v = i.parse("fiber+completer+name=again").unwrap();
    assert_eq!(v.name, "again");
    assert_eq!(v.binary, "srv-fiber");
    assert_eq!(v.flags, ["--completer"]);
    let v = i.select("threads,threads+name=again").unwrap();
    assert_eq!(
        v.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
        ["threads", "again"]
    );
    assert_eq!(v[0].flags, v[1].flags);
    for bad in [
        "threads+name",
        "threads+name=",
        "threads+name=a/b",
        "threads+name=.x",
    ] {
        let e = i.parse(bad).unwrap_err().to_string();
        assert!(e.contains("+name takes a label"), "{bad}: {e}");
    }
    // Two different variants under one name would overwrite each other's files.
    let e = i
        .select("threads,threads-process+name=threads")
        .unwrap_err()
        .to_string();
    assert!(e.contains("named `threads`"), "{e}");
}

#[test]
fn an_unknown_server_lists_the_valid_ones() {
    let e = inv().parse("nginx").unwrap_err().to_string();
    assert!(e.contains("unknown server `nginx`"), "{e}");
    assert!(e.contains("threads, threads-process, reactor"), "{e}");
    assert!(e.contains("odd"), "{e}");
}

#[test]
fn selection_checks_what_can_be_built() {
    let i = inv();
    let v = i.select("threads, fiber+completer,threads").unwrap();
    assert_eq!(
        v.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
        ["threads", "fiber+completer"]
    );
    let e = i.select("tokio").unwrap_err().to_string();
    assert!(
        e.contains("no package of this workspace builds srv-tokio"),
        "{e}"
    );
    let e = i.select("go").unwrap_err().to_string();
    assert!(e.contains("peers/go"), "{e}");
    assert!(i.select(" , ").is_err());
}

#[test]
fn defaults_skip_what_is_missing_and_pick_up_new_servers() {
    let (run, skipped) = inv().defaults();
    let names: Vec<&str> = run.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["threads", "threads-process", "fiber", "odd"]);
    assert!(skipped.iter().any(|s| s.starts_with("tokio:")));
    assert!(skipped.iter().any(|s| s.starts_with("go:")));
}

#[test]
fn echo_only_servers_skip_chat_and_compute() {
    let mut i = inv();
    i.packages.insert("srv-floor".into(), "server-floor".into());
    let floor = i.parse("floor-uring").unwrap();
    assert_eq!(floor.flags, ["--api", "io_uring"]);
    let echo = |compute_us| Workload::Echo {
        msg_size: 16,
        compute_us,
    };
    assert!(floor.serves(echo(0)) && floor.serves(Workload::Idle));
    assert!(!floor.serves(echo(200)));
    assert!(!floor.serves(Workload::ChatRoom { room_size: 2 }));
    let threads = i.parse("threads").unwrap();
    assert!(threads.serves(echo(200)) && threads.serves(Workload::ChatRoom { room_size: 2 }));
    assert!(!i.names().contains(&"floor".to_string()));
}

#[test]
fn go_poll_and_go_sessions_sit_out_what_the_conformance_limits_say() {
    use crate::plan::suites::{HttpDriver, HttpPath, KvDriver};
    let i = inv();
    let poll = i.parse("go-poll").unwrap();
    assert_eq!(poll.flags, ["--model", "poll"]);
    let echo = Workload::Echo {
        msg_size: 16,
        compute_us: 0,
    };
    let chat = Workload::ChatRoom { room_size: 2 };
    let kv = Workload::Kv {
        driver: KvDriver::Loadgen,
        get: true,
        pipeline: 1,
    };
    let http = Workload::Http {
        driver: HttpDriver::Loadgen,
        path: HttpPath::Plaintext,
        pipeline: 1,
    };
    assert!(poll.serves(echo) && poll.serves(kv));
    assert_eq!(poll.lacks(chat), Some(conformance::Need::Chat));
    assert_eq!(poll.lacks(http), Some(conformance::Need::Http));
    // The same flags written as +flags are the same entry.
    assert!(!i.parse("go+model=poll").unwrap().serves(chat));
    // The goroutine model over the loops' sessions serves all but chat.
    let sessions = i.parse("go-sessions").unwrap();
    assert_eq!(sessions.flags, ["--model", "sessions"]);
    assert!([echo, kv, http].iter().all(|&w| sessions.serves(w)));
    assert_eq!(sessions.lacks(chat), Some(conformance::Need::Chat));
    // The other models of the same binary serve everything.
    for name in ["go", "go-eventloop", "go-gnet"] {
        let v = i.parse(name).unwrap();
        assert!(
            [echo, chat, kv, http].iter().all(|&w| v.serves(w)),
            "{name}"
        );
    }
    let process = i.parse("threads-process").unwrap();
    assert_eq!(process.lacks(kv), Some(conformance::Need::Kv));
    assert!(process.serves(chat));
    assert!(is_floor("floor-epoll") && !is_floor("fiber"));
    assert!(
        not_default()
            .iter()
            .any(|(n, about)| *n == "go-poll" && about.contains("idle"))
    );
}

#[test]
fn the_known_servers_are_the_conformance_lists_bench_entries() {
    let names: Vec<&str> = known().map(|k| k.name).collect();
    assert_eq!(
        names,
        [
            "threads",
            "threads-process",
            "reactor",
            "tokio",
            "tokio-per-core",
            "tokio-uring",
            "monoio",
            "compio",
            "compio-tuned",
            "glommio",
            "smol",
            "may",
            "fiber",
            "fiber-plain",
            "go",
            "go-sessions",
            "go-eventloop",
            "go-poll",
            "go-gnet",
            "floor-epoll",
            "floor-uring"
        ]
    );
    // The bench passes `--workers` itself: a listed worker count would be given twice.
    assert!(known().all(|k| !k.flags.contains(&"--workers")));
    let tokio = inv().parse("tokio").unwrap();
    assert_eq!(tokio.flags, ["--flavor", "multi"]);
}

#[test]
fn an_outside_server_is_a_name_and_a_command() {
    let i = inv();
    let v = i.parse("ext:py=python3 echo.py --addr {addr}").unwrap();
    assert_eq!(v.name, "py");
    assert_eq!(v.binary, "ext:py");
    assert_eq!(v.command.as_deref(), Some("python3 echo.py --addr {addr}"));
    assert!(v.flags.is_empty() && v.is_ext());
    assert!(i.missing(&v.binary).is_none());
    for (bad, why) in [
        ("ext:py", "ext:NAME=COMMAND"),
        ("ext:py=", "empty"),
        ("ext:a/b=cat", "+name takes a label"),
    ] {
        let e = i.parse(bad).unwrap_err().to_string();
        assert!(e.contains(why), "{bad}: {e}");
    }
}

#[test]
fn a_command_keeps_its_commas_up_to_the_next_server() {
    let i = inv();
    let v = i
        .select("threads,ext:a=socat TCP-LISTEN:{port},bind={host},fork EXEC:cat,fiber+completer,ext:b=x,y")
        .unwrap();
    let names: Vec<(&str, Option<&str>)> = v
        .iter()
        .map(|v| (v.name.as_str(), v.command.as_deref()))
        .collect();
    assert_eq!(
        names,
        [
            ("threads", None),
            (
                "a",
                Some("socat TCP-LISTEN:{port},bind={host},fork EXEC:cat")
            ),
            ("fiber+completer", None),
            ("b", Some("x,y")),
        ]
    );
}

#[test]
fn an_outside_server_sits_out_chat_and_compute() {
    let v = inv().parse("ext:py=python3 s.py").unwrap();
    let echo = Workload::Echo {
        msg_size: 16,
        compute_us: 0,
    };
    assert!(v.serves(echo));
    assert!(v.serves(Workload::Idle));
    assert!(v.serves(Workload::Kv {
        get: true,
        pipeline: 1,
        driver: crate::plan::suites::KvDriver::Loadgen,
    }));
    assert!(!v.serves(Workload::ChatRoom { room_size: 2 }));
    assert!(!v.serves(Workload::Echo {
        msg_size: 16,
        compute_us: 5,
    }));
}

#[test]
fn a_kernel_without_usable_io_uring_leaves_the_io_uring_servers_out_with_a_line() {
    let mut i = inv();
    i.packages.insert("srv-floor".into(), "server-floor".into());
    i.io_uring = Some("this kernel has no io_uring (ENOSYS); skipping the io_uring servers".into());
    let (run, skipped) = i.defaults();
    let names: Vec<&str> = run.iter().map(|v| v.name.as_str()).collect();
    // srv-fiber is io_uring throughout; srv-floor only with --api io_uring.
    assert!(
        names.contains(&"threads") && names.contains(&"floor-epoll"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"fiber") && !names.contains(&"floor-uring"),
        "{names:?}"
    );
    for name in ["fiber", "floor-uring"] {
        assert!(
            skipped.contains(&format!(
                "{name}: this kernel has no io_uring (ENOSYS); skipping the io_uring servers"
            )),
            "{skipped:?}"
        );
    }
    // Named, it is refused with the reason.
    let e = i.select("threads,fiber+completer").unwrap_err().to_string();
    assert!(
        e.contains("`fiber+completer` cannot run here: this kernel has no io_uring"),
        "{e}"
    );
    // Where io_uring works, both run.
    i.io_uring = None;
    let names: Vec<String> = i.defaults().0.into_iter().map(|v| v.name).collect();
    assert!(names.iter().any(|n| n == "fiber") && names.iter().any(|n| n == "floor-uring"));
}

#[test]
fn a_ring_sweep_is_variants_of_one_server_named_apart() {
    let i = inv();
    let v = i.parse("monoio+sq-entries=4096+name=monoio-4096").unwrap();
    assert_eq!(v.binary, "srv-monoio");
    assert_eq!(v.flags, ["--sq-entries", "4096"]);
    assert_eq!(v.name, "monoio-4096");
    let plain = i.parse("fiber-plain").unwrap();
    assert_eq!(plain.flags, ["--ring-flags", "none", "--plain-recv"]);
    let tuned = i.parse("compio-tuned+cq-entries=65536").unwrap();
    assert_eq!(tuned.flags, ["--tuned", "--cq-entries", "65536"]);
}
