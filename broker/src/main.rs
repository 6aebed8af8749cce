//! `mqbroker`: the broker, started like Java's (`mqbroker -c broker.conf [-n ADDR] [-p]`).

use std::process::ExitCode;

use broker::config::{apply_startup_rules, load_broker_conf, print_all};
use broker::controller::BrokerController;
use clap::Parser;

/// jemalloc, for the reasons in the workspace Cargo.toml.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "mqbroker", about = "RocketMQ broker", disable_help_flag = true)]
struct Args {
    /// Broker config properties file
    #[arg(short = 'c', long = "configFile", value_name = "FILE")]
    config_file: Option<std::path::PathBuf>,
    /// Name server address list, e.g. '192.168.0.1:9876;192.168.0.2:9876'
    #[arg(short = 'n', long = "namesrvAddr", value_name = "ADDR")]
    namesrv_addr: Option<String>,
    /// Serve RocketMQ 5's gRPC API from the broker (Java's local-mode proxy) on grpcServerPort
    #[arg(long = "enable-proxy")]
    enable_proxy: bool,
    /// The proxy's config (rmq-proxy.json) with --enable-proxy; also `-pc FILE`
    #[arg(long = "proxyConfigPath", value_name = "FILE")]
    proxy_config: Option<std::path::PathBuf>,
    /// Print all config items and exit
    #[arg(short = 'p', long = "printConfigItem")]
    print_config: bool,
    /// Print help
    #[arg(short = 'h', long = "help", action = clap::ArgAction::Help)]
    help: Option<bool>,
}

fn main() -> ExitCode {
    remoting::process::init_logging();
    // Java's option is `-pc` (commons-cli takes multi-letter short options; clap does not).
    let args = Args::parse_from(std::env::args().map(|a| if a == "-pc" { "--proxyConfigPath".to_owned() } else { a }));
    let proxy_config = match (&args.proxy_config, args.enable_proxy) {
        (Some(path), true) => match proxy::config::ProxyConfig::load(path) {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        },
        (None, true) => Some(proxy::config::ProxyConfig::default()),
        (_, false) => None,
    };
    let loaded = match &args.config_file {
        Some(path) => load_broker_conf(path).map(|(b, s, unknown)| {
            for key in unknown {
                tracing::warn!(key, "unknown config key ignored");
            }
            println!("load config properties file OK, {}", path.display());
            (b, s)
        }),
        None => broker::config::apply_properties(&Default::default()).map(|(b, s, _)| (b, s)),
    };
    let (mut broker_config, store_config) = match loaded {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(addr) = args.namesrv_addr {
        broker_config.namesrv_addr = addr;
    }
    if args.print_config {
        print!("{}", print_all(&broker_config, &store_config));
        return ExitCode::SUCCESS;
    }
    if let Err(e) = apply_startup_rules(&mut broker_config, &store_config) {
        eprintln!("{e}");
        return ExitCode::FAILURE;
    }
    for setting in broker_config.inert_settings().into_iter().chain(store_config.inert_settings()) {
        tracing::warn!(setting, "this key tunes a part of Java's broker this one does not have; taken, with no effect");
    }
    // Where UPDATE_BROKER_CONFIG persists the config: the -c file, as Java's
    // `BrokerPathConfigHelper`, else `~/store/config/broker.properties`.
    let config_path = args
        .config_file
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default()).join("store").join("config").join("broker.properties"));
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let name = broker_config.broker_name.clone();
        let namesrv = broker_config.namesrv_addr.clone();
        let mut controller = match BrokerController::start_with_file(broker_config, store_config, Some(config_path)).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("The broker failed to start: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Some(mut config) = proxy_config {
            config.proxy_mode = "LOCAL".to_owned();
            match controller.enable_proxy(config).await {
                Ok((grpc, remoting)) => println!("The gRPC proxy (local mode) listens on {grpc}, its remoting port on {remoting}"),
                Err(e) => {
                    eprintln!("The gRPC proxy failed to start: {e}");
                    controller.shutdown().await;
                    return ExitCode::FAILURE;
                }
            }
        }
        println!("The broker[{name}, {}] boot success. serializeType=JSON and name server is {namesrv}", controller.broker.identity.broker_addr);
        remoting::process::wait_for_stop_signal().await;
        controller.shutdown().await;
        ExitCode::SUCCESS
    })
}
