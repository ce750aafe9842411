//! A child's output collected line by line on a thread, for tests that wait
//! for a line while the child keeps running, then read it all once the
//! child has closed the pipe.

use crate::wait::wait_for;
use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Lines {
    /// Names the stream in failure messages.
    what: String,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
}

impl Lines {
    /// Starts reading `pipe` until EOF.
    pub fn collect(what: &str, pipe: impl Read + Send + 'static) -> Lines {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                match line {
                    Ok(l) => sink.lock().unwrap().push(l),
                    Err(_) => break,
                }
            }
        });
        Lines {
            what: what.to_string(),
            lines,
            reader: Some(reader),
        }
    }

    /// The lines read so far.
    pub fn snapshot(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// True once the writer closed the pipe and every line is in.
    pub fn at_eof(&self) -> bool {
        self.reader.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Line `i` (from 0), waiting up to `timeout` for it.
    pub fn line(&self, i: usize, timeout: Duration) -> String {
        let what = format!("line {} of {}", i + 1, self.what);
        wait_for(&what, timeout, || {
            self.lines.lock().unwrap().len() > i || self.at_eof()
        });
        let lines = self.snapshot();
        match lines.get(i) {
            Some(line) => line.clone(),
            None => panic!("{} ended before {what}: {lines:?}", self.what),
        }
    }

    /// The first line satisfying `pred`, waiting up to `timeout` for it.
    pub fn find(&self, what: &str, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        let mut found = None;
        let waited = crate::wait::wait_until(what, timeout, || {
            found = self.snapshot().into_iter().find(|l| pred(l));
            found.is_some()
        });
        if let Err(e) = waited {
            panic!(
                "{e}: no such line in {}:\n{}",
                self.what,
                self.snapshot().join("\n")
            );
        }
        found.unwrap()
    }

    /// Every line, once the writer has closed the pipe (up to `timeout`).
    pub fn finish(&mut self, timeout: Duration) -> Vec<String> {
        let what = format!("the end of {}", self.what);
        wait_for(&what, timeout, || self.at_eof());
        if let Some(reader) = self.reader.take() {
            reader.join().expect("the line reader panicked");
        }
        self.snapshot()
    }
}
