//! Where `--top`'s frames go: a full-screen view refreshed in place (keys
//! sort, filter, pause and quit) when standard output is a terminal, else
//! plain text, one frame after another. The terminal is restored on every
//! way out: quit, Ctrl-C, SIGTERM/SIGHUP, an error or a panic.

use super::{Frame, SortBy, ViewState, PATHS_SHOWN};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const HELP: &str = "q quit  p pause  sort: r req  e err  w watch  l p99  n name  \
                    d<domid>Enter only a domain (d Enter: all)";

pub struct Screen {
    /// None: plain text to standard output.
    terminal: Option<ratatui::DefaultTerminal>,
    view: ViewState,
    frame: Frame,
    heading: String,
    paused: bool,
    /// Digits typed after `d`.
    typing: Option<String>,
    frames: u64,
    /// SIGINT, SIGTERM or SIGHUP arrived.
    signalled: Arc<AtomicBool>,
}

impl Screen {
    /// A full screen when standard output is a terminal, else plain text.
    pub fn open() -> anyhow::Result<Screen> {
        let signalled = Arc::new(AtomicBool::new(false));
        for sig in [
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
        ] {
            signal_hook::flag::register(sig, Arc::clone(&signalled))?;
        }
        let interactive = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
        Ok(Screen {
            // Raw mode and the alternate screen; ratatui's panic hook
            // restores the terminal before the message.
            terminal: interactive.then(ratatui::init),
            view: ViewState::default(),
            frame: Frame::default(),
            heading: "xenstore-snoop --top: waiting for the first refresh".into(),
            paused: false,
            typing: None,
            frames: 0,
            signalled,
        })
    }

    pub fn interactive(&self) -> bool {
        self.terminal.is_some()
    }

    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Frames shown so far (`--count`).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Shows a refresh (kept, not shown, while paused).
    pub fn show(&mut self, frame: Frame, heading: String) -> std::io::Result<()> {
        if self.paused {
            return Ok(());
        }
        self.frame = frame;
        self.heading = heading;
        self.frames += 1;
        match self.terminal {
            Some(_) => self.draw(),
            None => {
                let mut out = std::io::stdout().lock();
                writeln!(out, "{}", self.frame.text(&self.view, &self.heading))?;
                out.flush()
            }
        }
    }

    /// Handles keys for up to `wait` (at once without a terminal); true
    /// when asked to quit (q, Ctrl-C, or a signal).
    pub fn keys(&mut self, wait: Duration) -> std::io::Result<bool> {
        let deadline = Instant::now() + wait;
        loop {
            if self.signalled.load(Ordering::Relaxed) {
                return Ok(true);
            }
            if self.terminal.is_none() {
                return Ok(false);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            // Short polls so that a signal is seen promptly.
            if event::poll(left.min(Duration::from_millis(100)))? {
                match event::read()? {
                    Event::Key(k) if k.kind != KeyEventKind::Release => {
                        let ctrl_c = k.modifiers.contains(KeyModifiers::CONTROL)
                            && k.code == KeyCode::Char('c');
                        if ctrl_c || self.key(k.code) {
                            return Ok(true);
                        }
                        self.draw()?;
                    }
                    Event::Resize(..) => self.draw()?,
                    _ => {}
                }
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
        }
    }

    /// One key; true for quit.
    fn key(&mut self, code: KeyCode) -> bool {
        if let Some(digits) = &mut self.typing {
            match code {
                KeyCode::Char(c) if c.is_ascii_digit() && digits.len() < 5 => digits.push(c),
                KeyCode::Backspace => {
                    digits.pop();
                }
                KeyCode::Enter => {
                    self.view.domain = digits.parse().ok();
                    self.typing = None;
                }
                KeyCode::Esc => self.typing = None,
                _ => {}
            }
            return false;
        }
        match code {
            KeyCode::Char('q') | KeyCode::Esc => return true,
            KeyCode::Char('p') | KeyCode::Char(' ') => self.paused = !self.paused,
            KeyCode::Char('d') => self.typing = Some(String::new()),
            KeyCode::Char(c) => {
                if let Some(k) = SortBy::KEYS.iter().find(|k| k.0 == c) {
                    self.view.sort = k.1;
                }
            }
            _ => {}
        }
        false
    }

    fn draw(&mut self) -> std::io::Result<()> {
        let Some(terminal) = &mut self.terminal else {
            return Ok(());
        };
        let (view, frame) = (&self.view, &self.frame);
        let rows = frame.rows(view);
        let total = rows.iter().fold(0.0, |sum, r| sum + r.requests_per_s);
        let mut status = format!(
            "{}  {total:.1} req/s  {} clients  sort {}",
            self.heading,
            rows.len(),
            view.sort.column()
        );
        if let Some(d) = view.domain {
            status.push_str(&format!("  domain {d} only"));
        }
        if self.paused {
            status.push_str("  [PAUSED]");
        }
        if let Some(digits) = &self.typing {
            status.push_str(&format!("  domain: {digits}_"));
        }
        let bold = Style::default().add_modifier(Modifier::BOLD);
        let sorted = Frame::HEADS
            .iter()
            .position(|h| *h == view.sort.column())
            .unwrap_or(usize::MAX);
        let head = Row::new(Frame::HEADS.iter().enumerate().map(|(i, h)| {
            let style = if i == sorted {
                bold.add_modifier(Modifier::REVERSED)
            } else {
                bold
            };
            Line::styled(*h, style)
        }));
        // Guests stand apart from dom0's processes; errors in red.
        let table = Table::new(
            rows.iter().map(|r| {
                let mut cells = Frame::cells(r).map(Cell::from);
                if r.dom() != 0 {
                    cells[2] =
                        std::mem::take(&mut cells[2]).style(Style::default().fg(Color::Green));
                }
                if r.errors_per_s > 0.0 {
                    cells[4] = std::mem::take(&mut cells[4]).style(Style::default().fg(Color::Red));
                }
                Row::new(cells)
            }),
            [
                Constraint::Length(5),
                Constraint::Length(7),
                Constraint::Length(16),
                Constraint::Length(8),
                Constraint::Length(7),
                Constraint::Length(8),
                Constraint::Length(6),
                Constraint::Length(7),
                Constraint::Length(9),
                Constraint::Length(8),
                Constraint::Min(11),
            ],
        )
        .header(head);
        let mut paths = vec![Line::styled("HOT PATHS (requests/s)", bold)];
        paths.extend(
            frame
                .paths
                .iter()
                .map(|(p, rate)| Line::raw(format!("{rate:>8.1} {}", crate::output::escape(p)))),
        );
        terminal.draw(|f| {
            let [top, middle, bottom, help] = Layout::vertical([
                Constraint::Length(1),
                Constraint::Min(3),
                Constraint::Length(PATHS_SHOWN as u16 + 1),
                Constraint::Length(1),
            ])
            .areas(f.area());
            let banner = bold.fg(Color::Black).bg(Color::Cyan);
            f.render_widget(Paragraph::new(status).style(banner), top);
            f.render_widget(table, middle);
            f.render_widget(Paragraph::new(paths), bottom);
            f.render_widget(Paragraph::new(HELP), help);
        })?;
        Ok(())
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        if self.terminal.take().is_some() {
            ratatui::restore();
        }
    }
}
