//! `dledger`: Java DLedger's command line (`BossCommand`): `server` runs one member, `append`,
//! `get` and `leadershipTransfer` are client calls against a group.
//!
//! `server` takes the options of Java's `ServerCommand` (`--group`, `--id`, `--peers`,
//! `--store-base-dir`, `--read-only-data-store-dirs`, `--peer-push-throttle-point`,
//! `--peer-push-quotas`, `--preferred-leader-id`) and, beyond Java, every other `DLedgerConfig`
//! field as its kebab-case name (`--max-pending-requests-num 20000`, `--flush-file-interval 10`).
//! Java's `--config-file` (a YAML list of several members for one process) is refused.

use std::process::ExitCode;

use clap::{Arg, ArgAction, ArgMatches, Command};
use dledger::client::DLedgerClient;
use dledger::config::DLedgerConfig;
use dledger::server::DLedgerServer;
use remoting::config::JavaConfig;

/// Java's `ServerCommand` names for keys whose field name differs, with their short forms.
const SERVER_ALIASES: &[(&str, &str, Option<char>)] = &[
    ("group", "group", Some('g')),
    ("selfId", "id", Some('i')),
    ("peers", "peers", Some('p')),
    ("storeBaseDir", "store-base-dir", Some('s')),
    ("peerPushQuota", "peer-push-quotas", None),
    ("preferredLeaderIds", "preferred-leader-id", None),
];

fn kebab(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('-');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn server_command() -> Command {
    let mut cmd = Command::new("server")
        .about("Runs one DLedger member")
        .arg(Arg::new("config-file").long("config-file").short('c').help("Java's YAML proxy config: not supported"));
    for key in DLedgerConfig::keys() {
        let kebab_name = kebab(key);
        let alias = SERVER_ALIASES.iter().find(|(k, _, _)| k == key);
        let long = alias.map_or(kebab_name.clone(), |(_, name, _)| (*name).to_owned());
        let mut arg = Arg::new(*key).long(long.clone()).value_name("VALUE").help(format!("DLedgerConfig.{key}"));
        if long != kebab_name {
            arg = arg.alias(kebab_name);
        }
        if let Some((_, _, Some(short))) = alias {
            arg = arg.short(*short);
        }
        cmd = cmd.arg(arg);
    }
    cmd
}

fn client_args(cmd: Command) -> Command {
    cmd.arg(Arg::new("group").long("group").short('g').default_value("default"))
        .arg(Arg::new("peers").long("peers").short('p').default_value("n0-localhost:20911"))
}

fn cli() -> Command {
    Command::new("dledger")
        .about("DLedger 0.3.1.2 compatible Raft log")
        .subcommand_required(true)
        .subcommand(server_command())
        .subcommand(
            client_args(Command::new("append").about("Appends entries through the leader"))
                .arg(Arg::new("data").long("data").short('d').default_value("Hello"))
                .arg(Arg::new("count").long("count").short('c').default_value("1").value_parser(clap::value_parser!(u64))),
        )
        .subcommand(
            client_args(Command::new("get").about("Reads one entry from the leader"))
                .arg(Arg::new("index").long("index").short('i').default_value("0").value_parser(clap::value_parser!(i64))),
        )
        .subcommand(
            client_args(Command::new("leadershipTransfer").about("Asks the leader to hand over leadership"))
                .arg(Arg::new("leader").long("leader").short('l').required(true))
                .arg(Arg::new("transfereeId").long("transfereeId").short('t').default_value("n0"))
                .arg(Arg::new("term").long("term").default_value("0").value_parser(clap::value_parser!(i64)))
                .arg(Arg::new("verbose").long("verbose").action(ArgAction::SetTrue).hide(true)),
        )
}

fn server_config(m: &ArgMatches) -> Result<DLedgerConfig, String> {
    if m.get_one::<String>("config-file").is_some() {
        return Err("--config-file (Java's YAML list of members) is not supported: give the member's options instead".into());
    }
    let mut config = DLedgerConfig::default();
    for key in DLedgerConfig::keys() {
        if let Some(value) = m.get_one::<String>(key) {
            config.set(key, value).map_err(|e| e.to_string())?;
        }
    }
    config.peer_list().map_err(|e| e.to_string())?;
    Ok(config)
}

fn main() -> ExitCode {
    remoting::process::init_logging();
    let matches = cli().get_matches();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some((name, m)) = matches.subcommand() else { return ExitCode::FAILURE };
    let result = runtime.block_on(async move {
        match name {
            "server" => run_server(m).await,
            _ => run_client(name, m).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

async fn run_server(m: &ArgMatches) -> Result<(), String> {
    let config = server_config(m)?;
    let (group, self_id) = (config.group.clone(), config.self_id.clone());
    let server = DLedgerServer::start(config).await.map_err(|e| format!("the DLedger member failed to start: {e}"))?;
    println!("DLedger member [{group}, {self_id}] listening on {}", server.local_addr());
    remoting::process::wait_for_stop_signal().await;
    server.shutdown().await;
    Ok(())
}

async fn run_client(name: &str, m: &ArgMatches) -> Result<(), String> {
    let arg = |id: &str| m.get_one::<String>(id).cloned().unwrap_or_default();
    let client = DLedgerClient::new(&arg("group"), &arg("peers")).map_err(|e| e.to_string())?;
    let result = match name {
        "append" => {
            let count = m.get_one::<u64>("count").copied().unwrap_or(1);
            for _ in 0..count {
                let response = client.append(arg("data").into_bytes()).await.map_err(|e| e.to_string())?;
                println!("Append Result:{}", String::from_utf8_lossy(&dledger::wire::encode(&response)));
            }
            Ok(())
        }
        "get" => {
            let index = m.get_one::<i64>("index").copied().unwrap_or(0);
            let response = client.get(index).await.map_err(|e| e.to_string())?;
            println!("Get Result:{}", String::from_utf8_lossy(&dledger::wire::encode(&response)));
            for entry in &response.entries {
                println!("Get Result index:{} {}", entry.index, String::from_utf8_lossy(&entry.body));
            }
            Ok(())
        }
        "leadershipTransfer" => {
            let term = m.get_one::<i64>("term").copied().unwrap_or(0);
            let response = client.leadership_transfer(&arg("leader"), &arg("transfereeId"), term).await.map_err(|e| e.to_string())?;
            println!("LeadershipTransfer code={}, Result:{}", response.base.code.0, String::from_utf8_lossy(&dledger::wire::encode(&response)));
            Ok(())
        }
        other => Err(format!("unknown command {other}")),
    };
    client.shutdown();
    result
}
