//! Actions: the only code that changes the node, and only when asked.

pub mod kill;
