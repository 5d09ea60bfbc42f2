//! Unit tests of `cli`: option parsing.

use clap::Parser;

use super::{Cli, Command};

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("mcp-code-mode").chain(args.iter().copied()))
}

/// The wrapped command `exec` or `serve` was given.
fn command(args: &[&str]) -> Vec<String> {
    match parse(args).expect("parses").command {
        Command::Exec(exec) => exec.run.command,
        Command::Serve(serve) => serve.run.command,
        other => panic!("not exec or serve: {other:?}"),
    }
}

#[test]
fn every_rootfs_option_names_roots_default_cache() {
    use clap::CommandFactory;
    let mut cli = Cli::command();
    for path in [&["rootfs", "build"][..], &["doctor"], &["serve"], &["exec"]] {
        let mut command = &mut cli;
        for name in path {
            command = command.find_subcommand_mut(name).expect("a subcommand");
        }
        let help = command.render_long_help().to_string();
        assert!(help.contains(crate::rootfs::ROOT_CACHE), "{path:?}: {help}");
        assert!(help.contains("$XDG_CACHE_HOME/mcp-code-mode"), "{path:?}");
    }
}

#[test]
fn max_result_bytes_stops_at_the_longest_message_a_server_may_send() {
    let max = crate::limits::MAX_SERVER_MESSAGE_BYTES.to_string();
    let over = (crate::limits::MAX_SERVER_MESSAGE_BYTES + 1).to_string();
    let with = |bytes: &str| parse(&["exec", "--max-result-bytes", bytes, "--code", "1", "s"]);
    assert!(with(&max).is_ok());
    let error = with(&over).expect_err("past the line cap");
    assert_eq!(error.kind(), clap::error::ErrorKind::ValueValidation);
}

#[test]
fn an_unknown_option_before_code_is_named_in_the_error() {
    for unknown in ["--pool", "--bogus"] {
        let error = parse(&["exec", unknown, "2", "--code", "print(1)", "--", "server"])
            .expect_err("an option exec does not have");
        assert_eq!(error.kind(), clap::error::ErrorKind::UnknownArgument);
        assert!(error.to_string().contains(unknown), "{error}");
    }
}

#[test]
fn the_command_after_a_double_dash_keeps_its_own_options() {
    assert_eq!(
        command(&[
            "exec", "--code", "print(1)", "--", "npx", "-y", "server", "--code", "x"
        ]),
        ["npx", "-y", "server", "--code", "x"]
    );
}

#[test]
fn the_command_without_a_double_dash_starts_at_its_first_word_and_keeps_its_options() {
    assert_eq!(
        command(&["serve", "--pool", "0", "npx", "-y", "server", "--port", "1"]),
        ["npx", "-y", "server", "--port", "1"]
    );
}

#[test]
fn an_env_given_as_name_equals_value_is_refused_saying_env_takes_a_name() {
    let error = parse(&["exec", "--env", "FOO=bar", "--code", "1", "--", "server"])
        .expect_err("FOO=bar is not a variable name");
    assert_eq!(error.kind(), clap::error::ErrorKind::ValueValidation);
    let text = error.to_string();
    assert!(text.contains("--env takes a variable name"), "{text}");
    assert!(text.contains("pass --env FOO"), "{text}");
    assert!(parse(&["exec", "--env", "FOO", "--code", "1", "--", "server"]).is_ok());
}
