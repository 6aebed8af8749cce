//! `mqnamesrv`: the name server, started like Java's (`mqnamesrv [-c FILE] [-p]`).

use std::process::ExitCode;

use clap::Parser;
use namesrv::config::NamesrvConfig;
use namesrv::NamesrvController;
use remoting::config::JavaConfig;

/// jemalloc, for the reasons in the workspace Cargo.toml.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "mqnamesrv", about = "RocketMQ name server", disable_help_flag = true)]
struct Args {
    /// Name server config properties file
    #[arg(short = 'c', long = "configFile", value_name = "FILE")]
    config_file: Option<std::path::PathBuf>,
    /// Print all config items and exit
    #[arg(short = 'p', long = "printConfigItem")]
    print_config: bool,
    /// Print help
    #[arg(short = 'h', long = "help", action = clap::ArgAction::Help)]
    help: Option<bool>,
}

fn load_config(args: &Args) -> anyhow::Result<NamesrvConfig> {
    let mut config = NamesrvConfig::default();
    if let Some(path) = &args.config_file {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read config file {}: {e}", path.display()))?;
        let unknown = config.apply(&remoting::properties::parse(&text))?;
        for key in unknown {
            tracing::warn!(key, "unknown config key ignored");
        }
        // As Java's NamesrvStartup: runtime config updates are persisted back into the -c file.
        config.config_store_path = path.to_string_lossy().into_owned();
        println!("load config properties file OK, {}", path.display());
    }
    Ok(config)
}

fn main() -> ExitCode {
    remoting::process::init_logging();
    let args = Args::parse();
    let config = match load_config(&args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    if args.print_config {
        print!("{}", namesrv::processor::config_text(&config));
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let controller = match NamesrvController::start(config).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("The Name Server failed to start: {e}");
                return ExitCode::FAILURE;
            }
        };
        println!("The Name Server boot success. serializeType=JSON, address {}", controller.local_addr());
        remoting::process::wait_for_stop_signal().await;
        controller.shutdown().await;
        ExitCode::SUCCESS
    })
}
