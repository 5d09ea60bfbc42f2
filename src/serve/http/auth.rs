//! The bearer token of `serve --http`, and who may bind where without one.
//!
//! Clients send `Authorization: Bearer TOKEN` (RFC 6750 section 2.1) on every request. A
//! missing or wrong token is answered `401 Unauthorized` with a `WWW-Authenticate: Bearer`
//! challenge (RFC 6750 section 3; `error="invalid_token"` when a token was sent), as MCP
//! 2025-11-25 basic/authorization "Error Handling" asks for invalid or missing tokens. The
//! token is a static shared secret, not an OAuth access token: there is no protected
//! resource metadata document (README "Serving over HTTP" says so).
//!
//! The comparison takes the same time whatever the presented token is: both sides are
//! hashed with SHA-256 and the digests compared with `subtle`'s constant-time equality, so
//! neither the content nor the length of the token leaks through timing.

use std::net::SocketAddr;
use std::path::Path;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Environment variable that can hold the token instead of `--http-token-file`.
pub(super) const TOKEN_ENV: &str = "MCP_CODE_MODE_HTTP_TOKEN";
/// Shortest token accepted, in bytes (a guessable token is refused at startup).
pub(super) const MIN_TOKEN_BYTES: usize = 16;

/// A bearer token, kept only as its SHA-256 digest.
#[derive(Clone)]
pub(crate) struct BearerToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

/// Why the token could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenError {
    /// The file could not be read.
    #[error("failed to read the token file {path}: {error}")]
    Read {
        /// The file.
        path: String,
        /// The system's error, shown in this error's text (not also a `source()`, so an
        /// error chain printed with `{:#}` does not say it twice).
        error: std::io::Error,
    },
    /// The token is shorter than [`MIN_TOKEN_BYTES`] (after trimming white space).
    #[error(
        "the HTTP token is {0} bytes; at least {MIN_TOKEN_BYTES} are needed (for example `openssl rand -hex 32`)"
    )]
    TooShort(usize),
    /// The token holds a character a header value cannot carry.
    #[error("the HTTP token must be printable ASCII without spaces")]
    NotPrintable,
}

impl BearerToken {
    /// The token `text`, without surrounding white space.
    ///
    /// # Errors
    /// [`TokenError::TooShort`] or [`TokenError::NotPrintable`].
    pub(crate) fn new(text: &str) -> Result<Self, TokenError> {
        let text = text.trim();
        if text.len() < MIN_TOKEN_BYTES {
            return Err(TokenError::TooShort(text.len()));
        }
        if !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError::NotPrintable);
        }
        Ok(Self {
            digest: Sha256::digest(text.as_bytes()).into(),
        })
    }

    /// The token in `path` (its first line's content; a trailing newline is fine).
    ///
    /// # Errors
    /// [`TokenError`].
    /// A file that the group or others may read draws a warning naming its mode (not a
    /// refusal: a Kubernetes secret volume mounts files 0644 by default, inside a pod
    /// where no other user reads them).
    pub(crate) fn from_file(path: &Path) -> Result<Self, TokenError> {
        if let Some(mode) = readable_by_others(path) {
            tracing::warn!(
                "the token file {} has mode {mode:04o}: its group or other users can read the token; `chmod 600` it",
                path.display()
            );
        }
        let text = std::fs::read_to_string(path).map_err(|error| TokenError::Read {
            path: path.display().to_string(),
            error,
        })?;
        Self::new(&text)
    }

    /// Whether `presented` is this token, in time independent of `presented`.
    pub(crate) fn matches(&self, presented: &[u8]) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        digest.ct_eq(&self.digest).into()
    }
}

/// The permission bits of `path` when its group or other users may read it.
fn readable_by_others(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o7777;
    (mode & 0o044 != 0).then_some(mode)
}

/// What an `Authorization` header value says, against `token`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The right token.
    Allowed,
    /// No `Authorization: Bearer` header.
    Missing,
    /// A bearer token that is not the right one.
    Wrong,
}

/// Check an `Authorization` header value (`None`: absent) against `token`. The scheme
/// name is matched without regard to case (RFC 9110 section 11.1).
pub(super) fn check(token: &BearerToken, header: Option<&[u8]>) -> Verdict {
    let Some(value) = header else {
        return Verdict::Missing;
    };
    let Some((scheme, presented)) = value
        .iter()
        .position(|&b| b == b' ')
        .map(|i| (&value[..i], &value[i + 1..]))
    else {
        return Verdict::Missing;
    };
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return Verdict::Missing;
    }
    if token.matches(presented.trim_ascii()) {
        Verdict::Allowed
    } else {
        Verdict::Wrong
    }
}

