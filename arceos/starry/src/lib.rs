//! Nothing: this package only names the StarryOS release to fetch.
