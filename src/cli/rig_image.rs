//! `proctor rig image build|list [--json]`: the base image, built locally (helper A).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::{Ctx, print_json};
use crate::rigs::image;

/// The rigs' base image: built reproducibly, cached in the data folder.
#[derive(Debug, Args)]
pub struct ImageArgs {
    #[command(subcommand)]
    pub command: ImageCommand,
}

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Build the base image (Debian bookworm minbase; needs mmdebstrap and the network).
    Build {
        #[arg(long)]
        json: bool,
    },
    /// List the images built in this home (the current one marked).
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Serialize)]
struct Built<'a> {
    dir: String,
    current: bool,
    #[serde(flatten)]
    manifest: &'a image::Manifest,
}

pub fn run(ctx: &Ctx, args: ImageArgs) -> anyhow::Result<ExitCode> {
    let home = ctx.home()?;
    match args.command {
        ImageCommand::Build { json } => {
            let started = std::time::Instant::now();
            let (img, manifest) = image::build(&home, &mut |line| eprintln!("rig image: {line}"))?;
            eprintln!(
                "rig image: built {} in {:.0} s",
                img.digest,
                started.elapsed().as_secs_f64()
            );
            if json {
                print_json(&Built {
                    dir: img.dir.display().to_string(),
                    current: true,
                    manifest: &manifest,
                })?;
            } else {
                println!("{}  {}  (current)", manifest.digest, manifest.recipe);
                println!("  kernel   {}", manifest.kernel_release);
                println!("  packages {}", manifest.packages.len());
                println!("  bytes    {}", manifest.bytes);
                println!("  folder   {}", img.dir.display());
            }
        }
        ImageCommand::List { json } => {
            let current = image::current(&home).ok().flatten().map(|i| i.dir);
            let all = image::list(&home)?;
            let rows: Vec<Built> = all
                .iter()
                .map(|(dir, m)| Built {
                    dir: dir.display().to_string(),
                    current: current.as_deref() == Some(dir.as_path()),
                    manifest: m,
                })
                .collect();
            if json {
                print_json(&rows)?;
            } else if rows.is_empty() {
                println!("no rig image built; run `proctor rig image build`");
            } else {
                for r in &rows {
                    println!(
                        "{}{}  {}  {}  kernel {}  {} packages",
                        if r.current { "* " } else { "  " },
                        r.manifest.digest,
                        r.manifest.recipe,
                        r.manifest.built_at,
                        r.manifest.kernel_release,
                        r.manifest.packages.len()
                    );
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