/// Refuse to serve `addr` without a token unless the operator opted out with
/// `--http-no-auth` (`no_auth`) and `addr` is a loopback address. Loopback is no boundary
/// between the users of one host: without a token any local user or process could run code
/// and call the wrapped tools with the serving user's credentials; off loopback, anyone who
/// can reach the port could.
///
/// # Errors
/// A message naming the address, the risk, and how to give a token or opt out.
pub(super) fn require_token(
    addr: &SocketAddr,
    token: Option<&BearerToken>,
    no_auth: bool,
) -> Result<(), String> {
    if token.is_some() {
        return Ok(());
    }
    if !addr.ip().is_loopback() {
        return Err(format!(
            "refusing to serve {addr} without a token: it is not a loopback address, so anyone \
who can reach it could run code and call the wrapped tools as you; give --http-token-file FILE \
(at least 16 bytes, e.g. `openssl rand -hex 32 > FILE && chmod 600 FILE`) or set {TOKEN_ENV}"
        ));
    }
    if !no_auth {
        return Err(format!(
            "refusing to serve {addr} without a token: any local user and process on this host \
could run code and call the wrapped tools as you; give --http-token-file FILE (at least 16 \
bytes, e.g. `openssl rand -hex 32 > FILE && chmod 600 FILE`) or set {TOKEN_ENV}, or pass \
--http-no-auth to serve it unauthenticated"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> BearerToken {
        BearerToken::new("0123456789abcdef0123\n").unwrap()
    }

    #[test]
    fn only_the_exact_token_is_allowed() {
        let t = token();
        assert_eq!(
            check(&t, Some(b"Bearer 0123456789abcdef0123")),
            Verdict::Allowed
        );
        assert_eq!(
            check(&t, Some(b"bearer 0123456789abcdef0123")),
            Verdict::Allowed
        );
        assert_eq!(
            check(&t, Some(b"Bearer 0123456789abcdef012")),
            Verdict::Wrong
        );
        assert_eq!(
            check(&t, Some(b"Bearer 0123456789abcdef01234")),
            Verdict::Wrong
        );
        assert_eq!(check(&t, Some(b"Bearer ")), Verdict::Wrong);
        assert_eq!(
            check(&t, Some(b"Basic 0123456789abcdef0123")),
            Verdict::Missing
        );
        assert_eq!(check(&t, Some(b"0123456789abcdef0123")), Verdict::Missing);
        assert_eq!(check(&t, None), Verdict::Missing);
    }

    #[test]
    fn a_token_file_its_group_or_others_can_read_is_noticed() {
        use std::os::unix::fs::PermissionsExt;
        let file = tempfile::NamedTempFile::new().unwrap();
        let set = |mode| {
            std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(mode)).unwrap();
        };
        set(0o644);
        assert_eq!(readable_by_others(file.path()), Some(0o644));
        set(0o640);
        assert_eq!(readable_by_others(file.path()), Some(0o640));
        set(0o600);
        assert_eq!(readable_by_others(file.path()), None);
        set(0o400);
        assert_eq!(readable_by_others(file.path()), None);
    }

    #[test]
    fn short_or_unprintable_tokens_are_refused() {
        assert!(matches!(
            BearerToken::new("short"),
            Err(TokenError::TooShort(5))
        ));
        assert!(matches!(
            BearerToken::new("0123456789 abcdef0123"),
            Err(TokenError::NotPrintable)
        ));
    }

    #[test]
    fn a_token_is_required_unless_no_auth_is_chosen_on_loopback() {
        let public: SocketAddr = "0.0.0.0:8765".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:8765".parse().unwrap();
        let local6: SocketAddr = "[::1]:8765".parse().unwrap();
        for addr in [&public, &local, &local6] {
            assert!(require_token(addr, Some(&token()), false).is_ok());
            let refused = require_token(addr, None, false).unwrap_err();
            assert!(refused.contains("--http-token-file"), "{refused}");
        }
        assert!(
            require_token(&local, None, false)
                .unwrap_err()
                .contains("--http-no-auth")
        );
        assert!(require_token(&public, None, true).is_err());
        assert!(require_token(&local, None, true).is_ok());
        assert!(require_token(&local6, None, true).is_ok());
    }
}
