//! The `Date` of every HTTP response: an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`,
//! formatted by `httpdate`), cached per thread and formatted again when the second
//! changes, as the fastest TechEmpower entries do. A reader gets a copy, so nothing holds
//! thread-local state across a point where a fiber could move to another thread.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

use proto::http::DATE_LEN;

thread_local! {
    /// The second since the epoch that `DATE` shows, and the date itself.
    static CACHED: Cell<(u64, [u8; DATE_LEN])> = const { Cell::new((u64::MAX, [0; DATE_LEN])) };
}

/// The current date as an IMF-fixdate.
pub fn now() -> [u8; DATE_LEN] {
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    CACHED.with(|cached| {
        let (at, date) = cached.get();
        if at == second {
            return date;
        }
        let mut fresh = [0; DATE_LEN];
        let text = httpdate::fmt_http_date(now);
        // An IMF-fixdate is always 29 bytes for years 1000 to 9999.
        if text.len() == DATE_LEN {
            fresh.copy_from_slice(text.as_bytes());
        }
        cached.set((second, fresh));
        fresh
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_imf_fixdate() {
        let date = super::now();
        let text = std::str::from_utf8(&date).unwrap();
        assert!(text.ends_with(" GMT"), "{text}");
        assert_eq!(&text[3..5], ", ");
        assert!(httpdate::parse_http_date(text).is_ok(), "{text}");
        assert_eq!(super::now().len(), 29);
    }
}
