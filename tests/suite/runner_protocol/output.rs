//! The code's output: truncation, one capture for stderr and threads, the write cap, streaming,
//! lines never broken by threads or signal handlers.

use serde_json::{Value, json};

use super::{Runner, ok_done, wait_exit};

#[test]
fn output_past_eight_kib_is_truncated_on_a_character_boundary() {
    let mut runner = Runner::start();
    let done = runner.run("print('x' * 10000)");
    assert_eq!(done["truncated"], true);
    assert_eq!(done["stopped"], false);
    assert_eq!(done["stdout"].as_str().unwrap().len(), 8192);
    // 'a' then 3-byte characters: byte 8192 falls inside one, which is dropped.
    let done = runner.run("print('a' + '\\u20ac' * 4000)");
    let stdout = done["stdout"].as_str().unwrap();
    assert_eq!(stdout.len(), 1 + 3 * 2730);
    assert_eq!(done["truncated"], true);
}

#[test]
fn stderr_and_threads_share_the_capture() {
    let mut runner = Runner::start();
    let done = runner.run(
        "import sys, threading\nprint('out')\nprint('err', file=sys.stderr)\n\
         t = threading.Thread(target=lambda: print('thread'))\nt.start(); t.join()\n\
         sys.stdout.buffer.write(b'raw\\n')",
    );
    assert_eq!(done, ok_done("out\nerr\nthread\nraw\n"));
}

#[test]
fn writing_a_mebibyte_stops_the_runner_at_once() {
    let mut runner = Runner::start();
    runner.cell("try:\n    while True:\n        print('y' * 1000)\nexcept BaseException:\n    print('caught')\n    while True: pass");
    let done = runner.recv();
    assert_eq!(done["stopped"], true);
    assert_eq!(done["truncated"], true);
    assert_eq!(done["error"], "output limit of 1 MiB exceeded");
    assert_eq!(done["stdout"].as_str().unwrap().len(), 8192);
    assert_eq!(wait_exit(&mut runner.child), 0);
}

#[test]
fn the_stop_message_names_the_limit_it_was_given() {
    let mut runner =
        Runner::start_with(json!({"stdout_keep": 10, "stdout_stop": 100, "error_chars": 2000}));
    let done = {
        runner.cell("print('z' * 200)");
        runner.recv()
    };
    assert_eq!(done["error"], "output limit of 100 bytes exceeded");
    assert_eq!(done["stdout"], "zzzzzzzzzz");
}

/// The `text` of `output` messages, joined; checks each is well formed.
fn joined(outputs: &[Value]) -> String {
    outputs
        .iter()
        .map(|o| {
            assert_eq!(o.as_object().map(|m| m.len()), Some(3), "{o}");
            assert!(o["truncated"].is_boolean(), "{o}");
            o["text"].as_str().expect("output text").to_string()
        })
        .collect()
}

#[test]
fn output_is_streamed_as_it_is_written_a_last_line_without_newline_too() {
    let mut runner = Runner::start();
    runner.cell(
        "print('one', 'two')\nprint('part', end='')\nprint(' flushed', end='', flush=True)\n\
         print(await add({'a': 1, 'b': 2}))\nprint('tail', end='')",
    );
    // Before the call is sent, what was written so far has been streamed, the piece
    // without a newline too.
    let call = runner.recv();
    assert_eq!(call["type"], "call");
    assert_eq!(joined(&runner.take_output()), "one two\npart flushed");
    runner.answer(&call["id"], "3");
    let done = runner.recv();
    assert_eq!(done, ok_done("one two\npart flushed3\ntail"));
    // The unterminated tail was streamed before `done`; nothing is sent after `done`.
    assert_eq!(joined(&runner.take_output()), "3\ntail");
    runner.stdin.take();
    assert_eq!(wait_exit(&mut runner.child), 0);
    assert!(runner.lines.try_recv().is_err(), "a line after done");
}

