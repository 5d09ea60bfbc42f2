//! What the code sees when a call does not return a result: a `ToolError` message.
//!
//! Only the bridge's own refusal messages and a server's `isError` text reach the code, each
//! capped at [`MAX_ERROR_CHARS`]; any other fault on the host reaches it only as a type name
//! (test `a_host_fault_raises_in_the_cell_without_its_details`), so no host detail leaks.

use crate::limits::MAX_ERROR_CHARS;

/// Cut `text` to at most `max` characters, ending with `…` when cut.
pub fn cap(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Why a call did not produce a result.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The bridge refused the call; the message is its own and is shown in full (capped).
    Refused(String),
    /// The wrapped server answered with `isError`; its text is shown (capped).
    ToolFailed(String),
    /// Something failed on the host; only this type name reaches the code.
    HostFault(&'static str),
}

impl CallError {
    /// The `ToolError` message for the code, at most [`MAX_ERROR_CHARS`] characters.
    pub fn message(&self) -> String {
        match self {
            Self::Refused(text) | Self::ToolFailed(text) => cap(text, MAX_ERROR_CHARS),
            Self::HostFault(kind) => cap(kind, MAX_ERROR_CHARS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_capped_at_500_characters() {
        let e = CallError::Refused("x".repeat(10_000));
        assert_eq!(e.message().chars().count(), MAX_ERROR_CHARS);
        let e = CallError::ToolFailed("é".repeat(501));
        assert_eq!(e.message().chars().count(), MAX_ERROR_CHARS);
        assert_eq!(
            CallError::HostFault("TransportClosed").message(),
            "TransportClosed"
        );
    }
}
