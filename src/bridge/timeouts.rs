//! The call timeouts in force, as the run_python description states them.

use std::time::Duration;

/// The time one call may take on its wrapped server: a default, and the servers whose
/// entry sets its own. Shown as `30 s per call` or `30 s per call (120 s for slow)`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallTimeouts {
    /// The default (`--call-timeout`).
    pub default: Duration,
    /// Servers with their own timeout: (server name, timeout).
    pub servers: Vec<(String, Duration)>,
}

impl std::fmt::Display for CallTimeouts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = |d: &Duration| {
            let s = d.as_secs_f64();
            if s.fract() == 0.0 {
                format!("{s:.0}")
            } else {
                format!("{s}")
            }
        };
        write!(f, "{} s per call", secs(&self.default))?;
        let own: Vec<String> = self
            .servers
            .iter()
            .filter(|(_, t)| *t != self.default)
            .map(|(name, t)| format!("{} s for {name}", secs(t)))
            .collect();
        if !own.is_empty() {
            write!(f, " ({})", own.join(", "))?;
        }
        Ok(())
    }
}
