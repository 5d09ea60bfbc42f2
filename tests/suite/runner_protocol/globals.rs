//! The code's globals: variables kept across cells, the runner's names and stubs, `search_tools`.

use super::{Runner, ok_done};

#[test]
fn variables_persist_across_cells() {
    let mut runner = Runner::start();
    assert_eq!(
        runner.run("x = 41\ndef bump(v):\n    return v + 1"),
        ok_done("")
    );
    assert_eq!(runner.run("print(bump(x))"), ok_done("42\n"));
    assert_eq!(
        runner.run("import asyncio\nawait asyncio.sleep(0)\ny = x"),
        ok_done("")
    );
    assert_eq!(runner.run("print(y, __name__)"), ok_done("41 __main__\n"));
}

#[test]
fn the_runner_names_and_stubs_are_in_the_globals() {
    let mut runner = Runner::start();
    let done = runner.run(
        "print(sorted(TOOLS))\nprint(add.__name__, add.__doc__ == TOOLS['add'])\n\
         print(issubclass(ToolError, Exception), len(dir(__builtins__)) > 100)",
    );
    assert_eq!(
        done,
        ok_done("['add', 'create_issue', 'echo']\nadd True\nTrue True\n")
    );
}

#[test]
fn the_runner_globals_belong_to_main_and_sys_path_is_pythons_own() {
    let mut runner = Runner::start();
    let done = runner.run(
        "import pickle, sys\n\
         print(ToolError.__module__, add.__module__, search_tools.__module__)\n\
         print(pickle.loads(pickle.dumps(ToolError('x'))).args, pickle.loads(pickle.dumps(add)) is add)\n\
         print([p for p in sys.path if 'mcp-code-mode' in p])",
    );
    assert_eq!(
        done,
        ok_done("__main__ __main__ __main__\n('x',) True\n[]\n")
    );
}

#[test]
fn search_tools_scores_names_over_stubs_and_keeps_catalog_order() {
    let mut runner = Runner::start();
    // "add": name of add (2), stub of echo (1). "issue": name of create_issue (2).
    let done = runner.run(
        "print(repr(search_tools('add')))\nprint(repr(search_tools('ISSUE add add')))\n\
         print(repr(search_tools('nothing-here')))\nprint(repr(search_tools('params')))",
    );
    let expected = [
        "'add(a, b): Add two integers.\\necho(text): Echo the text back; to add a note.'",
        "'add(a, b): Add two integers.\\ncreate_issue(title) [private]: File an issue.\\necho(text): Echo the text back; to add a note.'",
        "''",
        "'add(a, b): Add two integers.\\necho(text): Echo the text back; to add a note.\\ncreate_issue(title) [private]: File an issue.'",
    ];
    assert_eq!(done["stdout"], format!("{}\n", expected.join("\n")));
}
