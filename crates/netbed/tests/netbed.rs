//! The test bed on this machine: its namespaces reach one another and nothing else, ssh
//! from the server namespace lands in the right client namespace, and nothing outlives
//! it. Where the machine cannot host it (not root, no `ip netns`, no sshd) each test says
//! why and passes.

mod util;

use std::fs;
use std::process::Command;

use netbed::{Error, Testbed};
use util::{ECHO, Listener, can_build, namespaces, stdout_of};

#[test]
fn namespaces_reach_each_other_over_their_links() {
    let builder = Testbed::builder().clients(2).ssh(false);
    if !can_build(&builder, "namespaces_reach_each_other_over_their_links") {
        return;
    }
    let _shared = util::sharing();
    let testbed = builder.build().unwrap();
    for k in 0..testbed.clients() {
        // The server namespace to a listener on client k's address.
        let mut listen = testbed.in_client(k, ECHO);
        listen.args(["listen", &format!("{}:0", testbed.client_addr(k))]);
        let listener = Listener::start(listen);
        let reply = stdout_of(testbed.in_server(ECHO).args([
            "connect",
            &listener.addr.to_string(),
            &format!("to client {k}"),
        ]));
        assert_eq!(reply, format!("echo to client {k}\n"));
    }
    // Every client to one server listening on 0.0.0.0, by the one server address.
    let listener = Listener::start({
        let mut listen = testbed.in_server(ECHO);
        listen.args(["listen", "0.0.0.0:0"]);
        listen
    });
    let server = format!("{}:{}", testbed.server_addr(), listener.addr.port());
    for k in 0..testbed.clients() {
        let reply = stdout_of(testbed.in_client(k, ECHO).args([
            "connect",
            &server,
            &format!("from client {k}"),
        ]));
        assert_eq!(reply, format!("echo from client {k}\n"));
    }
}

