//! What the harnesses compare: every operation's result in [`BuddyError`]'s terms, whichever
//! family it returns.

use crate::error::buddy::BuddyError;

/// `r` with its error as a [`BuddyError`].
pub(crate) fn any<T, E: Into<BuddyError>>(r: Result<T, E>) -> Result<T, BuddyError> {
    r.map_err(Into::into)
}
