//! The launcher on its own (tests and checks by hand): `launcher --rootfs DIR ... -- PROGRAM`.
//! The installed product runs the same code as `mcp-code-mode __launcher ...`.

fn main() {
    std::process::exit(launcher::run_from_args(std::env::args_os().skip(1)))
}