#[test]
fn no_namespace_has_a_way_out() {
    let builder = Testbed::builder().clients(2).ssh(false);
    if !can_build(&builder, "no_namespace_has_a_way_out") {
        return;
    }
    let _shared = util::sharing();
    let testbed = builder.build().unwrap();
    let all = [
        testbed.server_namespace(),
        testbed.client_namespace(0),
        testbed.client_namespace(1),
    ];
    for ns in all {
        let default = stdout_of(Command::new("ip").args(["-n", ns, "route", "show", "default"]));
        assert_eq!(default.trim(), "", "{ns} has a default route");
    }
    // A client has no route to another client: the server namespace is no router for them.
    let out = netbed::bounded_output(
        Command::new("ip").args([
            "-n",
            testbed.client_namespace(0),
            "route",
            "get",
            &testbed.client_addr(1).to_string(),
        ]),
        util::TIMEOUT,
    )
    .unwrap();
    assert!(
        !out.status.success(),
        "client0 has a route to client1: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn the_root_namespace_has_no_way_in() {
    let builder = Testbed::builder().clients(2).ssh(false);
    if !can_build(&builder, "the_root_namespace_has_no_way_in") {
        return;
    }
    let _shared = util::sharing();
    let testbed = builder.build().unwrap();
    let ours = [
        testbed.server_addr(),
        testbed.client_addr(0),
        testbed.client_addr(1),
    ];
    // No traffic is sent: a connect from here could leave by the machine's default route,
    // to a network that is not ours. The kernel's choice of route says enough.
    let root_addrs = stdout_of(Command::new("ip").args(["-o", "addr"]));
    for addr in ours {
        assert!(
            !root_addrs.contains(&format!(" {addr}/")),
            "the root namespace has {addr}:\n{root_addrs}"
        );
        let out = netbed::bounded_output(
            Command::new("ip").args(["route", "get", &addr.to_string()]),
            util::TIMEOUT,
        )
        .unwrap();
        let route = String::from_utf8_lossy(&out.stdout);
        // No route at all (unreachable) passes as well as one out of the machine.
        assert!(
            !route.starts_with("local"),
            "{addr} is local to the root namespace: {route}"
        );
        assert!(
            !route.contains("dev veth"),
            "{addr} is routed to a veth in the root namespace: {route}"
        );
    }
    // And the veths of the test bed are all inside it: the server side of each link has
    // its peer in a client namespace, not here.
    let root_links = stdout_of(Command::new("ip").args(["-o", "link"]));
    for k in 0..testbed.clients() {
        let peer = stdout_of(Command::new("ip").args([
            "-n",
            testbed.server_namespace(),
            "-o",
            "link",
            "show",
            &format!("veth-c{k}"),
        ]));
        assert!(
            peer.contains(&format!("link-netns {}", testbed.client_namespace(k))),
            "veth-c{k}'s peer: {peer}"
        );
        assert!(
            !root_links.contains(&format!("veth-c{k}@")),
            "veth-c{k} in the root namespace:\n{root_links}"
        );
    }
}

#[test]
fn ssh_from_the_server_namespace_lands_in_the_right_client_namespace() {
    let builder = Testbed::builder().clients(2);
    if !can_build(
        &builder,
        "ssh_from_the_server_namespace_lands_in_the_right_client_namespace",
    ) {
        return;
    }
    let _shared = util::sharing();
    let testbed = builder.build().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("payload");
    fs::write(&file, "a loadgen binary, say\n").unwrap();
    for k in 0..testbed.clients() {
        let (host, other) = (testbed.ssh_host(k), testbed.client_addr(1 - k));
        let ssh = |args: &[&str]| {
            stdout_of(
                testbed
                    .in_server("ssh")
                    .arg("-F")
                    .arg(testbed.ssh_config())
                    .arg(&host)
                    .args(args),
            )
        };
        assert_eq!(
            ssh(&["ip", "netns", "identify"]).trim(),
            testbed.client_namespace(k)
        );
        let addrs = ssh(&["ip", "-o", "addr"]);
        assert!(
            addrs.contains(&format!(" {}/24 ", testbed.client_addr(k))),
            "{host}:\n{addrs}"
        );
        assert!(
            !addrs.contains(&format!(" {other}/")),
            "{host} has the other client's address:\n{addrs}"
        );
        // scp, as xtask copies loadgen to a client host: its sftp subsystem works.
        let copy = scratch.path().join(format!("copied-{k}"));
        stdout_of(
            testbed
                .in_server("scp")
                .arg("-F")
                .arg(testbed.ssh_config())
                .arg(&file)
                .arg(format!("{host}:{}", copy.display())),
        );
        assert_eq!(
            fs::read_to_string(&copy).unwrap(),
            "a loadgen binary, say\n"
        );
    }
}

#[test]
fn without_sftp_scp_fails_and_an_ssh_session_still_works() {
    let builder = Testbed::builder().sftp(false);
    if !can_build(
        &builder,
        "without_sftp_scp_fails_and_an_ssh_session_still_works",
    ) {
        return;
    }
    let _shared = util::sharing();
    let testbed = builder.build().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("payload");
    fs::write(&file, "a loadgen binary, say\n").unwrap();
    let host = testbed.ssh_host(0);
    let scp = testbed
        .in_server("scp")
        .arg("-F")
        .arg(testbed.ssh_config())
        .arg(&file)
        .arg(format!(
            "{host}:{}",
            scratch.path().join("copied").display()
        ))
        .output()
        .unwrap();
    assert!(
        !scp.status.success(),
        "scp copied without an sftp subsystem"
    );
    // The same bytes through the session itself.
    let copy = scratch.path().join("sent");
    let sent = testbed
        .in_server("ssh")
        .arg("-F")
        .arg(testbed.ssh_config())
        .arg(&host)
        .arg(format!("cat > '{}'", copy.display()))
        .stdin(fs::File::open(&file).unwrap())
        .output()
        .unwrap();
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    assert_eq!(
        fs::read_to_string(&copy).unwrap(),
        "a loadgen binary, say\n"
    );
}

#[test]
fn dropping_the_testbed_removes_everything() {
    let namespaces_only = Testbed::builder().clients(2).ssh(false);
    if !can_build(&namespaces_only, "dropping_the_testbed_removes_everything") {
        return;
    }
    let _shared = util::sharing();
    // The ssh tier where it can run here, for its sshds and files.
    let with_ssh = Testbed::builder().clients(2);
    let testbed = if with_ssh.probe().is_ok() {
        with_ssh.build()
    } else {
        namespaces_only.build()
    }
    .unwrap();
    let names: Vec<String> = [
        testbed.server_namespace(),
        testbed.client_namespace(0),
        testbed.client_namespace(1),
    ]
    .map(str::to_owned)
    .into();
    let present = namespaces();
    for name in &names {
        assert!(present.contains(name), "{name} not in {present:?}");
    }
    // A process left running in a client namespace goes too.
    let _left = Listener::start({
        let mut listen = testbed.in_client(1, ECHO);
        listen.args(["listen", "127.0.0.1:0"]);
        listen
    });
    let pids: Vec<String> = names
        .iter()
        .flat_map(|ns| {
            stdout_of(Command::new("ip").args(["netns", "pids", ns]))
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(!pids.is_empty(), "no process in the test bed's namespaces");
    let config = with_ssh
        .probe()
        .is_ok()
        .then(|| testbed.ssh_config().to_owned());
    drop(testbed);
    let present = namespaces();
    for name in &names {
        assert!(!present.contains(name), "{name} still in {present:?}");
    }
    for pid in &pids {
        // Gone, or a zombie of ours not reaped yet (the listener, reaped when `_left` drops).
        let state = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = state
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .next()
            .unwrap_or("");
        assert!(
            state.is_empty() || state == "Z",
            "process {pid} is still running ({state})"
        );
    }
    if let Some(config) = config {
        assert!(
            !config.exists(),
            "{} outlived the test bed",
            config.display()
        );
        assert!(
            !config.parent().unwrap().exists(),
            "the ssh tier's directory outlived the test bed"
        );
    }
}

#[test]
fn a_failed_setup_removes_what_it_made() {
    // An "sshd" that exits at once: the namespaces and links are made, the sshds fail.
    let builder = Testbed::builder().clients(2).sshd("/bin/false");
    if !can_build(&builder, "a_failed_setup_removes_what_it_made") {
        return;
    }
    // Alone: it looks for every namespace of this process.
    let _alone = util::alone();
    // Test beds of this process; not the scratch namespaces of other tests' probes, which
    // come and go without the lock.
    let ours = format!("ringside-{}-", std::process::id());
    let testbeds = || -> Vec<String> {
        namespaces()
            .into_iter()
            .filter(|n| n.starts_with(&ours) && !n.ends_with("-probe"))
            .collect()
    };
    let before = testbeds();
    let err = builder.build().unwrap_err();
    assert!(matches!(err, Error::Sshd { .. }), "{err}");
    assert!(err.to_string().contains("exited"), "{err}");
    let after = testbeds();
    assert_eq!(before, after, "a failed setup left namespaces behind");
}

#[test]
fn probe_names_what_to_install() {
    let skip = Testbed::builder()
        .sshd("/nonexistent/sshd")
        .probe()
        .unwrap_err()
        .to_string();
    // Unless `ip` itself is missing, which the line then names just as well.
    assert!(
        skip.contains("/nonexistent/sshd") || skip.contains("`ip`"),
        "{skip}"
    );
    assert!(
        skip.contains("apt-get install openssh-server openssh-client iproute2"),
        "{skip}"
    );
    assert!(!skip.contains('\n'), "{skip}");
}

#[test]
fn a_testbed_has_one_to_256_clients() {
    for clients in [0, netbed::MAX_CLIENTS + 1] {
        let err = Testbed::builder()
            .clients(clients)
            .ssh(false)
            .build()
            .unwrap_err();
        assert!(matches!(err, Error::Clients(n) if n == clients), "{err}");
    }
}