#[test]
fn streamed_output_stops_at_the_cap_and_says_it_was_cut() {
    let mut runner = Runner::start();
    runner.cell("for i in range(2000):\n    print('line', i)");
    let done = runner.recv();
    let outputs = runner.take_output();
    let streamed = joined(&outputs);
    assert_eq!(streamed, done["stdout"].as_str().unwrap());
    assert!(streamed.len() <= 8192);
    assert_eq!(done["truncated"], true);
    let last = outputs.last().unwrap();
    assert_eq!(last["truncated"], true, "{last}");
    assert!(
        outputs[..outputs.len() - 1]
            .iter()
            .all(|o| o["truncated"] == false)
    );
    // At most one message per write (print writes `line`, ` `, the number, `\n`).
    assert!(outputs.len() <= 4 * 2000, "{}", outputs.len());

    // Invalid bytes become U+FFFD, which is longer: the cap still holds on the text.
    let done = runner.run("import sys\nsys.stdout.buffer.write(b'\\xff' * 9000)");
    assert_eq!(done["truncated"], true);
    let stdout = done["stdout"].as_str().unwrap();
    assert_eq!(stdout, "\u{fffd}".repeat(8192 / 3));
    assert_eq!(joined(&runner.take_output()), stdout);
    // Bytes split over writes are joined; a character cut at the end is replaced.
    let done = runner.run(
        "import sys\nsys.stdout.buffer.write(b'\\xe2\\x82')\nsys.stdout.buffer.write(b'\\xac\\n\\xe2')",
    );
    assert_eq!(done, ok_done("\u{20ac}\n\u{fffd}"));
}

#[test]
fn printing_threads_and_signal_handlers_never_break_a_line() {
    // Eight threads and the main thread print lines of several writes each (print writes
    // each argument, the separators and the end separately), a signal handler prints every
    // half millisecond, and calls go out in between; the interpreter switches threads as
    // often as it can. Every line must arrive whole, each exactly once, in its writer's order.
    let mut runner = Runner::start_with(
        json!({"stdout_keep": 1 << 20, "stdout_stop": 4 << 20, "error_chars": 2000}),
    );
    runner.cell(
        "import asyncio, signal, sys, threading\n\
         sys.setswitchinterval(1e-6)\n\
         signal.signal(signal.SIGALRM, lambda *a: print('tick', 'tock'))\n\
         signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)\n\
         def chatter(n):\n    for i in range(300):\n        print('thread', n, i, sep=' ', end='\\n')\n\
         threads = [threading.Thread(target=chatter, args=(n,)) for n in range(8)]\n\
         for t in threads:\n    t.start()\n\
         results = await asyncio.gather(*(add({'a': i, 'b': 0}) for i in range(20)))\n\
         for i in range(300):\n    print('main', i)\n\
         for t in threads:\n    t.join()\n\
         signal.setitimer(signal.ITIMER_REAL, 0)\nprint(len(results))",
    );
    let mut answered = 0;
    let done = loop {
        let message = runner.recv();
        match message["type"].as_str() {
            Some("call") => {
                runner.answer(&message["id"], "0");
                answered += 1;
            }
            _ => break message,
        }
    };
    assert_eq!(answered, 20);
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["truncated"], false, "{done}");
    let stdout = done["stdout"].as_str().unwrap();
    assert!(stdout.starts_with(&joined(&runner.take_output())));
    assert_eq!(stdout.lines().filter(|l| *l == "20").count(), 1, "{stdout}");
    // Each writer's lines, in the order they arrived.
    let mut seen: std::collections::BTreeMap<String, Vec<u32>> = Default::default();
    let mut ticks = 0;
    for line in stdout.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["tick", "tock"] => ticks += 1,
            ["20"] => {}
            ["thread", n, i] if n.len() == 1 => seen
                .entry(format!("thread {n}"))
                .or_default()
                .push(i.parse().expect("a line number")),
            ["main", i] => seen
                .entry("main".into())
                .or_default()
                .push(i.parse().expect("a line number")),
            _ => panic!("a broken line: {line:?}"),
        }
    }
    assert_eq!(seen.len(), 9, "{seen:?}");
    for (writer, numbers) in &seen {
        assert_eq!(*numbers, (0..300).collect::<Vec<u32>>(), "{writer}");
    }
    assert!(ticks > 0, "the signal handler never printed");
}
