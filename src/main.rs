fn main() -> std::process::ExitCode {
    proctor::cli::main()
}
